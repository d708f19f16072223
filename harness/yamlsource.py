"""YAML loading that remembers where every key came from, so an error can
name the file, the line and the key instead of showing a traceback."""
from __future__ import annotations

from typing import Any

import yaml

from imprint_core.errors import UserInputError


class _Loader(yaml.SafeLoader):
    pass


def _no_duplicates(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise UserInputError(f"duplicate key (first at line {seen[key]})", file=loader.name,
                                 line=key_node.start_mark.line + 1, key=str(key))
        seen[key] = key_node.start_mark.line + 1
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


def load_yaml(text: str, name: str) -> tuple[Any, dict[tuple, int]]:
    """Parse YAML; return the data and a map from key path to line number."""
    try:
        loader = _Loader(text)
        loader.name = name
        try:
            node = loader.get_single_node()
            if node is not None:
                _expanded_size(node, name)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise UserInputError(f"not valid YAML: {exc.problem or exc.context}", file=name,
                             line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise UserInputError(f"not valid YAML: {exc}", file=name) from None
    except RecursionError:
        raise UserInputError("not readable YAML: nested too deeply", file=name) from None
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
