"""Inputs the CLI must refuse with exit 2 and one line naming them (never an
internal error, never a half-written output): output folders that are files
or cannot be written, files nested past the parsers' recursion limit, a key
given twice in the settings, a config path that is a folder, YAML alias
bombs; and `imprint import` writing all of its round logs or none."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.cli import main
from imprint_core.errors import SettingsError, UserInputError
from imprint_core.settings import Settings

from helpers import mini_swe

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "01-answer-at-round-1.yaml"
ROOT_USER = os.geteuid() == 0   # root writes into read-only folders: those cases cannot be set up


def refused(capsys, argv: list[str], *needles: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "internal error" not in err and "Traceback" not in err
    for n in needles:
        assert n in err, err
    return err


def read_only(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    return folder


# ---- output folders -------------------------------------------------------------------------------------------
def test_run_traces_given_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    refused(capsys, ["run", str(SCENARIO), "--traces", str(tmp_path / "afile")], "--traces", "afile",
            "a file stands where a folder should be")


@pytest.mark.skipif(ROOT_USER, reason="root can write into a read-only folder")
def test_run_traces_given_a_read_only_folder(tmp_path, capsys):
    refused(capsys, ["run", str(SCENARIO), "--traces", str(read_only(tmp_path / "ro"))], "--traces", "ro")


def raw_trajectories(folder: Path, n: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"t{i}.traj.json").write_text(json.dumps(mini_swe()), encoding="utf-8")
    return folder


TRACE = ROOT / "traces" / "local" / "72-local-time-budget-real-clock.jsonl"


@pytest.mark.parametrize("command", ["export-otel", "export-rounds"])
def test_an_export_output_naming_a_folder_or_below_a_file(tmp_path, capsys, command):
    """-o naming an existing folder was an IsADirectoryError (exit 3) (issue 45, item 15)."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "kept.txt").write_text("mine")
    refused(capsys, [command, str(TRACE), "-o", str(folder)], str(folder), "-o", "is a folder")
    assert [p.name for p in folder.iterdir()] == ["kept.txt"] and not list(tmp_path.glob(".out.*"))
    (tmp_path / "afile").write_text("x")
    refused(capsys, [command, str(TRACE), "-o", str(tmp_path / "afile" / "x.jsonl")], "afile", "-o",
            "a file stands where a folder should be")
    assert (tmp_path / "afile").read_text() == "x"


def test_import_out_given_a_file(tmp_path, capsys):
    (tmp_path / "out").write_text("x")
    refused(capsys, ["import", str(raw_trajectories(tmp_path / "raw")), "--out", str(tmp_path / "out")], "--out")
    assert (tmp_path / "out").read_text() == "x"


def test_import_writes_every_round_log_or_none(tmp_path, capsys):
    """One output file's folder is taken by a file: none of the others is
    written (they used to be, the first ones before the failure)."""
    raw = raw_trajectories(tmp_path / "raw")
    sub = raw_trajectories(raw / "sub", 2)
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").write_text("not a folder")      # out/sub/t0.jsonl cannot be written
    refused(capsys, ["import", str(raw), "--out", str(out)], "--out", "sub")
    assert sorted(p.name for p in out.iterdir()) == ["sub"] and (out / "sub").read_text() == "not a folder"
    assert sub.is_dir()
    # and with the way clear, all five are written
    (out / "sub").unlink()
    assert main(["import", str(raw), "--out", str(out)]) == 0
    assert len(list(out.rglob("*.jsonl"))) == 5 and not [p for p in out.rglob(".*")]


@pytest.mark.skipif(ROOT_USER, reason="root can write into a read-only folder")
def test_import_into_a_read_only_subfolder_writes_nothing(tmp_path, capsys):
    raw = raw_trajectories(tmp_path / "raw")
    raw_trajectories(raw / "sub", 2)
    out = tmp_path / "out"
    read_only(out / "sub")
    refused(capsys, ["import", str(raw), "--out", str(out)], "--out")
    assert sorted(p.name for p in out.iterdir()) == ["sub"]


# ---- nested too deeply ----------------------------------------------------------------------------------------
DEEP = 100_000


def test_json_nested_100000_deep_is_an_input_error(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "deep.traj.json").write_text("[" * DEEP + "]" * DEEP)
    refused(capsys, ["import", str(tmp_path / "raw"), "--out", str(tmp_path / "out")], "deep.traj.json",
            "nested too deeply")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_yaml_nested_100000_deep_is_an_input_error(tmp_path, capsys):
    f = tmp_path / "deep.yaml"
    f.write_text("name: x\nquestion: " + "[" * DEEP + "]" * DEEP + "\n")
    refused(capsys, ["run", str(f), "--traces", str(tmp_path / "runs")], "deep.yaml", "nested too deeply")


def test_a_round_log_line_nested_too_deeply_names_its_line(tmp_path):
    from harness.realruns.roundlogs import read_round_log
    f = tmp_path / "log.jsonl"
    f.write_text('{"format": "imprint-rounds/1", "type": "header"}\n' + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(UserInputError) as info:
        read_round_log(f)
    assert info.value.line == 2 and "nested too deeply" in info.value.describe()


# ---- integers past Python's digit limit (issue 45, item 12): named by place, never "nested too deeply" ------
LONG = "9" * 5000


@pytest.mark.parametrize("name, text, line", [
    ("run.traj.json", '{"messages": [\n{"role": "user", "content": "hi", "n": ' + LONG + "}]}\n", 2),
    ("run.jsonl", '{"role": "user", "content": "hi"}\n{"role": "user", "n": -' + LONG + "}\n", 2),
])
def test_an_imported_run_with_an_integer_of_5000_digits_names_its_line(tmp_path, capsys, name, text, line):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / name).write_text(text)
    err = refused(capsys, ["import", str(tmp_path / "raw" / name), "--out", str(tmp_path / "out")],
                  f"{name}:{line}: an integer of more than 4,300 digits")
    assert "nested too deeply" not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_labels_entry_with_a_long_integer_is_named():
    from harness.yamlsource import load_yaml_entries
    text = "runs:\n  a: {loops: [3, 9]}\n  b: {should_not_stop_before: " + LONG + "}\n"
    with pytest.raises(UserInputError) as info:
        list(load_yaml_entries(text, "labels.yaml", "runs"))
    assert (info.value.file, info.value.line, info.value.key) == ("labels.yaml", 3, "runs.b.should_not_stop_before")


# ---- YAML alias bombs -----------------------------------------------------------------------------------------
def alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["name: bomb", "question: q", "a0: &a0 [" + ",".join(['"lol"'] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("command", ["run", "labels"])
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, capsys, command):
    text = alias_bomb()
    assert len(text.encode()) < 500     # a few hundred bytes standing for 9**9 values
    started = time.monotonic()
    if command == "run":
        f = tmp_path / "bomb.yaml"
        f.write_text(text)
        refused(capsys, ["run", str(f), "--traces", str(tmp_path / "runs")], "bomb.yaml", "aliases")
    else:
        # Labels are read a run at a time: the bomb sits inside one run's label.
        from harness.realruns.labels import parse_labels
        bomb = "".join(f"    {line}\n" for line in text.split("\n", 2)[2].splitlines())
        with pytest.raises(UserInputError, match="aliases"):
            parse_labels("runs:\n  r1:\n    loops: [1, 2]\n" + bomb, "labels.yaml")
    assert time.monotonic() - started < 5


def test_a_recursive_alias_is_refused(tmp_path, capsys):
    f = tmp_path / "rec.yaml"
    f.write_text("name: x\nquestion: &q [1, *q]\n")
    refused(capsys, ["run", str(f), "--traces", str(tmp_path / "runs")], "rec.yaml:2", "recursive")


def test_a_long_file_without_aliases_loads_however_many_values_it_holds():
    # the labels of 100,000 runs: far more values than MAX_NODES, none from an alias
    from harness.yamlsource import MAX_NODES, load_yaml
    n = MAX_NODES // 2 + 1
    text = "runs:\n" + "".join(f"  run-{i}: {{should_not_stop_before: {i % 90 + 1}}}\n" for i in range(n))
    data, lines = load_yaml(text, "labels.yaml")
    assert len(data["runs"]) == n and lines[("runs", f"run-{n - 1}")] == n + 1


def test_aliases_are_allowed_max_nodes_beyond_what_the_file_writes():
    from harness.yamlsource import MAX_NODES, load_yaml
    width = 1000     # one anchor of 1,001 nodes, used k times: each use adds 1,001 values
    base = "a: &a [" + ",".join(["1"] * width) + "]\n"
    fits = MAX_NODES // (width + 1) - 1
    assert len(load_yaml(base + "b: [" + ",".join(["*a"] * fits) + "]\n", "ok.yaml")[0]["b"]) == fits
    with pytest.raises(UserInputError, match="aliases expanded add more than 200,000"):
        load_yaml(base + "b: [" + ",".join(["*a"] * (fits + 2)) + "]\n", "big.yaml")


def test_a_few_aliases_still_load():
    from harness.yamlsource import load_yaml
    data, _ = load_yaml("base: &b {x: 1}\nuse: [*b, *b]\n", "ok.yaml")
    assert data["use"] == [{"x": 1}, {"x": 1}]


# ---- settings -------------------------------------------------------------------------------------------------
def test_a_key_given_twice_in_the_settings_is_named(tmp_path, capsys):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[chat]\nresearch_timeout_sec = 20\nresearch_timeout_sec = 30\n")
    for argv in (["settings", "list"], ["settings", "set", "chat.research_timeout_sec", "40"]):
        err = refused(capsys, [*argv, "--config", str(cfg)], "config.toml:3", "research_timeout_sec", "twice")
        assert err.count("\n") == 1
    with pytest.raises(SettingsError):
        Settings(cfg).list()
    assert cfg.read_text().endswith("= 30\n")


def test_imprint_config_naming_a_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("IMPRINT_CONFIG", str(tmp_path))
    refused(capsys, ["settings", "list"], "IMPRINT_CONFIG", "is a folder")
    refused(capsys, ["settings", "set", "chat.research_timeout_sec", "40"], "IMPRINT_CONFIG", "is a folder")


def test_a_config_folder_that_is_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    refused(capsys, ["settings", "set", "chat.research_timeout_sec", "40", "--config",
                     str(tmp_path / "afile" / "config.toml")], "cannot save the settings")


@pytest.mark.skipif(ROOT_USER, reason="root can write into a read-only folder")
def test_a_read_only_config_folder(tmp_path, capsys):
    refused(capsys, ["settings", "set", "chat.research_timeout_sec", "40", "--config",
                     str(read_only(tmp_path / "ro") / "config.toml")], "cannot save the settings")


def test_a_config_path_that_is_a_folder_raises_a_settings_error(tmp_path):
    with pytest.raises(SettingsError, match="is a folder"):
        Settings(tmp_path).get("chat.research_timeout_sec")


# ---- regress add ----------------------------------------------------------------------------------------------
from helpers import regress, repo, stalled  # noqa: E402,F401 (the fixture, by name)


def test_regress_add_into_a_labels_folder_that_is_a_file(repo, capsys):
    (repo / "afile").write_text("x")
    code = main(["regress", "add", str(stalled(repo)), "--useful-until", "8", "--store", "traces/regressions",
                 "--labels", "afile/regressions.yaml", "--config", "gate.toml"])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err and "afile" in err and "--labels" in err, err
    assert not (repo / "traces" / "regressions").exists() or not any((repo / "traces" / "regressions").iterdir())


@pytest.mark.skipif(ROOT_USER, reason="root can write into a read-only folder")
def test_regress_add_into_a_read_only_labels_folder(repo, capsys):
    read_only(repo / "ro")
    code = main(["regress", "add", str(stalled(repo)), "--useful-until", "8", "--store", "traces/regressions",
                 "--labels", "ro/regressions.yaml", "--config", "gate.toml"])
    assert code == 2 and "internal error" not in capsys.readouterr().err


# ---- servers and smoke: a user's mistake exits 2 as everywhere else (a server that fails to start exits 1) -----
@pytest.fixture()
def no_servers_venv(tmp_path, monkeypatch) -> Path:
    from harness.live.servers import VENV_ENV
    monkeypatch.setenv(VENV_ENV, str(tmp_path / "servers-venv"))
    return tmp_path / "servers-venv"


@pytest.fixture()
def busy_port():
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize("argv", [["servers", "start", "llamacpp"], ["smoke", "record", "--server", "llamacpp"]])
def test_a_server_not_set_up_is_named_with_the_setup_to_run(argv, no_servers_venv, capsys):
    refused(capsys, argv, "llamacpp server is not set up", str(no_servers_venv), "imprint servers setup llamacpp")


@pytest.mark.parametrize("command", [["servers", "start", "llamacpp"], ["smoke", "record", "--server", "llamacpp"]])
def test_a_port_in_use_is_named(command, busy_port, no_servers_venv, monkeypatch, capsys):
    from harness.live import servers
    python = no_servers_venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    monkeypatch.setattr(servers, "is_set_up", lambda kind: True)
    refused(capsys, [*command, "--port", str(busy_port)], f"port {busy_port}", "already in use")


@pytest.mark.parametrize("command", [["servers", "start", "llamacpp"], ["smoke", "record", "--server", "llamacpp"]])
def test_a_port_out_of_range_is_refused_by_the_parser(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*command, "--port", "70000"])
    assert exc.value.code == 2 and "argument --port: port 70000 is out of range" in capsys.readouterr().err


def test_smoke_replay_of_a_missing_cassette_names_it(tmp_path, capsys):
    refused(capsys, ["smoke", "replay", str(tmp_path / "nope.yaml")], "cannot read cassette", "nope.yaml")


def test_smoke_replay_of_a_cassette_without_interactions_names_it(tmp_path, capsys):
    (tmp_path / "empty.yaml").write_text("interactions: []\n")
    refused(capsys, ["smoke", "replay", str(tmp_path / "empty.yaml")], "empty.yaml", "holds no interactions")


def test_a_server_that_fails_to_set_up_exits_1(monkeypatch, capsys):
    from harness.live import model_folder, servers

    def fails(kinds, force=False):
        raise servers.ServerError("command failed with exit status 1: pip install llama-cpp-python")
    monkeypatch.setattr(servers, "setup_servers", fails)
    monkeypatch.setattr(model_folder, "build_model_dir", lambda: None)
    assert main(["servers", "setup", "llamacpp"]) == 1
    assert "error: command failed with exit status 1" in capsys.readouterr().err


def test_smoke_record_into_a_file_is_refused_before_any_server_starts(tmp_path, no_servers_venv, capsys):
    (tmp_path / "afile").write_text("x")
    refused(capsys, ["smoke", "record", "--server", "llamacpp", "--out", str(tmp_path / "afile")], "--out", "afile",
            "a file stands where a folder should be")
    assert (tmp_path / "afile").read_text() == "x"


def test_servers_setup_below_a_file_names_the_variable(tmp_path, monkeypatch, capsys):
    from harness.live import model_folder, servers
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv(servers.VENV_ENV, str(tmp_path / "afile" / "below" / "venv"))
    monkeypatch.setattr(servers, "setup_servers", lambda kinds, force=False: pytest.fail("setup ran"))
    monkeypatch.setattr(model_folder, "build_model_dir", lambda: pytest.fail("the model was built first"))
    refused(capsys, ["servers", "setup", "llamacpp"], servers.VENV_ENV, "a file stands where a folder should be")
