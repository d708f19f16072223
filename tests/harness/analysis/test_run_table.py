"""The sweep's runs in columns (`sweep.table.RunTable`): what goes in comes
back, whatever the run, and the columns hold far less than the objects."""
from __future__ import annotations

import dataclasses
import gc
import tracemalloc

import numpy as np
from hypothesis import given, settings, strategies as st

from harness.analysis.sweep.progress import ProgressTable, TuneRun
from harness.analysis.sweep.table import RunTable, first_of_equal, last_round, refs_of, reply_lengths, weights_of
from harness.analysis.sweep.work import RunSource, Unheld
from harness.realruns.labels import RunLabel, Verdict
from harness.realruns.outcomes import UNKNOWN, Outcome

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_PATHISH = st.one_of(_TEXT, st.lists(st.sampled_from(["runs", "a b", "é", "..", "", "x.jsonl"]), min_size=1,
                                     max_size=4).map("/".join))
_HEX = st.binary(min_size=20, max_size=20).map(bytes.hex)
_SPAN = st.tuples(st.integers(1, 500), st.integers(1, 500)).map(sorted).map(tuple)


@st.composite
def _labels(draw, name: str) -> RunLabel:
    loops = tuple(draw(st.lists(_SPAN, max_size=3)))
    plain = draw(st.booleans())
    return RunLabel(
        name if plain or draw(st.booleans()) else draw(_TEXT),
        draw(st.one_of(st.none(), st.integers(0 if not plain else 1, 10_000))),
        loops,
        "" if plain else draw(_TEXT),
        draw(_PATHISH),
        draw(st.one_of(st.none(), st.integers(0, 10 ** 6))),
        tuple(draw(st.one_of(st.none(), st.integers(1, 4))) for _ in loops) if plain or draw(st.booleans()) else (),
        "" if plain else draw(_PATHISH),
        "" if plain else draw(st.sampled_from(["", "2025-01-31"])),
        None if plain else draw(st.one_of(st.none(), st.builds(Verdict, st.none(), st.booleans()))),
        () if plain else tuple(draw(st.lists(_SPAN, max_size=2))))


class _Reply:
    rounds = ()     # _weight's view of a reply: no calls


def _reply_numbers():
    contiguous = st.tuples(st.integers(0, 10 ** 6), st.integers(1, 50)).map(lambda a: range(a[0], a[0] + a[1]))
    return st.one_of(contiguous, contiguous, st.lists(st.integers(1, 99), max_size=5).map(tuple))


@st.composite
def _runs(draw) -> TuneRun:
    name = draw(_TEXT)
    path = draw(_PATHISH)
    numbers = draw(st.lists(_reply_numbers(), max_size=4))
    held = draw(st.booleans())
    replies = [_Reply() for _ in numbers]      # what the table keeps for a held run is the object itself
    source = None if held else RunSource(draw(st.one_of(st.just(path), _PATHISH)), draw(st.sampled_from(["rounds", "raw"])),
                                         draw(st.booleans()), draw(st.one_of(st.just(path), st.just(path), _PATHISH)),
                                         draw(st.sampled_from(["reset", "ignore"])))
    run = TuneRun(draw(st.sampled_from(["tau-bench", "webruns", "c/d"])), name, path,
                  draw(st.one_of(st.just(path), _PATHISH)), draw(st.one_of(st.just(name), _TEXT)),
                  draw(st.integers(0, 10 ** 6)), draw(_labels(name)), numbers, replies,
                  draw(st.one_of(_HEX, _HEX, _TEXT)), draw(st.booleans()), list(replies),
                  weight=draw(st.integers(0 if held else 1, 10 ** 9)),   # 0: measured from replies held
                  outcome=draw(st.sampled_from([UNKNOWN, Outcome("success", "reward", 1.0)])))
    if not held:
        run.__dict__.update(replies=None, full=None, source=source)
    return run


def _fields(run: TuneRun) -> dict:
    """Every field as stored, without reading a run that is not held again."""
    return {f.name: run.__dict__.get(f.name) for f in dataclasses.fields(TuneRun)}


@settings(max_examples=60, deadline=None)
@given(st.lists(_runs(), max_size=8))
def test_a_table_gives_back_the_runs_it_was_given(runs):
    table = RunTable()
    for run in runs:
        table.append(run)
    assert len(table) == len(runs)
    for ri, run in enumerate(runs):
        got = table[ri]
        assert _fields(got) == _fields(run)
        assert [type(n) for n in got.numbers] == [type(n) for n in run.numbers]
        assert got.held == run.held and table.held(ri) == run.held
        assert table.digest(ri) == run.digest and table.numbers(ri) == run.numbers
    assert [_fields(r) for r in table] == [_fields(r) for r in runs]
    assert [_fields(r) for r in table[1::2]] == [_fields(r) for r in runs[1::2]]
    # what the sweep reads of a table is what it reads of the list of runs
    for a, b in zip(reply_lengths(table), reply_lengths(runs)):
        assert a.tolist() == b.tolist()
    assert first_of_equal(table).tolist() == first_of_equal(runs).tolist()
    assert last_round(table) == last_round(runs)
    assert weights_of(table).tolist() == weights_of(runs).tolist()
    refs = refs_of(table)
    for ri, run in enumerate(runs):
        ref = refs[ri]
        assert ref == (run.replies if run.held else Unheld(run.source, run.digest))


def test_a_run_read_again_is_kept_by_the_table(monkeypatch):
    # a run past HOLD_CHARS is read again on use, and then kept, as the TuneRun it was kept it
    from harness.analysis.sweep import table as tablemod
    calls = []

    def read_again(refs):
        calls.append(refs)
        return [(["replies"], ["full"]) for _ in refs]
    monkeypatch.setattr(tablemod, "read_again", read_again)
    run = TuneRun("c", "n", "p/q", "p/q", "t", 3, RunLabel("n", 2), [range(1, 4)], None, "ab" * 20)
    run.__dict__.update(replies=None, full=None, source=RunSource("p/q", "rounds", False, "p/q", "reset"))
    table = RunTable()
    table.append(run)
    assert not table[0].held
    assert table[0].full == ["full"] and table[0].replies == ["replies"] and table.held(0)
    assert len(calls) == 1


def test_equal_digests_point_to_the_first_run_of_that_content():
    table = RunTable()
    for i, d in enumerate(["aa", "bb", "aa", "cc", "bb", "aa"]):
        table.append(TuneRun("c", f"r{i}", "p", "p", "t", 1, RunLabel(f"r{i}", 1), [range(1, 2)], [], d * 20))
    assert first_of_equal(table).tolist() == [0, 1, 0, 3, 1, 0]


def _typical(i: int) -> TuneRun:
    """A run as the synthetic corpora's: a file under one folder, a task of four runs, a loop or a useful label."""
    path = f"/home/user/.cache/imprint/bench-scale/100000-seed0-v1-6c011eb12d22/runs/run-{i:06d}.jsonl"
    label = RunLabel(f"run-{i:06d}", None, ((3, 9),), "", "labels-synthetic.yaml", i + 4, (1,)) if i % 3 else \
        RunLabel(f"run-{i:06d}", 30, (), "", "labels-synthetic.yaml", i + 4)
    run = TuneRun("synthetic", f"run-{i:06d}", path, path, f"task-{i // 4}", 30 + i % 7, label,
                  [range(1, 12), range(12, 30 + i % 7)], None, f"{i:040x}", weight=40_000 + i)
    run.__dict__.update(replies=None, full=None, source=RunSource(path, "rounds", False, path, "reset"))
    return run


def test_the_columns_hold_a_quarter_of_the_objects():
    # what flattened the sweep's memory (issue 46): the same 3,000 runs, as objects and as a table
    gc.collect()
    tracemalloc.start()
    try:
        objects = [_typical(i) for i in range(3000)]
        as_objects = tracemalloc.get_traced_memory()[0]
        table = RunTable()
        for run in objects:
            table.append(run)
        del objects, run
        gc.collect()
        as_table = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(table) == 3000
    # measured: some 240 bytes a run against 1,190
    assert as_table * 4 < as_objects, (as_table, as_objects)
    assert as_table / 3000 < 300, as_table / 3000          # bytes a run


def test_a_progress_table_past_its_size_lives_in_a_mapped_file(monkeypatch):
    from harness.analysis.sweep import progress
    from harness.analysis.sweep.cache import decode
    runs = [TuneRun("c", f"r{i}", "p", "p", "t", 3, RunLabel(f"r{i}", 1), [range(1, 3), range(3, 4)], [], "ab" * 20)
            for i in range(4)]
    small = ProgressTable(runs, 2)
    monkeypatch.setattr(progress, "MEMMAP_BYTES", 8)
    mapped = ProgressTable(runs, 2)
    assert mapped.mapped and not small.mapped and mapped.nbytes < small.nbytes
    for table in (small, mapped):
        table.put(1, 2, decode(["rR", "W"]))
        assert table[(1, 2)] == decode(["rR", "W"]) and (0, 2) not in table and len(table) == 1
    assert np.array_equal(np.asarray(mapped._codes), small._codes)
