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
from harness.realruns.noveltyconfigs import default_grid
from imprint_core.novelty import NORMALIZATIONS

ROOT = Path(__file__).resolve().parents[3]
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


# ---- progress on a terminal, nothing elsewhere --------------------------------------------------------------------
@pytest.fixture()
def terminal(monkeypatch):
    """stderr as a terminal: the consoles the commands make write into a buffer that claims to be one."""
    import io
    from rich.console import Console
    from harness.cli import console as console_mod
    buf = io.StringIO()
    monkeypatch.setattr(console_mod, "console",
                        lambda stderr=False: Console(file=buf, force_terminal=True, width=120) if stderr
                        else Console(file=io.StringIO(), width=220))
    return buf


def _labelled(tmp_path: Path) -> list[str]:
    from reportdata import fact, gate_toml, round_log
    round_log(tmp_path / "logs" / "lull.jsonl", [[{"result": fact(1)}]] * 4 + [[{"result": fact(2)}]])
    (tmp_path / "labels.yaml").write_text("runs:\n  lull: {should_not_stop_before: 5}\n")
    (tmp_path / "gate.toml").write_text(gate_toml(3))
    return [str(tmp_path / "logs")]


@pytest.mark.parametrize("command", ["check", "report", "tune"])
def test_long_commands_show_progress_on_a_terminal_only(command, tmp_path: Path, monkeypatch, capsys,
                                                         terminal) -> None:
    logs = _labelled(tmp_path)
    argv = {"check": ["check", *logs, "--config", str(tmp_path / "gate.toml"), "--labels", str(tmp_path / "labels.yaml")],
            "report": ["report", *logs, "--out", str(tmp_path / "r"), "--config", str(tmp_path / "gate.toml"),
                       "--labels", str(tmp_path / "labels.yaml")],
            "tune": ["tune", "--corpus", *logs, "--labels", str(tmp_path / "labels.yaml"), "--patience", "3,4",
                     "--jobs", "1", "--no-disk-cache", "--out", str(tmp_path / "t")]}[command]
    assert main(argv) in (0, 1)
    assert f"imprint {command}" in terminal.getvalue()          # the spinner's line, on the terminal
    monkeypatch.undo()
    assert main(argv) in (0, 1)
    assert f"imprint {command}" not in capsys.readouterr().err  # not a terminal: nothing
