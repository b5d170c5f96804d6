"""How a config problem is found and worded: ``FILE line N: KEY.PATH problem``.

What it holds: ``ConfigError``; the safe YAML reader (``read_document``),
which keeps the line of every key under its key path; ``Context``, which
turns a key path and a problem into that one-line error; ``config_error``,
for a problem found after loading, worded the same; and the wording helpers
(``format_key_path``, ``describe``, ``did_you_mean``).

Why apart from ``toktoktok.config``: the schema says what a valid config
is (the dataclasses, keys, types, defaults and bounds); this module says
where a problem is and how it reads, and knows no key of the schema. The
schema imports it, never the reverse.

*Safe loading, our own conversion.* The file is parsed with
``yaml.compose(..., Loader=yaml.SafeLoader)`` into a node tree; scalars are
built by PyYAML's ``SafeConstructor`` (so ``!!python/...`` tags are refused),
and mappings and lists are converted here, which lets us keep the line of
every key (``start_mark.line + 1``) under its key path and refuse what the
stock loader lets slip: duplicate keys (PyYAML silently keeps the last),
non-string keys, recursive aliases, alias "billion laughs" blow-ups
(``_MAX_NODES``) and several YAML documents in one file. ``<<`` merge keys
work (explicit keys win over merged ones).

    >>> Context("tok.yaml", Path("."), {("phases",): 3}).error(("phases", 0, "merges"), "is required")
    ConfigError('tok.yaml line 3: phases[0].merges is required')
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from toktoktok.errors import ConfigError

KeyPath = tuple[str | int, ...]


# --------------------------------------------------------------------------
# Key paths and error messages
# --------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def format_key_path(path: KeyPath) -> str:
    """Spell a key path the way users read it.

    >>> format_key_path(("phases", 1, "sources", 0, "path"))
    'phases[1].sources[0].path'
    >>> format_key_path(("warm_start", "special_tokens", "<|eot|>"))
    "warm_start.special_tokens['<|eot|>']"
    """
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "the top level"


def describe(value: Any) -> str:
    """A short, typed rendering of a received value, for error messages.

    >>> describe("abc"), describe(True), describe(None)
    ("'abc' (a string)", 'true (a boolean)', 'null')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    kinds = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a mapping"}
    kind = kinds.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({kind})"


def did_you_mean(word: str, choices: tuple[str, ...]) -> str:
    """``did you mean 'x'?`` for the choice closest to ``word`` (case ignored), else "".

    >>> did_you_mean("Mergez", ("name", "merges")), did_you_mean("zzz", ("name",))
    ("did you mean 'merges'?", '')
    """
    close = difflib.get_close_matches(word.lower(), choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


@dataclass
class Context:
    """What the checks carry along: the file's display name, the folder its
    relative paths resolve against, and each key's YAML line (for the messages)."""

    file: str
    base_dir: Path
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, path: KeyPath) -> int | None:
        """The YAML line of ``path`` or, failing that, of its nearest parent."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def error(self, path: KeyPath, problem: str, line: int | None = None) -> ConfigError:
        """``config.yaml line 7: phases[1].merges must be ...``"""
        line = line if line is not None else self.line_of(path)
        where = f"{self.file} line {line}" if line is not None else self.file
        return ConfigError(f"{where}: {format_key_path(path)} {problem}")


# --------------------------------------------------------------------------
# YAML: safe compose, then our own conversion keeping lines
# --------------------------------------------------------------------------

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAX_NODES = 100_000  # YAML nodes after alias expansion
_YAML12_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)\Z")


def _compose(text: str, file: str) -> yaml.Node | None:
    """Parse to a node tree with the safe loader; bad YAML -> ConfigError with its line."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file} line {mark.line + 1}" if mark is not None else file
        what = "; ".join(p for p in (exc.context, exc.problem) if p)
        raise ConfigError(f"{where}: invalid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"{file}: invalid YAML: nested too deeply") from None


class _Converter:
    """Turn composed nodes into plain Python values, recording each key's line."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.constructor = yaml.constructor.SafeConstructor()
        self.active: set[int] = set()  # ids of the collection nodes being converted
        self.count = 0

    def convert(self, node: yaml.Node, path: KeyPath) -> Any:
        self.count += 1
        if self.count > _MAX_NODES:
            too_many = f"makes the file too large (over {_MAX_NODES} values once aliases are expanded)"
            raise self.ctx.error(path, too_many)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        if id(node) in self.active:
            raise self.ctx.error(path, "refers to itself through a YAML alias")
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return self._sequence(node, path)
            return self._mapping(node, path)
        finally:
            self.active.discard(id(node))

    def _scalar(self, node: yaml.ScalarNode, path: KeyPath) -> Any:
        if node.tag == _STR_TAG and node.style is None and _YAML12_FLOAT.match(node.value):
            return float(node.value)  # YAML 1.2 reads `5e-3` as a number
        try:
            return self.constructor.construct_object(node, deep=True)
        except Exception as exc:  # unknown tag, `!!int abc`, ...
            problem = getattr(exc, "problem", None) or str(exc)
            raise self.ctx.error(path, f"cannot be read: {' '.join(problem.split())}") from None

    def _sequence(self, node: yaml.SequenceNode, path: KeyPath) -> list[Any]:
        if node.tag != _SEQ_TAG:
            raise self.ctx.error(path, f"uses an unsupported YAML tag {node.tag!r}", node.start_mark.line + 1)
        items = []
        for i, item in enumerate(node.value):
            self.ctx.lines[path + (i,)] = item.start_mark.line + 1
            items.append(self.convert(item, path + (i,)))
        return items

    def _mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[str, Any]:
        if node.tag != _MAP_TAG:
            raise self.ctx.error(path, f"uses an unsupported YAML tag {node.tag!r}", node.start_mark.line + 1)
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:  # `<<:` merges first: explicit keys win
            if key_node.tag == _MERGE_TAG:
                for source in self._merge_sources(value_node, path):
                    for key, value in self.convert(source, path).items():
                        merged.setdefault(key, value)  # the first merged mapping wins
        explicit: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self._key(key_node, path)
            line = key_node.start_mark.line + 1
            if key in explicit:
                first = self.ctx.lines[path + (key,)]
                raise self.ctx.error(path + (key,), f"is given twice (lines {first} and {line})", line)
            self.ctx.lines[path + (key,)] = line
            explicit[key] = self.convert(value_node, path + (key,))
        return {**merged, **explicit}

    def _key(self, key_node: yaml.Node, path: KeyPath) -> str:
        key = self._scalar(key_node, path) if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(key, str):
            shown = describe(key) if isinstance(key_node, yaml.ScalarNode) else "a list or mapping"
            raise self.ctx.error(path, f"has a key that is not a string: {shown}", key_node.start_mark.line + 1)
        return key

    def _merge_sources(self, node: yaml.Node, path: KeyPath) -> list[yaml.MappingNode]:
        nodes = node.value if isinstance(node, yaml.SequenceNode) else [node]
        if not all(isinstance(n, yaml.MappingNode) for n in nodes):
            not_mappings = "has a `<<:` merge key whose value is not a mapping (or a list of mappings)"
            raise self.ctx.error(path, not_mappings)
        return nodes


def read_document(path: Path, ctx: Context) -> dict[str, Any]:
    """Read, safely parse and convert the file; the top level must be a mapping."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{ctx.file}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{ctx.file}: is a directory, not a config file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{ctx.file}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{ctx.file}: cannot read: {exc.strerror or exc}") from None
    root = _compose(text, ctx.file)
    if root is None:
        raise ConfigError(f"{ctx.file}: the config file is empty (it needs at least `output:` and `phases:`)")
    try:
        document = _Converter(ctx).convert(root, ())
    except RecursionError:
        raise ConfigError(f"{ctx.file}: nested too deeply") from None
    if not isinstance(document, dict):
        raise ConfigError(
            f"{ctx.file} line {root.start_mark.line + 1}: the top level must be a mapping of settings "
            f"(output:, phases:, ...), got {describe(document)}"
        )
    return document


# --------------------------------------------------------------------------
# Problems found after loading
# --------------------------------------------------------------------------


def config_error(config_path: str | Path, key_path: KeyPath, problem: str) -> ConfigError:
    """A ``ConfigError`` for a problem found after loading (by the pipeline's checks
    before work starts), worded like the loader's own: ``FILE line N: KEY problem``.

    The file is read again (safely) to find the key's line; if that fails the
    message simply has no line.
    """
    ctx = Context(file=str(config_path), base_dir=Path(config_path).resolve().parent)
    try:
        read_document(Path(config_path), ctx)
    except (ConfigError, OSError, RecursionError, yaml.YAMLError):
        pass
    return ctx.error(key_path, problem)
