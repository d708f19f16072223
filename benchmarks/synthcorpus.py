"""Synthetic labelled corpora for the scale benchmark (benchmarks/bench_scale.py):
N round logs (`imprint-rounds/1`) and their labels (`imprint-labels/1`), as
`imprint tune --corpus DIR --labels FILE` reads them.

Each run takes after one of the real labelled corpora (tau-bench,
mini-swe-agent, Who&When, the web runs), drawn in their proportions, and
draws from that corpus's measured distributions: rounds per run, replies
(user turns), call kinds and statuses, result sizes, and how often a result
repeats an earlier one of the same run. Loop runs repeat a stretch of their
own rounds (period 1 or 2) and are labelled with it; useful runs are
labelled `should_not_stop_before` their last round, as the real ones are.
The measured figures are `synthcorpus.json` beside this file; `--measure`
measures them again from the corpora `imprint tune` reads by default.

A corpus is deterministic for (N, seed) and is built once into a cache
outside git: `$IMPRINT_CACHE_DIR/bench-scale/` or the user cache dir's
`imprint/bench-scale/`, one folder per (N, seed, generator version).

    python benchmarks/synthcorpus.py N [--seed S]      # build (or find) it, print its folder
    python benchmarks/synthcorpus.py --measure         # refresh synthcorpus.json from the real corpora
"""
from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import os
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = Path(__file__).with_suffix(".json")
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)
VERSION = 1   # of the generator: a change here builds new corpora


@dataclass(frozen=True)
class Corpus:
    """Where a built corpus is: its round logs and its labels file."""
    root: Path
    runs: Path
    labels: Path
    size: int


def cache_root() -> Path:
    env = os.environ.get("IMPRINT_CACHE_DIR")
    if env:
        return Path(env) / "bench-scale"
    from platformdirs import user_cache_dir
    return Path(user_cache_dir("imprint")) / "bench-scale"


# ---- measuring the real corpora --------------------------------------------------------------------
def _quantiles(values: list[float]) -> list[float]:
    s = sorted(values)
    return [s[round(q * (len(s) - 1))] for q in QUANTILES]


def measure() -> dict:
    """The distributions of the labelled corpora `imprint tune` reads by default."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from harness.analysis.sweep.progress import load_corpora
    from harness.cli.corpora import corpora_from
    corpora, _ = corpora_from(argparse.Namespace())
    runs, _ = load_corpora(corpora)
    out: dict = {"quantiles": list(QUANTILES), "corpora": {}}
    for name in dict.fromkeys(r.corpus for r in runs):
        rs = [r for r in runs if r.corpus == name]
        rounds, replies, sizes, calls = [], [], [], []
        kinds: dict[str, int] = {}
        statuses: dict[str, int] = {}
        repeats = results = 0
        for r in rs:
            rounds.append(r.rounds)
            replies.append(len(r.replies))
            seen: set[str] = set()
            for rep in r.replies:
                for rnd in rep.rounds:
                    calls.append(len(rnd.calls))
                    for c in rnd.calls:
                        kinds[c.kind] = kinds.get(c.kind, 0) + 1
                        statuses[c.status] = statuses.get(c.status, 0) + 1
                        sizes.append(len(c.result))
                        results += 1
                        repeats += c.result in seen
                        seen.add(c.result)
        out["corpora"][name] = {
            "runs": len(rs), "loop_share": round(sum(bool(r.label.loops) for r in rs) / len(rs), 4),
            "rounds": _quantiles(rounds), "replies": _quantiles(replies), "calls_per_round": _quantiles(calls),
            "result_chars": _quantiles(sizes),
            "kinds": {k: round(v / results, 4) for k, v in sorted(kinds.items())},
            "statuses": {k: round(v / results, 4) for k, v in sorted(statuses.items())},
            "repeat_share": round(repeats / max(1, results), 4)}
    return out


# ---- generating ------------------------------------------------------------------------------------
def _draw(rng: random.Random, quantiles: list[float]) -> float:
    """A value of a distribution given by its quantiles (QUANTILES), linear between them."""
    u = rng.random()
    i = min(bisect.bisect_right(QUANTILES, u), len(QUANTILES) - 1)
    lo_q, hi_q = QUANTILES[i - 1], QUANTILES[i]
    lo, hi = quantiles[i - 1], quantiles[i]
    return lo + (hi - lo) * (u - lo_q) / ((hi_q - lo_q) or 1)


def _pick(rng: random.Random, shares: dict[str, float]) -> str:
    return rng.choices(list(shares), weights=list(shares.values()))[0]


_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qu", "an", "er", "in", "os", "ul", "br", "st")
_VOCABULARY = ["".join(random.Random(i).choices(_SYLLABLES, k=1 + i % 4)) + str(i % 7 or "") for i in range(3000)]


class _Texts:
    """Result texts: lines of words, some with volatile tokens (times, ids)
    that the masks take out, so that a repeat is not always byte for byte."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.topic = rng.sample(_VOCABULARY, 300)   # a run's own words, drawn more often

    def words(self, n: int) -> str:
        rng = self.rng
        return " ".join(rng.choice(self.topic) if rng.random() < 0.6 else rng.choice(_VOCABULARY) for _ in range(n))

    def result(self, chars: int) -> str:
        rng, lines, total = self.rng, [], 0
        while total < chars:
            line = self.words(rng.randint(3, 14))
            r = rng.random()
            if r < 0.05:
                line = f"{rng.randint(2020, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} " \
                       f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} {line}"
            elif r < 0.08:
                line = f"{line} id {rng.getrandbits(64):016x}{rng.getrandbits(16):04x}"
            lines.append(line)
            total += len(line) + 1
            if rng.random() < 0.15:
                lines.append("")           # a paragraph break
        return "\n".join(lines)[:max(chars, 0)]

    def volatile(self, text: str) -> str:
        """The same evidence delivered again with its clock moved on."""
        return text.replace(":0", ":1", 1) if ":0" in text else text


def _run(rng: random.Random, profile: dict, loop: bool) -> tuple[list[dict], dict]:
    """(rounds, label) of one run."""
    texts = _Texts(rng)
    n = max(1, round(_draw(rng, profile["rounds"])))
    replies = max(1, min(n, round(_draw(rng, profile["replies"]))))
    rounds: list[dict] = []
    earlier: list[str] = []
    loop_at = (max(2, n // 2), n) if loop and n >= 4 else None
    period = rng.choice((1, 2))
    for number in range(1, n + 1):
        calls = []
        for _ in range(max(1, round(_draw(rng, profile["calls_per_round"])))):
            kind = _pick(rng, profile["kinds"])
            status = _pick(rng, profile["statuses"])
            if loop_at and loop_at[0] <= number <= loop_at[1] and len(rounds) >= period:
                again = rounds[number - 1 - period]["calls"][0]
                calls.append(dict(again))
                continue
            if status == "empty":
                result = ""
            elif earlier and rng.random() < profile["repeat_share"]:
                result = texts.volatile(rng.choice(earlier))
            else:
                result = texts.result(round(_draw(rng, profile["result_chars"])))
                if status == "error":
                    result = "Error: " + result[:200]
            earlier.append(result)
            calls.append({"tool": "search" if kind == "read" else "edit", "args": {"query": texts.words(4)},
                          "kind": kind, "status": status, "result": result})
        rounds.append({"round": number, "calls": calls})
    label: dict = {"loops": [list(loop_at)]} if loop_at else {"should_not_stop_before": n}
    turns = sorted(rng.sample(range(2, n + 1), replies - 1)) if replies > 1 and n > 1 else []
    return rounds, {"label": label, "user_turn_before_round": turns}


def _folder(size: int, seed: int) -> Path:
    figures = hashlib.blake2b(DISTRIBUTIONS.read_bytes(), digest_size=6).hexdigest()
    return cache_root() / f"{size}-seed{seed}-v{VERSION}-{figures}"


def build(size: int, seed: int = 0) -> Corpus:
    """The corpus of `size` runs for `seed`, built unless the cache has it."""
    root = _folder(size, seed)
    corpus = Corpus(root, root / "runs", root / "labels-synthetic.yaml", size)
    if (root / "complete").exists():
        return corpus
    dist = json.loads(DISTRIBUTIONS.read_text(encoding="utf-8"))["corpora"]
    names = list(dist)
    weights = [dist[n]["runs"] for n in names]
    tmp = root.with_name(root.name + f".{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "runs").mkdir(parents=True)
    labels = ["format: imprint-labels/1", f"description: synthetic corpus of {size} runs (seed {seed})", "runs:"]
    for i in range(size):
        rng = random.Random(f"{seed}:{i}")
        name = rng.choices(names, weights=weights)[0]
        profile = dist[name]
        rounds, meta = _run(rng, profile, rng.random() < profile["loop_share"])
        run = f"run-{i:06d}"
        header = {"format": "imprint-rounds/1", "source": f"synthetic, after {name}",
                  "labels": {"task_id": f"task-{i // 4}", "user_turn_before_round": meta["user_turn_before_round"]}}
        lines = [json.dumps(header)] + [json.dumps(r, ensure_ascii=False) for r in rounds]
        (tmp / "runs" / f"{run}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        labels.append(f"  {run}: {json.dumps(meta['label'])}")
    (tmp / "labels-synthetic.yaml").write_text("\n".join(labels) + "\n", encoding="utf-8")
    (tmp / "complete").write_text("")
    shutil.rmtree(root, ignore_errors=True)
    os.replace(tmp, root)
    return corpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("size", nargs="?", type=int, help="runs in the corpus")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--measure", action="store_true", help=f"measure the real corpora into {DISTRIBUTIONS.name}")
    args = ap.parse_args()
    if args.measure:
        figures = measure()
        lines = [f'{{"quantiles": {json.dumps(figures["quantiles"])}, "corpora": {{']
        lines += [f" {json.dumps(n)}: {json.dumps(d)}," for n, d in figures["corpora"].items()]
        DISTRIBUTIONS.write_text("\n".join(lines).rstrip(",") + "}}\n", encoding="utf-8")
        print(DISTRIBUTIONS)
        return 0
    if not args.size:
        ap.error("give a size or --measure")
    print(build(args.size, args.seed).root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
