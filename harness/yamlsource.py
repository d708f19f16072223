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


def load_yaml(text: str, name: str) -> tuple[Any, dict[tuple, int]]:
    """Parse YAML; return the data and a map from key path to line number."""
    try:
        loader = _Loader(text)
        loader.name = name
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise UserInputError(f"not valid YAML: {exc.problem or exc.context}", file=name,
                             line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise UserInputError(f"not valid YAML: {exc}", file=name) from None
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
