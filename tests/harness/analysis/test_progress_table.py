"""`sweep.ProgressTable`: every (config, run)'s progress in one byte a round
reads back as it was put, a run of equal content reads its first's, and what
was never put is missing, not a made-up verdict."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analysis.sweep.progress import ProgressTable

KINDS = ("read", "write", "ask", "error")
ROUND = st.tuples(st.sampled_from(KINDS), st.booleans())
PROGRESS = st.lists(st.lists(ROUND, max_size=8), max_size=5)


def _run(progress) -> SimpleNamespace:
    """A run whose round numbers have the progress's shape (1, 2, 3 … across replies)."""
    numbers, n = [], 1
    for rep in progress:
        numbers.append(range(n, n + len(rep)))
        n += len(rep)
    return SimpleNamespace(numbers=numbers)


@settings(max_examples=150, deadline=None)
@given(st.lists(PROGRESS, min_size=1, max_size=6), st.integers(1, 3), st.data())
def test_what_is_put_reads_back(shapes, configs, data) -> None:
    """Each run with its own shape (replies and rounds, empty ones too), each
    config its own verdicts over it, some pairs never put."""
    table = ProgressTable([_run(s) for s in shapes], configs)
    expected = {}
    for ri, shape in enumerate(shapes):
        for ci in range(configs):
            if not data.draw(st.booleans()):
                continue      # left missing
            prog = [tuple(data.draw(ROUND) for _ in rep) for rep in shape]
            table.put(ci, ri, [list(rep) for rep in prog])
            expected[(ci, ri)] = prog
    assert dict(table) == expected
    assert len(table) == len(expected)
    for ci in range(configs):
        for ri in range(len(shapes)):
            if (ci, ri) not in expected:
                with pytest.raises(KeyError):
                    table[(ci, ri)]
                assert (ci, ri) not in table


def test_a_run_of_equal_content_reads_its_first() -> None:
    prog = [[("read", True), ("read", False)], [("write", True)]]
    table = ProgressTable([_run(prog), _run([[("read", True)]]), _run(prog)], 2)
    table.put(1, 0, prog)
    table.same_as(2, 0)
    assert table[(1, 2)] == [tuple(r) for r in prog] == table[(1, 0)]
    assert (0, 2) not in table and len(table) == 2
    # The shared reply tuples are shared objects (decode's table), not copies per run.
    assert table[(1, 2)][0] is table[(1, 0)][0]


@pytest.mark.parametrize("wrong", [
    [[("read", True)], [("write", True)]],                   # a round short
    [[("read", True), ("read", False), ("write", True)]],    # the rounds right, the replies cut elsewhere
])
def test_progress_of_another_shape_is_refused(wrong) -> None:
    table = ProgressTable([_run([[("read", True), ("read", False)], [("write", True)]])], 1)
    with pytest.raises(ValueError, match="run 0"):
        table.put(0, 0, wrong)
    assert len(table) == 0


def test_an_out_of_range_config_is_missing() -> None:
    table = ProgressTable([_run([[("read", True)]])], 1)
    table.put(0, 0, [[("read", True)]])
    with pytest.raises(KeyError):
        table[(1, 0)]
    with pytest.raises(KeyError):
        table[(-1, 0)]


@settings(max_examples=100, deadline=None)
@given(PROGRESS)
def test_progress_put_encoded_reads_back_as_put(prog) -> None:
    """Workers' encoded progress goes in as it came, and reads back as the decoded put."""
    from harness.analysis.sweep.cache import encode
    table = ProgressTable([_run(prog)], 2)
    table.put(0, 0, prog)
    table.put_encoded(1, 0, encode(prog))
    assert table[(1, 0)] == table[(0, 0)] == [tuple(rep) for rep in prog]


def test_encoded_progress_of_another_shape_is_refused() -> None:
    table = ProgressTable([_run([[("read", True), ("read", False)], [("write", True)]])], 1)
    with pytest.raises(ValueError, match="run 0"):
        table.put_encoded(0, 0, ["RrW"])        # the rounds right, one reply instead of two
    assert len(table) == 0
