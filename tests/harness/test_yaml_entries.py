"""yamlsource.load_yaml_entries: a long mapping read an entry at a time gives
what load_yaml gives (data and lines), refuses what it refuses, and never
holds the whole file's node graph (the labels of 100,000 runs)."""
from __future__ import annotations

import tracemalloc

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.realruns.labels import parse_labels
from harness.yamlsource import load_yaml, load_yaml_entries
from imprint_core.errors import UserInputError


def reassembled(text: str, key: str = "runs") -> tuple[object, dict]:
    """load_yaml's answer, put together again from the entries."""
    data: object = None
    lines: dict = {}
    for path, value, got in load_yaml_entries(text, "f.yaml", key):
        lines.update(got)
        if not path:
            data = value
        elif len(path) == 1:
            data = {} if data is None else data
            data[path[0]] = value if path[0] != key or not isinstance(value, dict) else {}
        else:
            data[path[0]][path[1]] = value
    return data, lines


scalars = st.one_of(st.integers(-5, 10**6), st.booleans(), st.none(), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text("abcxyz_", min_size=1, max_size=5), inner, max_size=3), max_leaves=8)
documents = st.dictionaries(st.sampled_from(["format", "description", "runs", "other"]),
                            st.dictionaries(st.text("abc-/0123", min_size=1, max_size=6), values, max_size=6)
                            | values, max_size=4)


@settings(max_examples=150, deadline=None)
@given(documents, st.sampled_from([False, True, None]))
def test_entries_give_what_the_whole_file_gives(doc, flow) -> None:
    text = yaml.safe_dump(doc, default_flow_style=flow, sort_keys=False)
    want_data, want_lines = load_yaml(text, "f.yaml")
    data, lines = reassembled(text)
    assert data == (want_data if want_data != {} else None) or data == want_data
    want_lines.pop((), None)
    lines.pop((), None)
    assert lines == want_lines


@pytest.mark.parametrize("text, where, says", [
    ("runs:\n  a: {loops: [1, 2]}\n  b: {loops: [1, 2]}\n  a: {loops: [3, 4]}\n", ":4: a", "first at line 2"),
    ("format: x\nruns: {}\nformat: y\n", ":3: format", "first at line 1"),
    ("runs: {}\n---\nruns: {}\n", ":2:", "another document"),
    ("runs:\n  a: [1, 2\n", ":3:", "not valid YAML"),
    ("runs:\n  [1]: {loops: [1, 2]}\n", ":2:", "unhashable"),
    ("runs:\n  a: &x [1, *x]\n", ":2:", "recursive"),
])
def test_entries_refuse_what_the_whole_file_refuses(text: str, where: str, says: str) -> None:
    with pytest.raises(UserInputError) as err:
        list(load_yaml_entries(text, "f.yaml", "runs"))
    assert err.value.describe().startswith("f.yaml" + where) and says in err.value.describe(), err.value.describe()


def test_a_key_that_is_no_scalar_is_a_users_mistake_in_a_whole_file_too() -> None:
    with pytest.raises(UserInputError) as err:
        load_yaml("name: x\n? [1, 2]\n: y\n", "f.yaml")
    assert err.value.describe().startswith("f.yaml:2: not valid YAML: found unhashable key")


def test_a_document_that_is_no_mapping_comes_whole() -> None:
    assert list(load_yaml_entries("", "f.yaml", "runs")) == [((), None, {})]
    assert list(load_yaml_entries("- 1\n- 2\n", "f.yaml", "runs")) == [((), [1, 2], {(): 1, (0,): 1, (1,): 2})]
    # A mapping with an anchor is composed whole, then handed out in the same entries.
    got = list(load_yaml_entries("&top\nruns:\n  a: {loops: [1, 2]}\n", "f.yaml", "runs"))
    assert [(p, v) for p, v, _ in got] == [(("runs",), {}), (("runs", "a"), {"loops": [1, 2]})]
    assert got[1][2][("runs", "a")] == 3


def test_an_alias_to_an_earlier_entry_reads_as_its_value() -> None:
    labels = parse_labels("runs:\n  a: &l {loops: [1, 2]}\n  b: *l\n", "l.yaml")
    assert labels.runs["b"].loops == ((1, 2),) and labels.runs["b"].line == 3


def _labels_text(n: int) -> str:
    return "runs:\n" + "".join(f"  run-{i:06d}: {{\"should_not_stop_before\": {i % 90 + 1}}}\n" for i in range(n))


def test_reading_labels_holds_one_run_of_nodes_at_a_time() -> None:
    # Composed whole, 5,000 runs peaked at about 3 KB a run of nodes and marks
    # (310 MiB for 100,000); read a run at a time, what stays is the labels.
    text = _labels_text(5_000)
    tracemalloc.start()
    try:
        labels = parse_labels(text, "l.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(labels) == 5_000 and labels.runs["run-004999"].should_not_stop_before == 4999 % 90 + 1
    assert labels.runs["run-004999"].line == 5_001
    assert peak / 5_000 < 1_200, f"{peak / 5_000:.0f} bytes a run at the peak"
