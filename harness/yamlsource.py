"""YAML loading that remembers where every key came from, so an error can
name the file, the line and the key instead of showing a traceback."""
from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from imprint_core.errors import UserInputError, too_many_digits


class _Loader(yaml.SafeLoader):
    pass


def _check_key(seen: dict[Any, int], key: Any, key_node: yaml.Node, name: str) -> None:
    """Remember a mapping's key and its line; refuse it seen before, or a key that is no scalar."""
    try:
        first = seen.get(key)
    except TypeError:   # a list or mapping as a key: PyYAML's own refusal, with its line
        raise yaml.constructor.ConstructorError("while constructing a mapping", None, "found unhashable key",
                                                key_node.start_mark) from None
    if first is not None:
        raise UserInputError(f"duplicate key (first at line {first})", file=name, line=key_node.start_mark.line + 1,
                             key=str(key))
    seen[key] = key_node.start_mark.line + 1


def _no_duplicates(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        _check_key(seen, loader.construct_object(key_node, deep=True), key_node, loader.name)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def _lines(node: yaml.Node, path: tuple, out: dict[tuple, int]) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[path + (key,)] = k.start_mark.line + 1
            _lines(v, path + (key,), out)
            out[path + (key,)] = k.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _lines(item, path + (i,), out)


MAX_NODES = 200_000
"""The most values a YAML file's aliases may add to the values written in it,
once expanded: a few hundred bytes of nested aliases (an alias bomb) stand
for billions, while a long file without aliases (the labels of 100,000 runs)
adds none."""


def _expanded_size(root: yaml.Node, name: str) -> int:
    """How many nodes `root` stands for with every alias expanded, counted
    once per distinct node (linear in the file); more than MAX_NODES beyond
    the nodes written in the file, or an alias inside what it names, is an error."""
    limit = _written(root) + MAX_NODES
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        k = id(node)
        if done:
            children = _children(node)
            sizes[k] = min(1 + sum(sizes[id(c)] for c in children), limit + 1)
            open_nodes.discard(k)
            if sizes[k] > limit:
                raise UserInputError(f"its aliases expanded add more than {MAX_NODES:,} values to the {limit - MAX_NODES:,} "
                                     "written in it",
                                     file=name, line=node.start_mark.line + 1,
                                     expected="a file without nested aliases (anchors reused over and over)")
            continue
        if k in sizes:
            continue
        if k in open_nodes:
            raise UserInputError("an alias inside the value it names (a recursive structure)", file=name,
                                 line=node.start_mark.line + 1)
        open_nodes.add(k)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


_SURROGATE = re.compile("[\ud800-\udfff]")
_INT_TAG = "tag:yaml.org,2002:int"
_INTS = SafeConstructor()


def key_text(path: tuple) -> str:
    """A key path as the errors name it: `provider.script[0].answer`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (("." if text else "") + str(part))
    return text or "(top level)"


def _check_scalars(root: yaml.Node, name: str, path: tuple = ()) -> None:
    """Refuse the values YAML reads but nothing after it can hold: a string
    with a lone surrogate (an escape such as "\\ud83d", half of a pair, which
    no UTF-8 trace can hold: the run failed writing it) and an integer past
    Python's digit limit (int() refuses it); each named by line and key."""
    limit = sys.get_int_max_str_digits() or float("inf")
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple]] = [(root, path)]
    while stack:
        node, at = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            bad = None if node.value.isascii() else _SURROGATE.search(node.value)
            if bad:
                raise UserInputError(f"a lone surrogate {bad.group()!r} (half of a UTF-16 pair) in a string",
                                     file=name, line=node.start_mark.line + 1, key=key_text(at),
                                     expected="whole characters: both halves, as \\ud83d\\ude00, or \\U0001F600")
            if node.tag == _INT_TAG and len(node.value) > limit:     # shorter ones have fewer digits
                try:
                    _INTS.construct_yaml_int(node)
                except ValueError:
                    raise UserInputError(too_many_digits(), file=name, line=node.start_mark.line + 1,
                                         key=key_text(at)) from None
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                stack.append((k, at))
                stack.append((v, at + (k.value,) if isinstance(k, yaml.ScalarNode) else at))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, at + (i,)) for i, item in enumerate(node.value))


def _written(root: yaml.Node) -> int:
    """The distinct nodes of the file: each alias's target counted once."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(_children(node))
    return len(seen)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


@contextmanager
def _read_as_user_input(name: str) -> Iterator[None]:
    """PyYAML's errors as the user's mistake, naming the file and the line."""
    try:
        yield
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise UserInputError(f"not valid YAML: {exc.problem or exc.context}", file=name,
                             line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise UserInputError(f"not valid YAML: {exc}", file=name) from None
    except RecursionError:
        raise UserInputError("not readable YAML: nested too deeply", file=name) from None


def load_yaml(text: str, name: str) -> tuple[Any, dict[tuple, int]]:
    """Parse YAML; return the data and a map from key path to line number."""
    with _read_as_user_input(name):
        loader = _Loader(text)
        loader.name = name
        try:
            node = loader.get_single_node()
            if node is not None:
                _expanded_size(node, name)
                _check_scalars(node, name)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    lines: dict[tuple, int] = {}
    if node is not None:
        _lines(node, (), lines)
    return data, lines


def line_of(lines: dict[tuple, int], loc: tuple) -> int | None:
    """The line of the deepest part of `loc` that exists in the file."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


# ---- a long mapping, an entry at a time --------------------------------------------------------
if yaml.__with_libyaml__:
    from yaml.cyaml import CParser

    class _EntryLoader(CParser, Composer, SafeConstructor, Resolver):
        """libyaml's parser (its events are PyYAML's) under PyYAML's composer,
        so that a document can be composed a part at a time."""

        def __init__(self, text: str):
            CParser.__init__(self, text)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
else:   # pragma: no cover - PyYAML without libyaml: the same steps in Python
    class _EntryLoader(yaml.SafeLoader):  # type: ignore[no-redef]
        pass

_EntryLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)

_MAP_TAGS = (None, "!", yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG)


def load_yaml_entries(text: str, name: str, long_key: str) -> Iterator[tuple[tuple, Any, dict[tuple, int]]]:
    """Parse YAML whose top level is a mapping, a value at a time: (path,
    value, lines) for each top-level key (path `(key,)`), except that the value
    of `long_key`, where it is a mapping, comes an entry at a time (path
    `(long_key, entry)`), after one `((long_key,), {}, lines)` that opens it.
    `lines` maps the paths of that value (load_yaml's keys) to line numbers.
    A document that is not a mapping comes whole, as `((), data, lines)`
    (data None: an empty file).

    What load_yaml answers, in document order, without the whole file's
    node graph at once: composed, PyYAML's nodes and their marks take some
    3 KB an entry, 300 MB for the labels of 100,000 runs, when the entries
    themselves take a few hundred bytes."""
    with _read_as_user_input(name):
        loader = _EntryLoader(text)
        loader.name = name
        try:
            loader.get_event()                                   # stream start
            if loader.check_event(yaml.StreamEndEvent):
                yield (), None, {}
                return
            loader.get_event()                                   # document start
            start = loader.peek_event()
            if not isinstance(start, yaml.MappingStartEvent) or start.anchor or start.tag not in _MAP_TAGS:
                node = loader.compose_node(None, None)
                data, lines = _constructed(loader, node, name), _lines_of(node, ())
                if isinstance(data, dict):     # a mapping with an anchor or a tag: whole, in the same items
                    yield from _items_of(data, lines, long_key)
                else:
                    yield (), data, lines
            else:
                loader.get_event()
                yield from _entries(loader, name, (), long_key)
            loader.get_event()                                   # document end
            if not loader.check_event(yaml.StreamEndEvent):
                event = loader.get_event()
                raise yaml.composer.ComposerError("expected a single document in the stream", None,
                                                  "but found another document", event.start_mark)
        finally:
            loader.dispose()


def _entries(loader: Any, name: str, path: tuple, long_key: str | None) -> Iterator[tuple[tuple, Any, dict]]:
    """The entries of the mapping whose start event was just read, a value at a time."""
    seen: dict[Any, int] = {}
    while not loader.check_event(yaml.MappingEndEvent):
        key_node = loader.compose_node(None, None)
        key = _constructed(loader, key_node, name, path)
        _check_key(seen, key, key_node, name)
        line = seen[key]
        at = path + (key,)
        start = loader.peek_event()
        if key == long_key and isinstance(start, yaml.MappingStartEvent) and not start.anchor \
                and start.tag in _MAP_TAGS:
            loader.get_event()
            yield at, {}, {at: line}
            yield from _entries(loader, name, at, None)
        else:
            node = loader.compose_node(None, None)
            value = _constructed(loader, node, name, at)   # checks the aliases before _lines walks them
            lines = _lines_of(node, at)
            lines[at] = line
            yield at, value, lines
    loader.get_event()


def _items_of(data: dict, lines: dict[tuple, int], long_key: str) -> Iterator[tuple[tuple, Any, dict]]:
    for key, value in data.items():
        if key == long_key and isinstance(value, dict):
            yield (key,), {}, lines
            for entry, v in value.items():
                yield (key, entry), v, lines
        else:
            yield (key,), value, lines


def _constructed(loader: Any, node: yaml.Node, name: str, path: tuple = ()) -> Any:
    _expanded_size(node, name)
    _check_scalars(node, name, path)
    return loader.construct_document(node)   # forgets what it built: nothing held from entry to entry


def _lines_of(node: yaml.Node, path: tuple) -> dict[tuple, int]:
    out: dict[tuple, int] = {}
    _lines(node, path, out)
    return out
