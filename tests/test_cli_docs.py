"""The README's command table, `--help` and the parser agree: every command
has a row, and every choice the table spells out is the parser's."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.live.servers import SERVER_KINDS
from harness.realruns.importers import FORMATS
from harness.realruns.noveltyfields import default_grid
from imprint_core.novelty import NORMALIZATIONS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

# Options checked by hand rather than by argparse `choices` (so their errors name the key): their choices.
CHECKED_BY_HAND = {("replay", "--normalization"): NORMALIZATIONS, ("import", "--format"): FORMATS}


def _rows() -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in README.splitlines():
        m = re.match(r"^\| `imprint ([a-z-]+)", line)
        if m:
            rows[m.group(1)] = rows.get(m.group(1), "") + line
    return rows


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser):
    """(flag, choices, the parser holding it) of every option, subcommands' included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in action.choices.values():
                yield from _options(sp)
        else:
            for flag in action.option_strings:
                yield flag, action.choices, parser


def test_every_command_has_a_row_and_every_row_a_command() -> None:
    assert sorted(_rows()) == sorted(_commands())


def test_documented_choices_are_the_parsers() -> None:
    rows, checked = _rows(), 0
    for name, parser in _commands().items():
        for flag, choices, holder in _options(parser):
            choices = choices or CHECKED_BY_HAND.get((name, flag))
            if not choices:
                continue
            if flag in rows[name]:
                m = re.search(re.escape(flag) + r" ([\w-]+(?:\\\|[\w-]+)+)", rows[name])
                assert m, f"README: `imprint {name}` names {flag} without its choices"
                assert m.group(1).split("\\|") == list(choices), f"README: imprint {name} {flag}"
                checked += 1
            help_text = " ".join(holder.format_help().split())
            assert all(c in help_text for c in choices), f"--help of imprint {name} {flag}"
    assert checked >= 4        # replay --normalization, import --format, record and smoke --server


def test_the_default_tune_grid_is_documented_as_swept() -> None:
    fields = " × ".join(default_grid()[0])
    assert f"(default: {fields})" in _rows()["tune"]
    assert f"({fields})" in " ".join(_commands()["tune"].format_help().split())


def test_servers_setup_without_a_kind_sets_up_both(monkeypatch) -> None:
    from harness.live import model_folder, servers
    calls = []
    monkeypatch.setattr(servers, "setup_servers", lambda kinds, force=False: calls.append(tuple(kinds)))
    monkeypatch.setattr(model_folder, "build_model_dir", lambda: calls.append("model"))
    assert main(["servers", "setup"]) == 0
    assert calls == ["model", SERVER_KINDS]
    calls.clear()
    assert main(["servers", "setup", "llamacpp"]) == 0 and calls == [("llamacpp",)]


def test_servers_setup_refuses_an_unknown_kind(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["servers", "setup", "vllm"])
    assert exc.value.code == 2 and "invalid choice: 'vllm' (choose from transformers, llamacpp)" in capsys.readouterr().err
