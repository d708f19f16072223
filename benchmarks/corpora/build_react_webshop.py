"""Build traces/outcomes/react-webshop/ from ReAct's WebShop notebook.

    git -C MIRROR show 6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9:WebShop.ipynb > /tmp/WebShop.ipynb
    python benchmarks/corpora/build_react_webshop.py /tmp/WebShop.ipynb

(MIRROR: a clone of https://github.com/ysymyth/ReAct.) Every printed episode
with at least one tool round is taken (all 500 have one), except the 17
already committed as successful runs under traces/webruns/react-webshop/:
no sampling, so no seed. Conversion is the `react-webshop` import format
(`harness/realruns/importers/webshop.py`: rounds, outcome, task_id); this
script adds the provenance (`react.WEBSHOP`) and writes one gzip file per
episode (`<index>.jsonl.gz`, mtime 0, so a rebuild is byte-identical). The
notebook's sha256 is checked first: another file is refused.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.corpora.gzlogs import write_gz_logs  # noqa: E402
from harness.realruns.importers.react import WEBSHOP  # noqa: E402
from harness.realruns.importers.webshop import import_webshop_notebook  # noqa: E402

SHA256 = "fb8704ec5528e43589924ab33d14eb7f97e82f7cd9da5c02b0295a9be30f9ca6"
"""WebShop.ipynb at the commit in `react.WEBSHOP` (git blob 67cb9f87...)."""
OUT = ROOT / "traces" / "outcomes" / "react-webshop"
ALREADY = ROOT / "traces" / "webruns" / "react-webshop"
"""Episodes committed there (successful, six rounds or more) are not taken again."""
PROVENANCE = {k: WEBSHOP[k] for k in ("repo", "commit", "license", "agent", "tools")} | {"path": "WebShop.ipynb"}


def build(notebook: Path, out: Path = OUT) -> dict[str, int]:
    raw = notebook.read_bytes()
    if hashlib.sha256(raw).hexdigest() != SHA256:
        raise SystemExit(f"{notebook}: not the WebShop.ipynb of {WEBSHOP['repo']}@{WEBSHOP['commit']}")
    logs = import_webshop_notebook(json.loads(raw), "WebShop.ipynb")
    skip = {p.name.removesuffix(".jsonl") for p in ALREADY.glob("*.jsonl")}
    kept = [log for log in logs if log.rounds and log.labels["instance_id"] not in skip]
    for log in kept:
        log.labels.update(PROVENANCE)
    write_gz_logs(kept, out)
    return {"episodes": len(logs), "skipped_in_webruns": len(logs) - len(kept), "written": len(kept)}


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
