"""The settings registry: metadata, validation, a TOML file, environment.

Effective value = environment override > config file > default. Writes go
through tomlkit so comments, unknown keys and the legacy `chat.max_tool_iters`
survive a save untouched, and replace the file atomically.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .counting import COUNTING_MODES
from .errors import SettingsError, digits_exceeded, too_many_digits
from .files import atomic_write_text


BUILT_IN_RULES = "{built_in_rules}"


@dataclass(frozen=True)
class SettingSpec:
    """A numeric setting (`min`–`max`), or a choice among `choices`."""
    key: str
    type: type
    unit: str
    default: Any
    min: int | None
    max: int | None
    text: str
    choices: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        """The setting's description; `{built_in_rules}` in it stands for the
        stop rules registered as built-ins, read from the registry when asked
        (it imports these settings, so it cannot be read when they load)."""
        if BUILT_IN_RULES not in self.text:
            return self.text
        from .stoprules.registry import available
        return self.text.replace(BUILT_IN_RULES, ", ".join(i.name for i in available() if i.origin == "built-in"))

    @property
    def env(self) -> str:
        return "IMPRINT_" + self.key.upper().replace(".", "_")

    def bounds(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.type is str:
            return "a name or FILE.py:FACTORY (`imprint rules`)"
        return f"{self.min}–{self.max} {self.unit}".strip()

    def to_dict(self) -> dict[str, Any]:
        out = {"key": self.key, "type": self.type.__name__, "unit": self.unit, "default": self.default,
               "min": self.min, "max": self.max, "description": self.description, "env": self.env}
        if self.choices:
            out["choices"] = list(self.choices)
        return out


SPECS: dict[str, SettingSpec] = {s.key: s for s in (
    SettingSpec("chat.research_timeout_sec", int, "seconds", 300, 10, 3600,
                "Wall-clock research budget, counted from the end of provider/model setup."),
    SettingSpec("chat.research_token_budget", int, "tokens", 65_536, 1_024, 2_000_000,
                "Token reservations for all research requests of one reply."),
    # 9, not the record's 4: its first invalidation condition held on real runs
    # (4 stopped 26 of 37 resolved coding runs early); its remedy is to revise
    # patience. `imprint tune` chose 9 (reports/tune/README.md).
    SettingSpec("chat.research_no_progress_rounds", int, "rounds", 9, 2, 20,
                "Consecutive read rounds without new evidence before research stops."),
    # 1,024 matches the research default; 16 is the least a sentence needs and
    # 32,768 the largest context of the models this project runs.
    SettingSpec("chat.max_tokens", int, "tokens", 1_024, 16, 32_768,
                "Output allowance of the tools-free final answer request."),
    # How a remote provider's prompts are counted before a request (a local
    # model always counts with its own tokenizer). See counting.py.
    SettingSpec("chat.token_counting", str, "", "auto", None, None,
                "Remote prompt counting. byte: the record's UTF-8 byte estimate (3 bytes per token). "
                "calibrated: the byte estimate fitted to the provider's measured usage (upper envelope, per "
                "provider and model, kept in the user cache). tokenizer: the server's own chat template and "
                "tokenizer, exact. auto: tokenizer where the provider has one, else calibrated, else byte, "
                "with a trace event saying which it fell back to.",
                choices=COUNTING_MODES),
    # Which stop rule ends research for lack of progress (imprint_core.stoprules).
    # The default is the record's rule as amended (repeat-aware: the record's
    # rule, plus a stop after rounds that only repeat earlier outcomes), which
    # replaced the record's alone by research-loop.md's decision rule
    # (docs/adr/0102-amendment-repeat-aware.md); `record` stays reachable.
    SettingSpec("chat.research_stop_rule", str, "", "repeat-aware", None, None,
                "The stop rule that ends research for lack of progress (default repeat-aware: the record's rule "
                "and a stop after rounds that only repeat; record: the record's rule alone): a built-in (" +
                BUILT_IN_RULES + "), an entry point of imprint.stop_rules, FILE.py:FACTORY or MODULE:FACTORY "
                "(`imprint rules` lists them). Time and token budgets hold under every rule."),
)}
NUMERIC_KEYS: tuple[str, ...] = tuple(k for k, s in SPECS.items() if s.type is int)

# Read from old config files and left in them untouched, never applied.
IGNORED_KEYS = frozenset({"chat.max_tool_iters"})
IGNORED_ENV = frozenset({"IMPRINT_CHAT_MAX_TOOL_ITERS"})


def spec_for(key: str, *, file: str | None = None, line: int | None = None) -> SettingSpec:
    try:
        return SPECS[key]
    except KeyError:
        raise SettingsError("unknown setting", file=file, line=line, key=key,
                            expected="one of " + ", ".join(SPECS)) from None


_INTEGER = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")


def validate(key: str, value: Any, *, source: str | None = None, line: int | None = None) -> Any:
    """Return `value` as the setting's type, or raise naming key, value and bounds."""
    spec = spec_for(key, file=source, line=line)
    if spec.choices:
        text = value.strip() if isinstance(value, str) else None
        if text not in spec.choices:
            raise SettingsError(f"{value!r} is not a valid choice", file=source, line=line, key=key,
                                expected=spec.bounds())
        return text
    if spec.type is str:    # free text, checked where it is used (a stop rule is resolved when a loop is built)
        if not isinstance(value, str) or not value.strip():
            raise SettingsError(f"{value!r} is not a non-empty text", file=source, line=line, key=key,
                                expected=spec.text.split(":")[0].lower() + ": a name or FILE.py:FACTORY")
        return value.strip()
    parsed: int | None = None
    if isinstance(value, bool):
        parsed = None
    elif isinstance(value, int):
        parsed = value
    elif isinstance(value, float) and value.is_integer():
        parsed = int(value)
    elif isinstance(value, str):
        # ASCII digits with an optional sign and single underscores between
        # digits (as TOML and Python write them); anything else is not a number.
        text = value.strip()
        if _INTEGER.fullmatch(text):
            try:
                parsed = int(text)
            except ValueError as exc:   # past Python's digit limit: no setting's bound is that far
                if not digits_exceeded(exc):
                    raise
                raise SettingsError(too_many_digits(), file=source, line=line, key=key,
                                    expected=f"an integer in {spec.bounds()}") from None
    if parsed is None:
        raise SettingsError(f"{value!r} is not an integer", file=source, line=line, key=key,
                            expected=f"an integer in {spec.bounds()}")
    if not spec.min <= parsed <= spec.max:
        raise SettingsError(f"{parsed} is out of bounds", file=source, line=line, key=key,
                            expected=f"{spec.bounds()}")
    return parsed


STOP_RULE = "chat.research_stop_rule"


def check_stop_rule(spec: str) -> str:
    """`spec` if the stop-rule registry resolves it to a rule factory (a
    known name, a FILE.py:FACTORY whose file defines it, an importable
    MODULE:FACTORY), else a SettingsError naming the key, the value and the
    known rules: saved unchecked, an unknown rule, a missing file or
    `os:system` only failed at the next run. The factory is not called."""
    from .errors import UserInputError
    from .stoprules.registry import available, resolve
    try:
        resolve(spec)
    except UserInputError as exc:
        known = ", ".join(info.name for info in available())
        where = f" ({exc.file}{f':{exc.line}' if exc.line else ''})" if exc.file else ""
        raise SettingsError(f"{spec!r} names no stop rule: {exc.message}{where}", key=STOP_RULE,
                            expected=f"one of {known}, or FILE.py:FACTORY, or MODULE:FACTORY "
                                     "(`imprint rules` lists them)") from None
    return spec


@dataclass(frozen=True)
class ResearchSettings:
    """The resolved values one run uses; immutable for the run's duration."""
    research_timeout_sec: int = SPECS["chat.research_timeout_sec"].default
    research_token_budget: int = SPECS["chat.research_token_budget"].default
    research_no_progress_rounds: int = SPECS["chat.research_no_progress_rounds"].default
    max_tokens: int = SPECS["chat.max_tokens"].default
    token_counting: str = SPECS["chat.token_counting"].default
    research_stop_rule: str = SPECS["chat.research_stop_rule"].default

    def __post_init__(self) -> None:
        # Built in code or from a file, a run never sees a value out of bounds
        # (patience 0 would stop after one round that made progress).
        for name, value in self.__dict__.items():
            validate("chat." + name, value, source="ResearchSettings")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str | None = None) -> "ResearchSettings":
        """Build from dotted keys; the legacy key is accepted and ignored."""
        kwargs = {}
        for key, value in values.items():
            if key in IGNORED_KEYS:
                continue
            kwargs[key.removeprefix("chat.")] = validate(key, value, source=source)
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        return {"chat." + k: v for k, v in self.__dict__.items()}


def _toml_problem(text: str, exc: Exception) -> str:
    """tomllib's account of what is wrong (it names the line), else tomlkit's."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return str(e)
    except ValueError as e:     # tomllib lets int()'s refusal of a number past the digit limit through
        if digits_exceeded(e):
            return too_many_digits()
        raise
    return str(exc)


def _toml_line(text: str) -> int | None:
    m = re.search(r"at line (\d+)", _toml_problem(text, Exception()))
    return int(m.group(1)) if m else None


def default_config_path() -> Path:
    env = os.environ.get("IMPRINT_CONFIG")
    if env:
        return Path(env)
    from platformdirs import user_config_dir
    return Path(user_config_dir("imprint")) / "config.toml"


class Settings:
    """get / set / reset / list over the config file and the environment."""

    def __init__(self, path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None):
        self.path = Path(path) if path is not None else default_config_path()
        self.environ = os.environ if environ is None else environ

    # -- file -----------------------------------------------------------------
    def _where(self) -> str:
        """What names the config file: the option or variable it came from."""
        return "IMPRINT_CONFIG" if os.environ.get("IMPRINT_CONFIG") == str(self.path) else "--config"

    def _load_document(self):
        import tomlkit
        from tomlkit.exceptions import ParseError, TOMLKitError
        if self.path.is_dir():
            raise SettingsError("is a folder, not a config file", file=str(self.path), key=self._where(),
                                expected="the path of a TOML file (config.toml)")
        if not self.path.exists():
            return tomlkit.document()
        try:
            text = self.path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise SettingsError(f"not UTF-8 text ({exc.reason})", file=str(self.path)) from None
        except OSError as exc:
            raise SettingsError.from_os_error(exc, doing="read the config file", file=str(self.path)) from None
        try:
            return tomlkit.parse(text)
        except TOMLKitError as exc:   # ParseError, and KeyAlreadyPresent for a key given twice
            twice = re.match(r'Key "(.+)" already exists', str(exc))
            raise SettingsError(f"not valid TOML: {'a key given twice: ' if twice else ''}{_toml_problem(text, exc)}",
                                file=str(self.path), line=(exc.line if isinstance(exc, ParseError) else None) or _toml_line(text),
                                key=twice.group(1) if twice else None,
                                expected="each key once per table" if twice else None) from None

    def _file_values(self) -> dict[str, Any]:
        from tomlkit.items import Item
        doc = self._load_document()
        out: dict[str, Any] = {}
        for key in SPECS:
            section, name = key.split(".", 1)
            table = self._table(doc, section)
            if table is not None and name in table:
                value = table[name]  # tomlkit hands booleans out plain, anything else as an Item
                out[key] = value.unwrap() if isinstance(value, Item) else value
        return out

    def _table(self, doc, section: str):
        """The file's `[section]` table; a key of that name holding anything
        else is a mistake in the file, named as such."""
        table = doc.get(section)
        if table is None or isinstance(table, Mapping):
            return table
        raise SettingsError(f"{section!r} must be a table of settings, not {type(table).__name__}",
                            file=str(self.path), key=section, expected=f"[{section}] with keys such as "
                            + ", ".join(k.split(".", 1)[1] for k in SPECS if k.startswith(section + ".")))

    def _save(self, doc) -> None:
        import tomlkit
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, tomlkit.dumps(doc))
        except OSError as exc:
            raise SettingsError.from_os_error(exc, doing="save the settings", file=str(self.path),
                                              expected="a config folder that can be written") from None

    # -- API --------------------------------------------------------------------
    def get(self, key: str) -> Any:
        return self.describe(key)["value"]

    def describe(self, key: str) -> dict[str, Any]:
        spec = spec_for(key)
        env = self.environ.get(spec.env)
        if env is not None:
            return {**spec.to_dict(), "value": validate(key, env, source=f"environment {spec.env}"), "source": "env"}
        file_values = self._file_values()
        if key in file_values:
            return {**spec.to_dict(), "value": validate(key, file_values[key], source=str(self.path)), "source": "file"}
        return {**spec.to_dict(), "value": spec.default, "source": "default"}

    def list(self) -> list[dict[str, Any]]:
        return [self.describe(k) for k in SPECS]

    def set(self, key: str, value: Any) -> Any:
        parsed = validate(key, value)
        if key == STOP_RULE:
            check_stop_rule(parsed)
        import tomlkit
        doc = self._load_document()
        section, name = key.split(".", 1)
        if self._table(doc, section) is None:
            doc[section] = tomlkit.table()
        doc[section][name] = parsed
        self._save(doc)
        return parsed

    def reset(self, key: str | None = None) -> None:
        """Remove one key (or all) from the file so the default applies;
        every other line of the file is kept."""
        keys = [spec_for(key).key] if key else list(SPECS)
        if not self.path.exists():
            return
        doc = self._load_document()
        for k in keys:
            section, name = k.split(".", 1)
            table = self._table(doc, section)
            if table is not None and name in table:
                del table[name]
        self._save(doc)

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> ResearchSettings:
        values = {k: self.get(k) for k in SPECS}
        for k, v in (overrides or {}).items():
            if k in IGNORED_KEYS:
                continue
            values[k] = validate(k, v)
        return ResearchSettings.from_mapping(values)
