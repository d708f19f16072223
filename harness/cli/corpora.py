"""The labelled corpora a command judges (`imprint tune`, `imprint compare`):
`--corpus PATH ... --labels FILE` groups, or the default corpora beside the
repository."""
from __future__ import annotations

import argparse

from imprint_core.errors import UserInputError

from ..conventions import workdir
from ..realruns.regressionstore import LABELS_FILE as REGRESSION_LABELS, STORE as REGRESSION_STORE

DEFAULT_CORPORA = (
    ("../shared/data/roundlogs/tau-bench-airline", "scenarios/labels/labels-tau-bench.yaml"),
    ("../shared/data/raw/mini-swe-agent", "scenarios/labels/labels-mini-swe-agent.yaml"),
    ("../shared/data/raw/who-and-when", "scenarios/labels/labels-who-and-when.yaml"),
    ("traces/webruns", "scenarios/labels/labels-webruns.yaml"),
    (REGRESSION_STORE, REGRESSION_LABELS),
)
"""Relative to the current folder (the root of the checkout): the three
labelled corpora beside the repository (tau-bench, mini-swe-agent, Who&When),
the successful web-research runs committed under traces/webruns (ReAct-style
agents; useful runs only), and the regressions (`imprint regress add`) once
there is one. Every folder under `OUTCOME_CORPORA` is a corpus too
(`outcome_corpora`)."""

OUTCOME_CORPORA = "traces/outcomes"
"""Committed runs of other agent families with their recorded outcomes, a
folder per source (`traces/outcomes/<source>/`, round logs gzip-compressed),
each judged by `scenarios/labels/labels-<source>.yaml` (loops where reading
showed one; the outcome needs no label)."""


def outcome_corpora(root) -> list[tuple[str, str]]:
    """(data, labels) of every source folder under `OUTCOME_CORPORA`, in name order."""
    base = root / OUTCOME_CORPORA
    if not base.is_dir():
        return []
    return [(f"{OUTCOME_CORPORA}/{d.name}", f"scenarios/labels/labels-{d.name}.yaml")
            for d in sorted(base.iterdir()) if d.is_dir() and not d.name.startswith(".")]


class _Ordered(argparse.Action):
    """Keeps `--corpus` and `--labels` in the order given: each `--labels`
    closes a corpus of the `--corpus` paths before it."""

    def __call__(self, parser, namespace, values, option_string=None):
        events = list(getattr(namespace, "corpus_events", None) or [])
        events.append((self.dest, values))
        namespace.corpus_events = events


def add_corpus_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="run files or folders of a first corpus, as if given with --corpus before all else")
    p.add_argument("--corpus", action=_Ordered, dest="corpus", metavar="PATH",
                   help="run files or folders of one corpus (repeatable; the next --labels closes the corpus)")
    p.add_argument("--labels", action=_Ordered, dest="labels", metavar="FILE",
                   help="the labels file of the --corpus paths given before it")


def corpora_from(args: argparse.Namespace) -> tuple[list, list[str]]:
    """The `--corpus ... --labels FILE` groups, or the default corpora that exist."""
    from ..analysis.sweep.progress import Corpus
    from ..realruns.labels import load_labels
    events = [("corpus", p) for p in getattr(args, "paths", None) or []] + list(getattr(args, "corpus_events", None) or [])
    notes: list[str] = []
    if not events:
        out = []
        root = workdir()
        for data, labels in [*DEFAULT_CORPORA[:-1], *outcome_corpora(root), DEFAULT_CORPORA[-1]]:
            d, lab = (root / data).resolve(), root / labels
            if labels == REGRESSION_LABELS:
                if lab.exists() and len(load_labels([lab])):
                    out.append(Corpus([str(d)], str(lab)))
            elif d.exists():
                out.append(Corpus([str(d)], str(lab)))
            else:
                notes.append(f"default corpus {d} not found; skipped")
        if not out:
            raise UserInputError("none of the default corpora is there", file=str(root),
                                 expected="run it from the root of a checkout (the corpora beside it, or a "
                                          f"regression under {REGRESSION_STORE}), or give --corpus PATH --labels FILE")
        return out, notes
    out, pending = [], []
    for dest, value in events:
        if dest == "corpus":
            pending.append(value)
        elif not pending:
            raise UserInputError(f"--labels {value} has no --corpus before it", key="--labels",
                                 expected="--corpus PATH [--corpus PATH ...] --labels FILE, per corpus")
        else:
            out.append(Corpus(pending, value))
            pending = []
    if pending:
        raise UserInputError(f"--corpus {pending[-1]} has no --labels after it", key="--corpus",
                             expected="--corpus PATH [--corpus PATH ...] --labels FILE, per corpus")
    return out, notes
