"""Write round logs as committed outcome corpora: `<name>.jsonl.gz`, one a run."""
from __future__ import annotations

import gzip
from pathlib import Path

from harness.realruns.importers.convert import render_round_log
from harness.realruns.roundlogs import RoundLog


def write_gz_logs(logs: list[RoundLog], out: Path) -> None:
    """Replace `out/*.jsonl.gz` by the logs: gzip level 9 with mtime 0 and no
    file name in the header, so the same logs give the same bytes."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.jsonl.gz"):
        old.unlink()
    for log in logs:
        (out / f"{log.name}.gz").write_bytes(gzip.compress(render_round_log(log).encode("utf-8"), 9, mtime=0))
