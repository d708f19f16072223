"""The one path expansion every command uses (`harness.conventions.expand_paths`):
named files as given, folders expanded to the files a name filter accepts,
hidden ones skipped, in natural order, and a missing path named in the error.
Scenario files, raw trajectories and run files are its three callers."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from harness.conventions import ListedFile, expand_paths, natural_order
from harness.realruns.importers.convert import raw_files
from harness.realruns.runfiles import find_inputs
from harness.scenarios import scenario_files
from imprint_core.errors import UserInputError


def _touch(root: Path, *names: str) -> None:
    for name in names:
        f = root / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x\n")


def _yaml(name: str) -> bool:
    return name.endswith(".yaml")


def test_a_folder_gives_the_files_the_filter_accepts_in_natural_order(tmp_path: Path) -> None:
    _touch(tmp_path, "run-10.yaml", "run-9.yaml", "run-1.yaml", "notes.txt", "a_b.yaml")
    got = expand_paths([tmp_path], _yaml)
    assert [f.relative.as_posix() for f in got] == ["a_b.yaml", "run-1.yaml", "run-9.yaml", "run-10.yaml"]
    assert all(f.folder == tmp_path and not f.named for f in got)


def test_folders_below_are_searched_unless_told_not_to(tmp_path: Path) -> None:
    _touch(tmp_path, "a.yaml", "labels/l.yaml", "deep/er/b.yaml")
    assert [f.relative.as_posix() for f in expand_paths([tmp_path], _yaml)] == ["a.yaml", "deep/er/b.yaml",
                                                                                 "labels/l.yaml"]
    assert [f.relative.as_posix() for f in expand_paths([tmp_path], _yaml, recursive=False)] == ["a.yaml"]


def test_hidden_files_and_folders_and_subfolders_named_like_files_are_skipped(tmp_path: Path) -> None:
    _touch(tmp_path, ".hidden.yaml", ".git/x.yaml", "kept.yaml", "sub.yaml/inner.txt")
    assert [f.relative.as_posix() for f in expand_paths([tmp_path], _yaml)] == ["kept.yaml"]


def test_a_named_file_is_taken_as_given_whatever_its_name(tmp_path: Path) -> None:
    _touch(tmp_path, "b/z.yaml", "notes.txt")
    got = expand_paths([tmp_path / "notes.txt", tmp_path / "b"], _yaml)
    assert got == [ListedFile(tmp_path / "notes.txt"), ListedFile(tmp_path / "b" / "z.yaml", tmp_path / "b")]
    assert got[0].named and got[0].relative == Path("notes.txt")


def test_paths_keep_the_order_they_were_named_in(tmp_path: Path) -> None:
    _touch(tmp_path, "b/1.yaml", "a/2.yaml")
    got = expand_paths([tmp_path / "b", tmp_path / "a"], _yaml)
    assert [f.path for f in got] == [tmp_path / "b" / "1.yaml", tmp_path / "a" / "2.yaml"]


def test_a_missing_path_is_an_input_error_naming_it(tmp_path: Path) -> None:
    _touch(tmp_path, "a.yaml")
    missing = tmp_path / "nope"
    with pytest.raises(UserInputError) as err:
        expand_paths([tmp_path, missing], _yaml)
    assert err.value.message == "no such file or directory" and err.value.file == str(missing)


def test_natural_order_compares_numbers_as_numbers() -> None:
    names = ["pydicom-1139.json", "pydicom-901.json", "x/10-0.jsonl", "x/2-0.jsonl", "x/2-1.jsonl"]
    assert sorted(map(Path, names), key=natural_order) == [Path(n) for n in [
        "pydicom-901.json", "pydicom-1139.json", "x/2-0.jsonl", "x/2-1.jsonl", "x/10-0.jsonl"]]


def test_every_caller_expands_through_it(tmp_path: Path) -> None:
    _touch(tmp_path, "s/s-10.yaml", "s/s-9.yaml", "s/labels/l.yaml",
           "raw/t-10.traj.json", "raw/t-9.traj.json", "raw/index.jsonl", "raw/.cache/t-1.traj.json")
    assert scenario_files([tmp_path / "s"]) == [tmp_path / "s" / "s-9.yaml", tmp_path / "s" / "s-10.yaml"]
    assert raw_files([tmp_path / "raw"]) == [(tmp_path / "raw" / "t-9.traj.json", Path("t-9.traj.json")),
                                             (tmp_path / "raw" / "t-10.traj.json", Path("t-10.traj.json"))]
    found, _ = find_inputs([tmp_path / "raw"])
    assert [f.name for f, _, _ in found] == ["t-9.traj.json", "t-10.traj.json"]
    for expand in (scenario_files, raw_files, find_inputs):
        with pytest.raises(UserInputError, match="no such file or directory"):
            expand([tmp_path / "missing"])


def _tuple_order(text: str) -> tuple:
    """natural_order as it was first written: a tuple of the chunks (the reference its one-string key keeps)."""
    return tuple((0, int(c), "") if c.isdigit() else (1, 0, c)
                 for c in text.replace("-", "/").replace("_", "/").replace(".", "/").split("/"))


_NAME = st.lists(st.one_of(st.sampled_from(["run", "a", "", "0", "007", "7", "10", "x1", "é", "Z", "\x01"]),
                           st.integers(0, 10 ** 12).map(str)), min_size=1, max_size=5)
_PATH = st.tuples(_NAME, st.lists(st.sampled_from("/-_."), min_size=4, max_size=4)).map(
    lambda p: "".join(c + s for c, s in zip(p[0], p[1] * 2)))


@given(st.lists(_PATH, max_size=12))
def test_natural_order_sorts_as_the_tuple_of_its_chunks(paths) -> None:
    # one string a file instead of a tuple of tuples (100,000 files were 150 MB of keys while sorted)
    keys = [natural_order(p) for p in paths]
    for a, ka in zip(paths, keys):
        for b, kb in zip(paths, keys):
            assert (ka < kb) == (_tuple_order(a) < _tuple_order(b)), (a, b)
            assert (ka == kb) == (_tuple_order(a) == _tuple_order(b)), (a, b)
    assert natural_order(Path("x/run-9.jsonl")) == natural_order("x/run-9.jsonl")


def test_a_folder_is_found_a_file_at_a_time(tmp_path: Path) -> None:
    # the sweep reads a corpus of 100,000 files: no list of paths, and a missing path still named
    from harness.conventions import iter_paths
    from harness.realruns.runfiles import iter_inputs
    _touch(tmp_path, "a/run-10.yaml", "a/run-9.yaml", "a/.hidden/run-1.yaml", "a/deep/run-1.yaml")
    got = iter_paths([tmp_path / "a", tmp_path / "missing"], _yaml)
    assert next(got) == ListedFile(tmp_path / "a" / "deep" / "run-1.yaml", tmp_path / "a")
    assert [f.relative.as_posix() for f in [next(got), next(got)]] == ["run-9.yaml", "run-10.yaml"]
    with pytest.raises(UserInputError, match="no such file or directory"):
        next(got)
    warnings: list[str] = []
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "x.jsonl").write_text('{"format": "imprint-rounds/1"}\n')
    (tmp_path / "r" / "y.jsonl").write_text('{"format": "other"}\n')
    assert [(f.name, kind) for f, kind, _ in iter_inputs([tmp_path / "r", tmp_path / "r" / "x.jsonl"], warnings)] \
        == [("x.jsonl", "roundlog")]
    assert len(warnings) == 1 and "y.jsonl" in warnings[0]
