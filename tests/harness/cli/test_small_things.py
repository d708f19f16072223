"""Issue 44 item 11, the small things a new user met: a wrong flag refused
by the sub-command's own usage with the nearest flag suggested, `make
setup` without pip's noise, and our OTel exports replayed under their
scenarios' names."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("argv, usage, said", [
    (["replay", "x.jsonl", "--rounz"], "usage: imprint replay", "unrecognized arguments: --rounz; did you mean --rounds?"),
    (["tune", "--dryrun", "--jbos=2"], "usage: imprint tune",
     "unrecognized arguments: --dryrun --jbos=2; did you mean --dry-run or --jobs?"),
    (["check", "--qqqqqqq=1"], "usage: imprint check", "unrecognized arguments: --qqqqqqq=1\n"),
])
def test_a_wrong_flag_shows_the_sub_command_s_usage_and_the_nearest_flag(capsys, argv, usage, said) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith(usage) and f"imprint {argv[0]}: error: {said}" in err, err
    assert "usage: imprint [-h] COMMAND" not in err


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_setup_passes_pip_minus_q_twice() -> None:
    lines = subprocess.run(["make", "-n", "-B", "setup"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    installs = [line for line in lines if "pip install" in line]
    assert len(installs) == 3 and all(" pip install -q -q " in line for line in installs), installs


def test_export_otel_runs_replay_under_their_scenario_names(tmp_path: Path, capsys) -> None:
    traces = [ROOT / "traces" / "local" / "70-local-research.jsonl", ROOT / "traces" / "local" / "71-local-token-budget.jsonl"]
    out = tmp_path / "x.otlp.jsonl"
    assert main(["export-otel", *map(str, traces), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["replay", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == [f"{out}#local-research", f"{out}#local-token-budget"]
