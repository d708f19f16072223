"""Settings: defaults, metadata, bounds, file and environment overrides,
reset, the ignored legacy key, and atomic style-preserving saves."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from imprint_core import SPECS, ResearchSettings, Settings, SettingsError, validate
from imprint_core import settings as settings_mod
from imprint_core.settings import NUMERIC_KEYS

EXPECTED = {
    "chat.research_timeout_sec": (300, 10, 3600, "seconds"),
    "chat.research_token_budget": (65_536, 1_024, 2_000_000, "tokens"),
    # the record's range; the default revised from 4 under its first invalidation condition (reports/tune)
    "chat.research_no_progress_rounds": (9, 2, 20, "rounds"),
}
ENV = {
    "chat.research_timeout_sec": "IMPRINT_CHAT_RESEARCH_TIMEOUT_SEC",
    "chat.research_token_budget": "IMPRINT_CHAT_RESEARCH_TOKEN_BUDGET",
    "chat.research_no_progress_rounds": "IMPRINT_CHAT_RESEARCH_NO_PROGRESS_ROUNDS",
    "chat.max_tokens": "IMPRINT_CHAT_MAX_TOKENS",
    "chat.token_counting": "IMPRINT_CHAT_TOKEN_COUNTING",
    "chat.research_stop_rule": "IMPRINT_CHAT_RESEARCH_STOP_RULE",
}

LEGACY_FILE = """\
# my imprint settings
# (kept by hand; do not reformat)

[chat]
# the old round cap, from before ADR 0102
max_tool_iters = 12   # twelve rounds
research_timeout_sec = 60  # one minute

[ui]
theme = "dark"
"""


def make(tmp_path: Path, text: str | None = None, env: dict | None = None) -> Settings:
    path = tmp_path / "cfg" / "config.toml"
    if text is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return Settings(path, environ=env or {})


def test_every_key_with_spec_defaults_and_metadata(tmp_path):
    s = make(tmp_path)
    listed = {d["key"]: d for d in s.list()}
    assert set(listed) == set(ENV)
    for key, (default, lo, hi, unit) in EXPECTED.items():
        d = listed[key]
        assert (d["value"], d["default"], d["min"], d["max"], d["unit"]) == (default, default, lo, hi, unit)
        assert d["type"] == "int" and d["source"] == "default"
        assert d["description"].strip()
        assert d["env"] == ENV[key]
        assert s.get(key) == default
    mt = listed["chat.max_tokens"]
    assert mt["min"] <= mt["default"] <= mt["max"] and mt["unit"] == "tokens"
    assert ResearchSettings() == s.resolve()


@pytest.mark.parametrize("key", list(NUMERIC_KEYS))
def test_exact_bounds_accepted_and_one_past_rejected(tmp_path, key):
    spec = SPECS[key]
    s = make(tmp_path)
    assert s.set(key, spec.min) == spec.min and s.get(key) == spec.min
    assert s.set(key, spec.max) == spec.max and s.get(key) == spec.max
    for bad in (spec.min - 1, spec.max + 1):
        with pytest.raises(SettingsError) as info:
            s.set(key, bad)
        msg = str(info.value)
        assert key in msg and str(bad) in msg and str(spec.min) in msg and str(spec.max) in msg
    assert s.get(key) == spec.max  # a rejected set changed nothing


@pytest.mark.parametrize("bad", ["abc", "", "12.5", 12.5, "1e3", True, None, [5], "ten", "-+5", "²", "1 0"])
def test_non_numeric_rejected_naming_key_value_and_bounds(bad):
    key = "chat.research_timeout_sec"
    with pytest.raises(SettingsError) as info:
        validate(key, bad)
    msg = str(info.value)
    assert key in msg and repr(bad) in msg and "10" in msg and "3600" in msg


def test_numeric_strings_accepted():
    assert validate("chat.research_timeout_sec", "  600 ") == 600
    assert validate("chat.research_token_budget", "100_000") == 100_000
    assert validate("chat.research_timeout_sec", 600.0) == 600


@hsettings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(NUMERIC_KEYS)), st.integers(min_value=-10_000_000, max_value=10_000_000))
def test_property_accepts_exactly_the_bounds(key, value):
    spec = SPECS[key]
    inside = spec.min <= value <= spec.max
    for form in (value, str(value)):
        if inside:
            assert validate(key, form) == value
        else:
            with pytest.raises(SettingsError) as info:
                validate(key, form)
            assert key in str(info.value) and str(spec.min) in str(info.value)


@hsettings(max_examples=300, deadline=None)
@given(st.text(max_size=12))
def test_property_arbitrary_text_is_accepted_or_rejected_cleanly(text):
    """Never a crash other than SettingsError, whatever a person types."""
    key = "chat.research_no_progress_rounds"
    try:
        value = validate(key, text)
    except SettingsError as exc:
        assert key in str(exc)
    else:
        assert 2 <= value <= 20 and int(text.strip().replace("_", "")) == value


def test_file_override_and_env_override(tmp_path):
    s = make(tmp_path, "[chat]\nresearch_timeout_sec = 42\nresearch_no_progress_rounds = 7\n")
    assert s.get("chat.research_timeout_sec") == 42
    assert s.describe("chat.research_timeout_sec")["source"] == "file"
    env = {"IMPRINT_CHAT_RESEARCH_TIMEOUT_SEC": "99", "IMPRINT_CHAT_MAX_TOKENS": "2048"}
    s2 = Settings(s.path, environ=env)
    assert s2.get("chat.research_timeout_sec") == 99
    assert s2.describe("chat.research_timeout_sec")["source"] == "env"
    assert s2.get("chat.max_tokens") == 2048
    assert s2.get("chat.research_no_progress_rounds") == 7  # file still applies to the others
    r = s2.resolve()
    assert (r.research_timeout_sec, r.max_tokens, r.research_no_progress_rounds) == (99, 2048, 7)


@pytest.mark.parametrize("key", list(NUMERIC_KEYS))
def test_each_env_variable_overrides_and_is_validated(tmp_path, key):
    spec = SPECS[key]
    s = Settings(tmp_path / "none.toml", environ={ENV[key]: str(spec.min)})
    assert s.get(key) == spec.min
    bad = Settings(tmp_path / "none.toml", environ={ENV[key]: str(spec.max + 1)})
    with pytest.raises(SettingsError) as info:
        bad.get(key)
    assert key in str(info.value) and str(spec.max + 1) in str(info.value) and ENV[key] in str(info.value)


def test_out_of_range_file_value_rejected_naming_file(tmp_path):
    s = make(tmp_path, "[chat]\nresearch_no_progress_rounds = 1\n")
    with pytest.raises(SettingsError) as info:
        s.get("chat.research_no_progress_rounds")
    assert str(s.path) in str(info.value) and "research_no_progress_rounds" in str(info.value)


def test_set_persists_and_reset_restores_default(tmp_path):
    s = make(tmp_path)
    s.set("chat.research_token_budget", 4096)
    s.set("chat.research_timeout_sec", "120")
    fresh = Settings(s.path, environ={})
    assert fresh.get("chat.research_token_budget") == 4096
    assert fresh.get("chat.research_timeout_sec") == 120
    fresh.reset("chat.research_token_budget")
    assert fresh.get("chat.research_token_budget") == 65_536
    assert fresh.get("chat.research_timeout_sec") == 120
    fresh.reset()
    assert all(d["source"] == "default" for d in Settings(s.path, environ={}).list())
    with pytest.raises(SettingsError):
        fresh.reset("chat.no_such_key")
    with pytest.raises(SettingsError):
        fresh.set("chat.max_tool_iters", 5)


def test_legacy_key_in_file_is_ignored_and_preserved_with_comments(tmp_path):
    s = make(tmp_path, LEGACY_FILE)
    assert s.get("chat.research_timeout_sec") == 60
    assert [d["key"] for d in s.list()] == list(SPECS)  # the legacy key is not a setting
    assert s.resolve() == ResearchSettings(research_timeout_sec=60)
    s.set("chat.research_no_progress_rounds", 6)
    text = s.path.read_text(encoding="utf-8")
    # everything the person wrote survives byte for byte
    for line in LEGACY_FILE.splitlines():
        assert line in text, line
    assert "research_no_progress_rounds = 6" in text
    s.reset()
    text = s.path.read_text(encoding="utf-8")
    assert "max_tool_iters = 12   # twelve rounds" in text
    assert "# the old round cap, from before ADR 0102" in text
    assert 'theme = "dark"' in text
    assert "research_timeout_sec" not in text and "research_no_progress_rounds" not in text


def test_legacy_env_variable_ignored(tmp_path):
    for value in ("3", "not a number", "-1"):
        s = make(tmp_path, LEGACY_FILE, env={"IMPRINT_CHAT_MAX_TOOL_ITERS": value})
        assert s.resolve() == ResearchSettings(research_timeout_sec=60)
        assert len(s.list()) == len(SPECS) == 6
    assert ResearchSettings.from_mapping({"chat.max_tool_iters": 3}) == ResearchSettings()
    assert s.resolve({"chat.max_tool_iters": 1}) == ResearchSettings(research_timeout_sec=60)


def test_atomic_write_leaves_no_temp_files(tmp_path):
    s = make(tmp_path, LEGACY_FILE)
    for v in range(10, 20):
        s.set("chat.research_timeout_sec", v)
    s.reset("chat.research_timeout_sec")
    assert sorted(p.name for p in s.path.parent.iterdir()) == ["config.toml"]


def test_failed_atomic_write_keeps_old_file_and_no_temp(tmp_path, monkeypatch):
    s = make(tmp_path, LEGACY_FILE)
    before = s.path.read_bytes()

    def boom(src, dst):
        raise OSError("simulated crash during rename")

    monkeypatch.setattr(settings_mod.os, "replace", boom)
    with pytest.raises(SettingsError, match="simulated crash during rename"):   # named, exit 2, not a traceback
        s.set("chat.research_timeout_sec", 100)
    assert s.path.read_bytes() == before
    assert sorted(p.name for p in s.path.parent.iterdir()) == ["config.toml"]


def test_atomic_write_gives_new_files_the_umask_mode_and_keeps_an_old_files_mode(tmp_path):
    from imprint_core.files import atomic_write_text
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "new.txt", "a")
        private = tmp_path / "private.txt"
        private.write_text("x")
        private.chmod(0o640)
        atomic_write_text(private, "b")
        os.umask(0o077)
        atomic_write_text(tmp_path / "strict.txt", "c")
    finally:
        os.umask(old)
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o644
    assert private.stat().st_mode & 0o777 == 0o640 and private.read_text() == "b"
    assert (tmp_path / "strict.txt").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.txt", "private.txt", "strict.txt"]


def test_config_path_from_environment(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere" / "imprint.toml"
    monkeypatch.setenv("IMPRINT_CONFIG", str(target))
    s = Settings(environ={})
    assert s.path == target
    s.set("chat.max_tokens", 512)
    assert target.exists() and Settings(environ={}).get("chat.max_tokens") == 512


def test_invalid_toml_is_a_user_error_naming_the_file(tmp_path):
    s = make(tmp_path, "[chat\nresearch_timeout_sec = 5\n")
    with pytest.raises(SettingsError) as info:
        s.get("chat.research_timeout_sec")
    assert str(s.path) in str(info.value)


def test_settings_object_does_not_read_process_env_when_given_environ(tmp_path, monkeypatch):
    monkeypatch.setenv("IMPRINT_CHAT_RESEARCH_TIMEOUT_SEC", "77")
    assert Settings(tmp_path / "c.toml", environ={}).get("chat.research_timeout_sec") == 300
    assert Settings(tmp_path / "c.toml").get("chat.research_timeout_sec") == 77
    assert os.environ["IMPRINT_CHAT_RESEARCH_TIMEOUT_SEC"] == "77"


def test_token_counting_is_a_choice_documented_in_the_list(tmp_path):
    """The counting mode is a setting with four documented choices."""
    s = make(tmp_path)
    d = s.describe("chat.token_counting")
    assert d["value"] == "auto" and d["choices"] == ["byte", "calibrated", "tokenizer", "auto"]
    for mode in d["choices"]:
        assert mode in d["description"]
    assert s.set("chat.token_counting", " byte ") == "byte"
    assert Settings(s.path, environ={}).resolve().token_counting == "byte"
    with pytest.raises(SettingsError) as info:
        s.set("chat.token_counting", "exact")
    assert "chat.token_counting" in str(info.value) and "tokenizer" in str(info.value)
    env = Settings(s.path, environ={"IMPRINT_CHAT_TOKEN_COUNTING": "calibrated"})
    assert env.get("chat.token_counting") == "calibrated"
    with pytest.raises(SettingsError):
        ResearchSettings(token_counting="bytes")


RULE_FILE = "def make(threshold=3):\n    from imprint_core.stoprules.builtin import make_round_cap\n" \
            "    return make_round_cap(threshold)\n"


def test_the_stop_rule_setting_defaults_to_the_amended_rule_and_takes_any_rule_spec(tmp_path, monkeypatch):
    """The default is repeat-aware, which replaced the record's rule by research-loop.md's decision rule
    (docs/adr/0102-amendment-repeat-aware.md); the record's rule stays reachable by name."""
    assert make(tmp_path).get("chat.research_stop_rule") == SPECS["chat.research_stop_rule"].default == "repeat-aware"
    assert make(tmp_path).set("chat.research_stop_rule", "record") == "record"
    s = make(tmp_path, env={"IMPRINT_CHAT_RESEARCH_STOP_RULE": "gemini-cli"})
    assert s.get("chat.research_stop_rule") == "gemini-cli"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "mine.py").write_text(RULE_FILE)
    assert s.set("chat.research_stop_rule", " rules/mine.py:make ") == "rules/mine.py:make"
    assert s.set("chat.research_stop_rule", "imprint_core.stoprules.builtin:make_round_cap") \
        == "imprint_core.stoprules.builtin:make_round_cap"
    for bad in ("", "   ", 3):
        with pytest.raises(SettingsError) as info:
            validate("chat.research_stop_rule", bad)
        assert info.value.key == "chat.research_stop_rule"


@pytest.mark.parametrize("value, words", [
    ("nosuch", "unknown stop rule 'nosuch'"),
    ("rules/missing.py:make", "no such rule file (rules/missing.py)"),
    ("rules/mine.py:other", "defines no 'other'"),
    ("os:system", "built-in function"),
    ("os:walk", "required arguments (top)"),
    ("os:path", "not a factory"),
    ("no_such_module_h7:make", "cannot import module"),
])
def test_setting_the_stop_rule_refuses_what_the_registry_cannot_build(tmp_path, monkeypatch, value, words):
    """It was saved unchecked, an unknown rule, a missing file or `os:system`,
    to fail at the next run (issue 45, item 17); now refused like a bound,
    naming the key, the value and the known rules, the file left as it was."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "mine.py").write_text(RULE_FILE)
    s = make(tmp_path)
    s.set("chat.research_stop_rule", "gemini-cli")
    before = s.path.read_text()
    with pytest.raises(SettingsError) as info:
        s.set("chat.research_stop_rule", value)
    text = str(info.value)
    assert info.value.key == "chat.research_stop_rule" and repr(value) in text and words in text, text
    assert "record, round-cap" in info.value.expected and "FILE.py:FACTORY" in info.value.expected
    assert s.path.read_text() == before


def test_the_stop_rule_setting_names_every_built_in_rule_from_the_registry() -> None:
    # issue 44 item 11: the hand-written list left out two built-ins
    from imprint_core.stoprules import available, register
    description = SPECS["chat.research_stop_rule"].description
    built_ins = [i.name for i in available() if i.origin == "built-in"]
    assert {"outcome-repeat", "repeat-aware", "record", "any"} <= set(built_ins)
    assert f"a built-in ({', '.join(built_ins)})" in description and "{" not in description
    from imprint_core.stoprules import registry
    register("test-only-rule", lambda: None)
    try:
        assert "test-only-rule)" in SPECS["chat.research_stop_rule"].description     # read when asked
    finally:
        registry._BUILTIN.pop("test-only-rule")
    assert SPECS["chat.research_stop_rule"].to_dict()["description"] == description
