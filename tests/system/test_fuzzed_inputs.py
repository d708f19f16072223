"""Fuzzed inputs through the `imprint` CLI: a valid scenario, round log, trace,
settings file and raw trajectory, each damaged at random (bytes cut, inserted
or swapped, lines dropped or repeated, the file truncated), must end in a
result or in exit 2 naming the file: never an internal error (exit 3), never a
traceback, and never an output written under its final name by a command that
refused its input. The hand-picked cases are in test_malformed_inputs.py;
these find the shapes nobody thought of. Each property runs a bounded number
of examples with a fixed seed, so the suite's time stays fixed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from harness.cli import main
from test_harness_inputs import GOOD, HEADER, _round
from helpers import mini_swe

EXAMPLES = 40
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# The bytes a damaged file is most likely to trip on: the syntax of YAML, JSON and TOML, line ends, a NUL,
# bytes that are not UTF-8, and characters outside the BMP.
NOISE = st.one_of(st.sampled_from([b":", b"{", b"}", b"[", b"]", b"-", b",", b'"', b"'", b"\n", b"\t", b"&a",
                                   b"*a", b"!!python/object:os.system", b"|", b">", b"#", b"=", b"\x00", b"\xff",
                                   b"\xc3", b"1e999", b"-1", b"null", b"\xf0\x9f\x98\x80", b"    "]),
                  st.binary(min_size=1, max_size=8))


@st.composite
def damaged(draw, text: str) -> bytes:
    """`text` with one to three random edits."""
    data = text.encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        edit = draw(st.sampled_from(["cut", "insert", "swap", "drop-line", "repeat-line", "truncate"]))
        i = draw(st.integers(0, len(data)))
        if edit == "cut":
            data = data[:i] + data[i + draw(st.integers(1, 16)):]
        elif edit == "insert":
            data = data[:i] + draw(NOISE) + data[i:]
        elif edit == "swap":
            data = data[:i] + draw(NOISE) + data[i + 1:]
        elif edit == "truncate":
            data = data[:i]
        else:
            lines = data.split(b"\n")
            k = draw(st.integers(0, len(lines) - 1))
            lines[k:k + 1] = [] if edit == "drop-line" else [lines[k], lines[k]]
            data = b"\n".join(lines)
    return data


def judged_or_refused(capsys, argv: list[str], named: Path) -> int:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        assert err.startswith("error:") and str(named) in err, err
    return code


ROUND_LOG = "\n".join([HEADER, _round(1), _round(2, result="other text"), _round(3, status="error")]) + "\n"
SETTINGS = "[chat]\nresearch_timeout_sec = 60\nresearch_token_budget = 8000\nresearch_no_progress_rounds = 3\n"


@FUZZ
@seed(102)
@given(data=damaged(GOOD))
def test_a_damaged_scenario_runs_or_is_refused_by_name(tmp_path_factory, capsys, data: bytes) -> None:
    tmp = tmp_path_factory.mktemp("scn")
    path = tmp / "fuzzed.yaml"
    path.write_bytes(data)
    code = judged_or_refused(capsys, ["run", str(path), "--traces", str(tmp / "runs")], path)
    if code == 2:
        assert not (tmp / "runs").exists(), "a refused scenario writes no run folder"


@FUZZ
@seed(102)
@given(data=damaged(ROUND_LOG))
def test_a_damaged_round_log_replays_or_is_refused_by_name(tmp_path_factory, capsys, data: bytes) -> None:
    path = tmp_path_factory.mktemp("log") / "fuzzed.jsonl"
    path.write_bytes(data)
    judged_or_refused(capsys, ["replay", "--json", str(path)], path)


@pytest.fixture(scope="module")
def trace_text(tmp_path_factory) -> str:
    """A real trace: the one the undamaged scenario writes."""
    tmp = tmp_path_factory.mktemp("good")
    (tmp / "ok.yaml").write_text(GOOD, encoding="utf-8")
    assert main(["run", str(tmp / "ok.yaml"), "--traces", str(tmp / "runs")]) == 0
    (trace,) = (tmp / "runs").glob("*/ok.jsonl")
    return trace.read_text(encoding="utf-8")


@FUZZ
@seed(102)
@given(draw=st.data())
def test_a_damaged_trace_exports_or_is_refused_by_name(tmp_path_factory, capsys, trace_text: str, draw) -> None:
    data = draw.draw(damaged(trace_text))
    tmp = tmp_path_factory.mktemp("trace")
    path, out = tmp / "fuzzed.jsonl", tmp / "rounds.jsonl"
    path.write_bytes(data)
    if judged_or_refused(capsys, ["export-rounds", str(path), "-o", str(out)], path) == 2:
        assert not out.exists() and not list(tmp.glob(".rounds.jsonl.*")), "nothing half-written"


@FUZZ
@seed(102)
@given(data=damaged(SETTINGS))
def test_a_damaged_settings_file_is_read_or_refused_by_name(tmp_path_factory, capsys, monkeypatch,
                                                           data: bytes) -> None:
    for var in ("IMPRINT_CHAT_RESEARCH_TIMEOUT_SEC", "IMPRINT_CHAT_RESEARCH_TOKEN_BUDGET",
                "IMPRINT_CHAT_RESEARCH_NO_PROGRESS_ROUNDS"):
        monkeypatch.delenv(var, raising=False)
    cfg = tmp_path_factory.mktemp("cfg") / "config.toml"
    cfg.write_bytes(data)
    judged_or_refused(capsys, ["settings", "list", "--config", str(cfg)], cfg)
    assert cfg.read_bytes() == data, "reading the settings never rewrites them"


@FUZZ
@seed(102)
@given(data=damaged(json.dumps(mini_swe(), indent=1)))
def test_a_damaged_trajectory_imports_or_is_refused_by_name(tmp_path_factory, capsys, data: bytes) -> None:
    tmp = tmp_path_factory.mktemp("raw")
    (tmp / "raw").mkdir()
    good = tmp / "raw" / "a.traj.json"
    good.write_text(json.dumps(mini_swe()), encoding="utf-8")
    path = tmp / "raw" / "b.traj.json"
    path.write_bytes(data)
    out = tmp / "out"
    if judged_or_refused(capsys, ["import", str(tmp / "raw"), "--out", str(out)], path) == 2:
        assert not out.exists() or not list(out.rglob("*")), "one file refused: none written"


@pytest.mark.parametrize("kind", ["scenario", "round log", "trace", "settings"])
def test_the_undamaged_inputs_are_accepted(tmp_path: Path, capsys, trace_text: str, kind: str) -> None:
    """The fuzzed properties start from files that work: otherwise every
    example would be a refusal and the property would prove little."""
    name, text, argv = {
        "scenario": ("ok.yaml", GOOD, ["run", "{}", "--traces", str(tmp_path / "runs")]),
        "round log": ("in.jsonl", ROUND_LOG, ["replay", "--json", "{}"]),
        "trace": ("t.jsonl", trace_text, ["export-rounds", "{}", "-o", str(tmp_path / "rounds.jsonl")]),
        "settings": ("config.toml", SETTINGS, ["settings", "list", "--config", "{}"]),
    }[kind]
    (tmp_path / name).write_text(text, encoding="utf-8")
    assert main([a.replace("{}", str(tmp_path / name)) for a in argv]) == 0, capsys.readouterr().err
