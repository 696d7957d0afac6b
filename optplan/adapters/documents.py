"""Read the documents of snapshot files, safely: the files named (a directory's *.yaml, *.yml and *.json; ``-``
for standard input), each within the input limits (bytes, objects, nesting, alias expansion, strings), as
plain dicts: a ``kind: List`` (or any ``*List``) expanded into its items, a multi-document YAML stream into its
documents. Every problem is an InputError naming the file (and the document's place). ``kubefile`` turns
the documents into a snapshot."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from optplan.errors import InputError, printable
from optplan.models.limits import (
    MAX_ALIAS_EXPANSION,
    MAX_INPUT_BYTES,
    MAX_LIST_NESTING,
    MAX_NESTING_DEPTH,
    MAX_OBJECTS,
)

try:  # the C loader is many times faster on large snapshots
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


# ---- reading files ---------------------------------------------------------------------------

STDIN = "-"
"""The snapshot argument that reads standard input (once; YAML or JSON)."""
STDIN_NAME = "<stdin>"
SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")
"""The files a directory argument contributes, sorted by name (not recursive)."""


@dataclass
class ReadBudget:
    """What the files of one command may still use (``limits``): bytes, objects, stdin once."""

    bytes_left: int = -1
    objects: int = 0
    stdin_read: bool = False

    def __post_init__(self) -> None:
        if self.bytes_left < 0:
            self.bytes_left = MAX_INPUT_BYTES


def snapshot_paths(paths: Sequence[str | Path]) -> list[str]:
    """The snapshot arguments with each directory replaced by its *.yaml, *.yml and *.json files."""
    out: list[str] = []
    for path in paths:
        s = str(path)
        if s != STDIN and Path(s).is_dir():
            try:
                files = sorted(str(f) for f in Path(s).iterdir()
                               if f.suffix.lower() in SNAPSHOT_SUFFIXES and f.is_file())
            except OSError as e:
                raise InputError(f"cannot read directory ({e.strerror or e})", file=s) from None
            if not files:
                raise InputError("cannot read file (a directory without *.yaml, *.yml or *.json files)", file=s)
            out.extend(files)
        else:
            out.append(s)
    return out


def read_data(path: str | Path, budget: ReadBudget | None = None) -> list[Any]:
    """The documents of one YAML or JSON file (``-``: standard input) as plain data, within the input
    limits: for files that are not Kubernetes objects (configuration)."""
    budget = budget or ReadBudget()
    name = STDIN_NAME if str(path) == STDIN else str(path)
    text = _read_text(str(path), name, budget)
    if str(path) == STDIN:
        as_json = text.lstrip()[:1] in ("{", "[")
    else:
        as_json = Path(path).suffix.lower() == ".json"
    return _parse(text, name, as_json)


def read_documents(path: str | Path, budget: ReadBudget | None = None) -> list[dict[str, Any]]:
    """Every Kubernetes object in one file (``-``: standard input), with List kinds expanded."""
    budget = budget or ReadBudget()
    name = STDIN_NAME if str(path) == STDIN else str(path)
    docs = read_data(path, budget)
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        out.extend(_expand(doc, name, f"document {i + 1}", budget))
    return out


def _read_text(path: str, name: str, budget: ReadBudget) -> str:
    limit = budget.bytes_left
    try:
        if path == STDIN:
            if budget.stdin_read:
                raise InputError("standard input ('-') is given more than once", file=name)
            budget.stdin_read = True
            stream: Any = getattr(sys.stdin, "buffer", sys.stdin)
            data = stream.read(limit + 1)
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogatepass")
        else:
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except OSError as e:
        raise InputError(f"cannot read file ({e.strerror or e})", file=name) from None
    if len(data) > limit:
        size = f"{MAX_INPUT_BYTES // 2**20} MiB" if MAX_INPUT_BYTES >= 2**20 else f"{MAX_INPUT_BYTES} bytes"
        raise InputError(f"the snapshot input is larger than {size} in all (limit MAX_INPUT_BYTES)", file=name)
    budget.bytes_left -= len(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("file is not UTF-8 text", file=name) from None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _parse(text: str, name: str, as_json: bool) -> list[Any]:
    try:
        if as_json:
            docs = [json.loads(text)]
            _check_tree(docs[0], name, strings=_SURROGATE_ESCAPE.search(text) is not None)
            return docs
        return _yaml_documents(text, name)
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}", file=name) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if "nesting depth" in problem:
            problem += f" (limit MAX_NESTING_DEPTH {MAX_NESTING_DEPTH})"
        raise InputError(f"malformed YAML{where}: {problem}", file=name) from None
    except RecursionError:
        raise InputError(f"nested deeper than {MAX_NESTING_DEPTH} levels (limit MAX_NESTING_DEPTH)",
                         file=name) from None
    except ValueError as e:  # an integer beyond Python's digit limit (sys.get_int_max_str_digits), a bad date
        raise InputError(f"value out of range ({str(e).split(';')[0]})", file=name) from None


def _check_tree(root: Any, name: str, *, strings: bool) -> None:
    """A parsed JSON document within MAX_NESTING_DEPTH; with ``strings``, no lone surrogate in a string."""
    stack = [(root, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            items: Iterable[Any] = value.values()
            if strings:
                for k in value:
                    _check_string(k, name)
        elif isinstance(value, list):
            items = value
        else:
            if strings and isinstance(value, str):
                _check_string(value, name)
            continue
        if depth > MAX_NESTING_DEPTH:
            raise InputError(f"nested deeper than {MAX_NESTING_DEPTH} levels (limit MAX_NESTING_DEPTH)", file=name)
        for v in items:
            if strings or isinstance(v, dict | list):
                stack.append((v, depth + 1))


def _check_string(s: str, name: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"a string holds a lone surrogate ({printable(s[:40])})", file=name) from None


# YAML, built straight from the parser's events: no node graph of the whole file in memory (kubectl writes
# one List document), aliases counted against MAX_ALIAS_EXPANSION, nesting against MAX_NESTING_DEPTH.
# Scalars are resolved and constructed by the safe loader's own rules, so the values are the same as
# yaml.safe_load's.
_MAP_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQ_TAGS = (None, "!", "tag:yaml.org,2002:seq")
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_NO_KEY = object()
_MERGE = object()


class _Frame:
    __slots__ = ("anchor", "container", "key", "merges", "size")

    def __init__(self, container: dict[Any, Any] | list[Any], anchor: str | None) -> None:
        self.container = container
        self.anchor = anchor
        self.key: Any = _NO_KEY
        self.size = 1
        self.merges: list[dict[Any, Any]] = []


def yaml_documents(text: str, name: str) -> list[Any]:
    """The YAML documents of ``text`` (a string read elsewhere: a ConfigMap's data), under the same limits as a
    file's; malformed YAML is one InputError naming ``name``, line and column."""
    return _parse(text, name, as_json=False)


def _yaml_documents(text: str, name: str) -> list[Any]:
    loader = _Loader(text)
    try:
        return _build_yaml(loader, name)
    finally:
        loader.dispose()


def _build_yaml(loader: Any, name: str) -> list[Any]:
    constructors = loader.yaml_constructors
    implicit = loader.yaml_implicit_resolvers
    docs: list[Any] = []
    anchors: dict[str, Any] = {}
    sizes: dict[str, int] = {}
    expanded = 0
    stack: list[_Frame] = []
    root: Any = None

    def fail(problem: str, ev: Any) -> yaml.MarkedYAMLError:
        return yaml.MarkedYAMLError(None, None, problem, ev.start_mark)

    def add(value: Any, size: int, ev: Any) -> None:
        nonlocal root
        if not stack:
            root = value
            return
        top = stack[-1]
        top.size += size
        c = top.container
        if isinstance(c, list):
            c.append(value)
        elif top.key is _NO_KEY:
            if isinstance(value, dict | list):
                raise fail("found unhashable key", ev)
            top.key = value
        elif top.key is _MERGE:
            sources = [value] if isinstance(value, dict) else list(reversed(value)) if isinstance(value, list) else []
            if not sources or not all(isinstance(s, dict) for s in sources):
                raise fail("expected a mapping or list of mappings for merging", ev)
            top.merges.extend(sources)
            top.key = _NO_KEY
        else:
            c[top.key] = value
            top.key = _NO_KEY

    while True:
        ev = loader.get_event()
        kind = type(ev)
        if kind is yaml.ScalarEvent:
            tag = ev.tag
            value: Any = ev.value
            if tag is None or tag == "!":
                tag = _STR_TAG
                if ev.implicit[0]:
                    for t, rx in implicit.get(value[:1], ()):
                        if rx.match(value):
                            tag = t
                            break
            if tag == _MERGE_TAG and stack and isinstance(stack[-1].container, dict) and stack[-1].key is _NO_KEY:
                stack[-1].key = _MERGE
                stack[-1].size += 1
                continue
            if tag != _STR_TAG:
                ctor = constructors.get(tag) or constructors[None]
                value = ctor(loader, yaml.ScalarNode(tag, value, ev.start_mark, ev.end_mark, ev.style))
            if ev.anchor is not None:
                anchors[ev.anchor] = value
                sizes[ev.anchor] = 1
            add(value, 1, ev)
        elif kind is yaml.AliasEvent:
            if ev.anchor not in anchors:
                raise fail(f"found undefined alias {ev.anchor!r}", ev)
            expanded += sizes.get(ev.anchor, 1)
            if expanded > MAX_ALIAS_EXPANSION:
                raise InputError(f"YAML aliases stand for more than {MAX_ALIAS_EXPANSION} values "
                                 f"(limit MAX_ALIAS_EXPANSION) at line {ev.start_mark.line + 1}", file=name)
            add(anchors[ev.anchor], sizes.get(ev.anchor, 1), ev)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            is_map = kind is yaml.MappingStartEvent
            if ev.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
                raise fail(f"unsupported tag {ev.tag!r}", ev)
            if len(stack) >= MAX_NESTING_DEPTH:
                raise InputError(f"nested deeper than {MAX_NESTING_DEPTH} levels (limit MAX_NESTING_DEPTH) "
                                 f"at line {ev.start_mark.line + 1}", file=name)
            frame = _Frame({} if is_map else [], ev.anchor)
            if ev.anchor is not None:
                anchors[ev.anchor] = frame.container
                sizes[ev.anchor] = 1  # an alias inside its own anchor counts one
            stack.append(frame)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            frame = stack.pop()
            container = frame.container
            if frame.merges and isinstance(container, dict):
                merged: dict[Any, Any] = {}
                for source in frame.merges:
                    merged.update(source)
                merged.update(container)
                container.clear()
                container.update(merged)
            if frame.anchor is not None:
                sizes[frame.anchor] = frame.size
            add(container, frame.size, ev)
        elif kind is yaml.DocumentEndEvent:
            docs.append(root)
            root = None
            anchors.clear()
            sizes.clear()
        elif kind is yaml.StreamEndEvent or ev is None:
            return docs


def _expand(doc: Any, file: str, where: str, budget: ReadBudget) -> list[dict[str, Any]]:
    """The objects of one document: itself, or the items of a List (Lists nest up to MAX_LIST_NESTING)."""
    out: list[dict[str, Any]] = []
    todo: list[tuple[Any, str, int]] = [(doc, where, 0)]
    while todo:
        obj, at, depth = todo.pop()
        if obj is None:
            continue
        if not isinstance(obj, dict):
            raise InputError(f"not a Kubernetes object (a mapping), got {type(obj).__name__}", file=file, obj=at)
        kind = obj.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in obj:
            items = obj.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"expected a list, got {type(items).__name__}", file=file, obj=f"{at} ({kind})",
                                 field="items")
            if depth >= MAX_LIST_NESTING:
                raise InputError(f"Lists nested deeper than {MAX_LIST_NESTING} (limit MAX_LIST_NESTING)",
                                 file=file, obj=f"{at} ({kind})", field="items")
            todo.extend((item, f"{at} item {j + 1}", depth + 1) for j, item in reversed(list(enumerate(items))))
            continue
        if not isinstance(kind, str) or not kind:
            meta = obj.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            label = f"{at} (metadata.name {name})" if isinstance(name, str) and name else at
            raise InputError("required field is missing" if kind is None else "expected a non-empty string",
                             file=file, obj=label, field="kind")
        budget.objects += 1
        if budget.objects > MAX_OBJECTS:
            raise InputError(f"more than {MAX_OBJECTS} objects in the snapshot files (limit MAX_OBJECTS)",
                             file=file, obj=at)
        out.append(obj)
    return out


