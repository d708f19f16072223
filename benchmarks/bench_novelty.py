"""Novelty-tracker throughput and memory benchmark (a script, not a test).

Generates ~10 MB of realistic research-tool output deterministically (search
results as JSON arrays of hits with titles, tracked URLs, snippets, scores and
dates; fetched documents as paragraphs; file reads with line numbers; the same
evidence coming back reordered, rescored and re-timestamped, and in cycles),
then measures in one run, on the same input:

- our NoveltyTracker (observe_round over the rounds; `default`, `basic`, `none`),
  on the compiled path where it is built, and `default` on the pure-Python
  path too (IMPRINT_NOVELTY_PURE's path; the same verdicts, asserted),
- datasketch MinHash(num_perm=128) over the same paragraphs' 5-word shingles,
- rensa (a Rust MinHash) RMinHash(num_perm=128) over the same shingles, when
  installed (the `test` extra has it; skipped otherwise),
- plain xxhash (xxh3_64) and blake2b of the same bytes,

and the tracker's traced memory over a 10,000-round synthetic run. Results go
to reports/bench/novelty.json; a short table is printed.

    python benchmarks/bench_novelty.py [--mb 10] [--repeat 3] [--out PATH]
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import random
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import xxhash  # noqa: E402

from imprint_core.novelty import SHINGLE_WORDS, WINDOW_WORDS, NoveltyConfig, NoveltyTracker, normalize, segment  # noqa: E402
from imprint_core.novelty._fast import accel  # noqa: E402

TARGET_MB_S = 25.0
TARGET_RATIO = 10.0
TARGET_VS_RENSA = 0.5
SEED = 20240521

# ---------------------------------------------------------------- corpus ---

_COMMON = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
           "they you were her she there been one all we their has would when if so no will more can about its out "
           "also than them into only other new some could time these two may then first any like now over such our "
           "most after made many where between through during without against under while both each those however").split()
_SYL = ("ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge gi go ha he hi ho ka ke ki ko la le li lo lu "
        "ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo za "
        "tion ment ness able ing er est ly al ic ous ive ize").split()
_ACCENTED = ["café", "naïve", "résumé", "Zürich", "São", "coöperate", "Ångström", "ﬁnance", "Straße", "déjà"]
_TLDS = ("com", "org", "net", "io", "edu", "gov", "co.uk", "de")


class Corpus:
    """Deterministic generator of research-tool results."""

    def __init__(self, seed: int = SEED):
        self.r = random.Random(seed)
        r = self.r
        vocab = set()
        while len(vocab) < 6000:
            vocab.add("".join(r.choice(_SYL) for _ in range(r.choice((1, 2, 2, 3, 3, 4)))))
        self.vocab = sorted(vocab)
        # Zipf-like weights: common words dominate, a long tail carries content.
        self.words = _COMMON + self.vocab
        self.cum = []
        acc = 0.0
        for i in range(len(self.words)):
            acc += 1.0 / (i + 8) ** 1.05
            self.cum.append(acc)
        self.hosts = [f"{'www.' if r.random() < .6 else ''}{self.word()}{self.word()}.{r.choice(_TLDS)}" for _ in range(400)]
        self.uid = 0

    def word(self) -> str:
        return self.r.choices(self.words, cum_weights=self.cum, k=1)[0]

    def _token(self) -> str:
        r = self.r
        x = r.random()
        if x < 0.03:
            return f"{r.randint(2, 2000)}"                      # counts: kept, they can be facts
        if x < 0.04:
            return f"${r.randint(1, 999)}.{r.randint(0, 99):02d}"  # prices
        if x < 0.045:
            return f"v{r.randint(0, 9)}.{r.randint(0, 30)}.{r.randint(0, 9)}"
        if x < 0.05:
            return f"{r.randint(1990, 2025)}"                   # years
        if x < 0.052:
            return r.choice(_ACCENTED)
        w = self.word()
        return w.capitalize() if r.random() < 0.06 else w

    def sentence(self) -> str:
        r = self.r
        n = r.randint(8, 26)
        toks = [self._token() for _ in range(n)]
        toks[0] = toks[0].capitalize()
        if n > 12 and r.random() < 0.4:
            toks[r.randrange(3, n - 3)] += ","
        return " ".join(toks) + r.choice((".", ".", ".", ".", "?", "!", ";"))

    def paragraph(self, lo: int = 2, hi: int = 7) -> str:
        return " ".join(self.sentence() for _ in range(self.r.randint(lo, hi)))

    def date(self) -> str:
        r = self.r
        y, m, d = r.randint(2015, 2025), r.randint(1, 12), r.randint(1, 28)
        style = r.random()
        if style < 0.5:
            return f"{y}-{m:02d}-{d:02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z"
        if style < 0.75:
            return f"{y}-{m:02d}-{d:02d}"
        months = "January February March April May June July August September October November December".split()
        return f"{months[m - 1]} {d}, {y}"

    def url(self, host: str, slug: str) -> str:
        r = self.r
        q = [f"q={'+'.join(self.word() for _ in range(r.randint(1, 4)))}"]
        if r.random() < 0.7:
            q.append(f"utm_source={r.choice(('search', 'feed', 'newsletter'))}&utm_campaign={r.randint(1, 99999)}")
        if r.random() < 0.4:
            q.append(f"sid={r.getrandbits(96):024x}")
        frag = f"#section-{r.randint(1, 20)}" if r.random() < 0.2 else ""
        return f"https://{host}/{slug}?{'&'.join(q)}{frag}"

    # A hit keeps its content; a re-run of the search changes its volatile parts.
    def new_hit(self) -> dict:
        r = self.r
        title_words = [self.word() for _ in range(r.randint(4, 11))]
        self.uid += 1
        return {
            "title": " ".join(title_words).title(),
            "host": r.choice(self.hosts),
            "slug": "/".join(["-".join(title_words[:5]), str(self.uid)]),
            "snippet": self.paragraph(1, 3),
        }

    def render_hits(self, hits: list[dict]) -> str:
        r = self.r
        out = []
        for rank, h in enumerate(hits, 1):
            item = {"rank": rank, "title": h["title"], "url": self.url(h["host"], h["slug"]),
                    "snippet": h["snippet"], "score": round(r.uniform(0.2, 0.99), 4),
                    "published": self.date(), "retrieved_at": self.date()}
            if r.random() < 0.3:
                item["id"] = f"{r.getrandbits(128):032x}"
            out.append(item)
        return json.dumps(out, ensure_ascii=False)

    def new_doc(self) -> list[str]:
        r = self.r
        return [self.paragraph(2, 9) for _ in range(r.randint(3, 12))]

    def render_doc(self, paras: list[str]) -> str:
        r = self.r
        head = f"Source: {self.url(r.choice(self.hosts), 'doc/' + self.word())}\nFetched {self.date()} at {r.randint(1, 12)}:{r.randint(0, 59):02d} pm"
        tail = f"Last updated {r.randint(1, 59)} minutes ago. Request id {r.getrandbits(128):032x}."
        return "\n\n".join([head, *paras, tail])

    def new_file(self) -> list[str]:
        r = self.r
        return [f"{'    ' * r.randint(0, 2)}{' '.join(self.word() for _ in range(r.randint(2, 12)))}" for _ in range(r.randint(20, 80))]

    def render_file(self, lines: list[str], start: int) -> str:
        return "\n".join(f"{start + i:>5}: {line}" for i, line in enumerate(lines))


def generate_rounds(target_bytes: int, seed: int = SEED) -> list[list[tuple[str, str, None]]]:
    """Rounds of (status, text, segments) results, ~target_bytes of UTF-8 in all.

    About a third of the results re-deliver earlier evidence with new ranks,
    scores, tracking parameters and timestamps; some of those come back in
    cycles. A few results are empty reads and errors."""
    c = Corpus(seed)
    r = c.r
    rounds: list[list[tuple[str, str, None]]] = []
    searches: list[list[dict]] = []
    docs: list[list[str]] = []
    files: list[list[str]] = []
    total = 0
    cycle: list = []
    while total < target_bytes:
        results: list[tuple[str, str, None]] = []
        for _ in range(r.choice((1, 2, 2, 3, 3, 4))):
            x = r.random()
            if cycle and x < 0.12:               # a cycle A B C A B C ...
                kind, obj = cycle[len(rounds) % len(cycle)]
                text = c.render_hits(r.sample(obj, len(obj))) if kind == "s" else c.render_doc(obj)
            elif x < 0.30 and searches:          # the same hits, reordered and rescored
                old = r.choice(searches[-40:])
                text = c.render_hits(r.sample(old, len(old)))
            elif x < 0.36 and docs:              # a page fetched again
                text = c.render_doc(r.choice(docs[-30:]))
            elif x < 0.62:
                hits = [c.new_hit() for _ in range(r.randint(5, 10))]
                if searches and r.random() < 0.5:  # overlapping search results: some hits seen before
                    old = r.choice(searches[-20:])
                    k = r.randint(1, min(4, len(old)))
                    hits[:k] = r.sample(old, k)
                searches.append(hits)
                text = c.render_hits(hits)
            elif x < 0.90:
                doc = c.new_doc()
                docs.append(doc)
                text = c.render_doc(doc)
            elif x < 0.97:
                lines = c.new_file()
                files.append(lines)
                text = c.render_file(lines, r.randint(1, 400))
            elif x < 0.985:
                text = ""
            else:
                results.append(("error", f"HTTP 503 at {c.date()}: upstream timeout after {r.randint(1, 60)}s (req {r.getrandbits(64):016x})", None))
                continue
            results.append(("ok", text, None))
            total += len(text.encode())
        rounds.append(results)
        if len(rounds) % 50 == 0 and searches and docs:
            cycle = [("s", searches[-1]), ("d", docs[-1]), ("s", searches[-2])] if len(searches) > 1 else []
    return rounds


def corpus_bytes(rounds) -> int:
    return sum(len(t.encode()) for rnd in rounds for st, t, _ in rnd if st == "ok")


# ------------------------------------------------------------- measures ---

def _interleaved(fns: dict, passes: int) -> dict:
    """The best of each system's runs, {name: (fn, runs)}, in CPU seconds of
    this process (the figure the MB/s come from: on a shared machine it does
    not count time spent waiting for a CPU) and in wall seconds. Each pass runs
    every system once, in turn, so a slow spell of the shared machine falls on
    all of them and the ratios hold (a system stops after its `runs`)."""
    cpu: dict = {k: [] for k in fns}
    wall: dict = {k: [] for k in fns}
    for i in range(passes):
        for name, (fn, runs) in fns.items():
            if i >= runs:
                continue
            gc.collect()
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return {k: {"cpu": min(cpu[k]), "wall": min(wall[k]), "all_cpu": [round(x, 4) for x in cpu[k]],
                "all_wall": [round(x, 4) for x in wall[k]]} for k in fns}


def tracker_run(rounds, normalization: str, progress: list, one_by_one: bool = False, pure: bool = False):
    """One pass of a fresh tracker over the rounds; the rounds' progress flags go to `progress`.
    `pure`: on the pure-Python path (else the compiled one, where it is built)."""
    def run():
        if pure:
            with accel.compiled(False):
                return timed_run()
        return timed_run()

    def timed_run():
        tr = NoveltyTracker(NoveltyConfig(normalization=normalization))
        if one_by_one:  # as the research loop calls it: judge each result as it arrives, commit the round
            progress[:] = [tr.commit_round([tr.judge(*r) for r in rnd]).progress for rnd in rounds]
        else:
            progress[:] = [tr.observe_round(rnd).progress for rnd in rounds]
    return run


def _paragraph_shingles(rounds) -> list[list[bytes]]:
    """The tracker's units, default-normalized and windowed every WINDOW_WORDS
    words (the tracker cuts its windows where the content says, about as
    long), as 5-word shingle byte strings: what datasketch is given."""
    out = []
    for rnd in rounds:
        for st, text, segs in rnd:
            if st != "ok" or not text.strip():
                continue
            for unit in (segs if segs is not None else segment(text)):
                words = normalize(unit, "default").split()
                for s in range(0, len(words), WINDOW_WORDS):
                    w = words[s:s + WINDOW_WORDS]
                    if len(w) < SHINGLE_WORDS:
                        out.append([" ".join(w).encode()])
                    else:
                        out.append([" ".join(w[i:i + SHINGLE_WORDS]).encode() for i in range(len(w) - SHINGLE_WORDS + 1)])
    return out


def datasketch_runs(paras: list[list[bytes]]):
    """datasketch MinHash(128) of each paragraph's shingles: (literal, shared
    permutations, facts)."""
    from datasketch import MinHash

    def literal():
        for sh in paras:
            m = MinHash(num_perm=128)
            m.update_batch(sh)
    proto = MinHash(num_perm=128)

    def shared():
        for sh in paras:
            m = MinHash(num_perm=128, permutations=proto.permutations, scheme=proto.scheme)
            m.update_batch(sh)
    import datasketch
    return literal, shared, {"version": getattr(datasketch, "__version__", "?"), "scheme": proto.scheme}


def rensa_run(paras: list[list[bytes]]):
    """rensa's RMinHash(num_perm=128) of each paragraph's shingles: the same
    input as datasketch's literal run ((None, None) when rensa is not installed)."""
    try:
        import rensa
    except ImportError:
        return None, None
    from importlib.metadata import version
    RMinHash = rensa.RMinHash

    def run():
        for sh in paras:
            m = RMinHash(num_perm=128, seed=42)
            m.update(sh)
            m.digest()
    return run, {"version": version("rensa")}


def plain_runs(rounds):
    blobs = [t.encode() for rnd in rounds for st, t, _ in rnd if st == "ok"]
    h64 = xxhash.xxh3_64_intdigest
    blake = hashlib.blake2b

    def xx():
        for b in blobs:
            h64(b)

    def bl():
        for b in blobs:
            blake(b, digest_size=8).digest()

    return xx, bl


def memory_run(n_rounds: int = 10_000, every: int = 250, seed: int = SEED + 1) -> dict:
    """A 10,000-round run where every round brings only new evidence (the worst
    case for the store: 70 new paragraphs of 8 words, so both bounded stores
    reach their capacity before round 1,000), traced by tracemalloc."""
    r = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tr = NoveltyTracker()
    points = {}
    t0 = time.perf_counter()
    for i in range(1, n_rounds + 1):
        text = "\n\n".join(" ".join(r.choices(vocab, k=8)) for _ in range(70))
        tr.observe_round([("ok", text, None)])
        if i % every == 0 or i == 1_000:
            gc.collect()
            points[i] = {"traced_bytes": tracemalloc.get_traced_memory()[0] - base, "stored_hashes": tr.stored}
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    cfg = tr.config
    first = max(v["traced_bytes"] for k, v in points.items() if 1_000 <= k <= n_rounds // 2)
    second = max(v["traced_bytes"] for k, v in points.items() if k > n_rounds // 2)
    limit = cfg.shingle_capacity + cfg.paragraph_capacity + 4_096
    return {"rounds": n_rounds, "per_round": "70 new paragraphs of 8 new words (280 new shingles)",
            "checkpoints": {str(k): v for k, v in sorted(points.items())},
            "at_1000_bytes": points[1_000]["traced_bytes"], "at_10000_bytes": points[n_rounds]["traced_bytes"],
            "max_rounds_1000_to_5000_bytes": first, "max_rounds_5001_to_10000_bytes": second,
            "peak_traced_bytes": peak,
            "capacities": {"shingles": cfg.shingle_capacity, "paragraphs": cfg.paragraph_capacity, "errors": 4_096},
            "bounded": second <= 1.1 * first and max(v["stored_hashes"] for v in points.values()) <= limit + 350,
            "seconds_with_tracemalloc": round(time.perf_counter() - t0, 1)}


def profile_run(rounds, normalization: str = "default", top: int = 14) -> dict:
    """Where the tracker's time goes (cProfile over one pass, the compiled
    path): each function's own time as a share of the whole, the largest
    first, and the shares of the stages (cumulative, which nest: the masks are
    inside normalization). What remains between the tracker and a target."""
    import cProfile
    import pstats
    prof = cProfile.Profile(time.process_time)   # CPU time, as the rates: the shared machine's waits left out
    tr = NoveltyTracker(NoveltyConfig(normalization=normalization))
    prof.enable()
    for rnd in rounds:
        tr.observe_round(rnd)
    prof.disable()
    st = pstats.Stats(prof).stats
    total = sum(v[2] for v in st.values()) or 1.0

    def name(k) -> str:
        path, line, fn = k
        return f"{Path(path).name}:{fn}" if path != "~" else fn
    own = sorted(((v[2] / total, name(k)) for k, v in st.items()), reverse=True)[:top]
    stages = {"segmentation (JSON parsed and items re-encoded)": "segmentation.py:segment",
              "empty-read test (echo.evidence_free)": "echo.py:evidence_free",
              "normalization (casefold, NFKC, masks)": "normalization.py:normalize_units",
              "masks (the extension's apply_table)": "masks.py:_apply_compiled",
              "lines, shingles and windows": "rule.py:_round_windows",
              "the round's tally and store lookup": "tally.py:tally_store",
              "commit (store insert)": "rule.py:_commit"}
    cum = {name(k): v[3] / total for k, v in st.items()}
    return {"normalization": normalization, "profiled_seconds": round(total, 3),
            "own_time_share": [[n, round(s, 3)] for s, n in own],
            "stage_share": {label: round(cum.get(fn, 0.0), 3) for label, fn in stages.items()},
            "note": "cProfile's own-time shares of CPU time (its overhead inflates the Python calls); the extension's "
                    "functions count inside their Python callers (_apply_compiled, tally_store, _shingled)"}


def result_vs_rensa(ours: float, rate: dict) -> float | None:
    return round(ours / rate["rensa_rminhash128"], 2) if "rensa_rminhash128" in rate else None


def machine() -> dict:
    info = {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy
    info["numpy"] = numpy.__version__
    info["xxhash"] = xxhash.VERSION
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=10.0, help="corpus size in MB (default 10)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings (default 3)")
    ap.add_argument("--out", default=str(ROOT / "reports/bench/novelty.json"))
    ap.add_argument("--skip-memory", action="store_true", help="leave out the 10,000-round memory run")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()

    t0 = time.perf_counter()
    rounds = generate_rounds(int(args.mb * 1_000_000))
    nbytes = corpus_bytes(rounds)
    mb = nbytes / 1e6
    print(f"corpus: {mb:.2f} MB in {len(rounds)} rounds, {sum(len(x) for x in rounds)} results "
          f"(generated in {time.perf_counter() - t0:.1f} s)")

    paras = _paragraph_shingles(rounds)
    variants = ("default", "basic", "none", "default_judged_one_by_one") + (("default_pure",) if accel.active() else ())
    progress: dict[str, list] = {v: [] for v in variants}
    fns = {f"tracker_{v}": (tracker_run(rounds, v.split("_")[0], progress[v], one_by_one=v.endswith("one_by_one"),
                                        pure=v.endswith("_pure")), args.repeat) for v in progress}
    ds_literal, ds_shared, ds = datasketch_runs(paras)
    ds_runs = max(1, min(args.repeat, 2))  # datasketch is slow: best of two
    fns |= {"datasketch_minhash128": (ds_literal, ds_runs),
            "datasketch_minhash128_shared_permutations": (ds_shared, ds_runs)}
    rs_fn, rs = rensa_run(paras)
    if rs_fn is not None:
        fns["rensa_rminhash128"] = (rs_fn, args.repeat)
    xx, bl = plain_runs(rounds)
    fns |= {"xxh3_64_bytes": (xx, args.repeat), "blake2b_bytes": (bl, args.repeat)}
    timed = _interleaved(fns, args.repeat)
    tracker = {v: timed[f"tracker_{v}"] | {"progress_rounds": sum(p)} for v, p in progress.items()}
    assert len({t["progress_rounds"] for k, t in tracker.items() if k.startswith("default")}) == 1
    mem = None if args.skip_memory else memory_run()
    profile = profile_run(rounds)

    rate = {k: round(mb / t["cpu"], 2) for k, t in timed.items()}
    rate_wall = {k: round(mb / t["wall"], 2) for k, t in timed.items()}
    ours = rate["tracker_default"]
    vs_ds = round(ours / rate["datasketch_minhash128"], 2)
    vs_ds_shared = round(ours / rate["datasketch_minhash128_shared_permutations"], 2)
    result = {
        "benchmark": "novelty",
        "corpus": {"bytes": nbytes, "mb": round(mb, 3), "rounds": len(rounds),
                   "results": sum(len(x) for x in rounds), "paragraphs": len(paras),
                   "shingles": sum(len(p) for p in paras), "generator_seed": SEED,
                   "description": "JSON search hits (title, tracked URL, snippet, score, rank, dates, ids), fetched "
                                  "documents (paragraphs, source URL, fetch time, request id), file reads with line "
                                  "numbers; about a third re-delivered reordered/rescored/re-timestamped, some in "
                                  "cycles; a few empty reads and errors"},
        "mb_per_s": rate,
        "mb_per_s_wall": rate_wall,
        "what_is_timed": {
            "tracker": "NoveltyTracker.observe_round over every round (fresh tracker): segmentation (JSON hits "
                       "parsed), normalization, windowing, paragraph and 5-word-shingle fingerprints, judging "
                       "against the store, commit",
            "tracker_default_pure": "tracker_default on the pure-Python path (IMPRINT_NOVELTY_PURE=1's), the "
                                    "other tracker rows on the compiled one; the same progress flags, asserted",
            "tracker_default_judged_one_by_one": "the same verdicts through judge() per result and commit_round() "
                                                 "per round, as imprint_core.loop calls it",
            "datasketch_minhash128": "per paragraph: MinHash(num_perm=128) then update_batch(its 5-word shingles as "
                                     "bytes); segmentation, normalization and the shingle strings prepared outside "
                                     "the timer",
            "datasketch_minhash128_shared_permutations": "the same with the permutations built once and passed in",
            "rensa_rminhash128": "per paragraph: rensa.RMinHash(num_perm=128, seed=42), update(its 5-word shingles as "
                                 "bytes), digest(); the same prepared input as datasketch",
            "xxh3_64_bytes": "xxhash.xxh3_64_intdigest of each result's UTF-8 bytes (already encoded)",
            "blake2b_bytes": "hashlib.blake2b(digest_size=8) of the same bytes",
        },
        "timing": "MB/s = corpus MB / best-of-repeat CPU seconds of this process (time.process_time; the shared "
                  "machine's waiting time left out); mb_per_s_wall from perf_counter for comparison; one process, "
                  "same input; datasketch best of min(repeat, 2); interleaved: each pass runs every system once, in turn, so a "
                  "slow spell of the shared machine falls on all of them",
        "seconds": {k: {"cpu": t["all_cpu"], "wall": t["all_wall"]} for k, t in timed.items()},
        "progress_rounds": {v: t["progress_rounds"] for v, t in tracker.items()},
        "compiled_path": accel.active(),
        "ratios": {"tracker_default_vs_datasketch": vs_ds,
                   "tracker_default_vs_datasketch_shared_permutations": vs_ds_shared,
                   "tracker_default_vs_xxh3_64": round(ours / rate["xxh3_64_bytes"], 5)}
        | ({"tracker_default_vs_rensa": result_vs_rensa(ours, rate)} if rs else {})
        | ({"tracker_default_compiled_vs_pure": round(ours / rate["tracker_default_pure"], 2)}
           if "tracker_default_pure" in rate else {}),
        "targets": {
            "mb_per_s": {"target": TARGET_MB_S, "measured": ours, "met": ours >= TARGET_MB_S},
            "vs_rensa": {"target": TARGET_VS_RENSA, "measured": result_vs_rensa(ours, rate),
                         "met": (result_vs_rensa(ours, rate) or 0) >= TARGET_VS_RENSA},
            "vs_datasketch": {"target": TARGET_RATIO, "measured": vs_ds, "met": vs_ds >= TARGET_RATIO,
                              "measured_vs_shared_permutations": vs_ds_shared,
                              "met_vs_shared_permutations": vs_ds_shared >= TARGET_RATIO},
        },
        "memory": mem,
        "profile": profile,
        "datasketch": {"version": ds["version"], "scheme": ds["scheme"]},
        "rensa": {"version": rs["version"]} if rs else None,
        "machine": machine() | {"loadavg_before": [round(x, 2) for x in load_before],
                                "loadavg_after": [round(x, 2) for x in os.getloadavg()]},
        "repeat": args.repeat,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")

    print(f"{'measure':44} {'MB/s cpu':>10} {'MB/s wall':>10}")
    for k in rate:
        print(f"{k:44} {rate[k]:>10.2f} {rate_wall[k]:>10.2f}")
    t = result["targets"]
    print(f"tracker (default) >= {TARGET_MB_S:g} MB/s: {'met' if t['mb_per_s']['met'] else 'NOT met'} ({ours})")
    print(f"tracker / datasketch >= {TARGET_RATIO:g}x: {'met' if t['vs_datasketch']['met'] else 'NOT met'} "
          f"({vs_ds}x; {vs_ds_shared}x against shared permutations)")
    if "tracker_default_compiled_vs_pure" in result["ratios"]:
        print(f"tracker, compiled / pure path: {result['ratios']['tracker_default_compiled_vs_pure']}x")
    else:
        print("tracker: the compiled path is not built, every tracker row is the pure path")
    if rs:
        print(f"tracker / rensa >= {TARGET_VS_RENSA:g}x: {'met' if t['vs_rensa']['met'] else 'NOT met'} "
              f"({result['ratios']['tracker_default_vs_rensa']}x)")
    else:
        print("rensa: not installed, skipped")
    if mem:
        mib = 2 ** 20
        print(f"memory (tracemalloc, only new evidence every round): {mem['at_1000_bytes'] / mib:.1f} MiB after "
              f"1,000 rounds, {mem['at_10000_bytes'] / mib:.1f} MiB after 10,000; most "
              f"{mem['max_rounds_1000_to_5000_bytes'] / mib:.1f} MiB in rounds 1,000-5,000 and "
              f"{mem['max_rounds_5001_to_10000_bytes'] / mib:.1f} MiB after; peak {mem['peak_traced_bytes'] / mib:.1f}"
              f" MiB; bounded: {mem['bounded']}")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
