"""The validators of the YAML's sections: each checks one key or mapping and builds its part of a ``Config``.

Keys first, then values, the first problem raised; nothing here reads a
file's contents (a warm start is read by ``preflight``). The rules they keep
(docs/configuration.md#rules-the-checks-keep):

- ``output`` ends with ``.tiktoken`` (every artifact name derives from it)
  and is not a directory; ``work_dir``, which ``toktok clean`` may delete,
  holds nothing of the user's (config, output, sources, warm start).
- ``null`` means "not set" only for keys whose default is nothing; for a
  key with a value default it is an error (most likely an unfinished edit).
- ``pattern`` names are case-insensitive, tiktoken's encoding names are
  aliases; a custom regex must compile in ``regex`` and in tiktoken, match
  no empty string and leave no character unmatched (``probe_pattern``).
- Special tokens: empty, repeated, or one inside another is an error (the
  search is ``find_nested``'s, linear in the tokens' length).
- Phase names are unique case-insensitively and as slugs (``NN-name``).
- Warnings, not errors: ``merges: 0``; a source listed twice in a phase.

    >>> from toktoktok.config_errors import Context
    >>> validate_special_tokens(Context("c.yaml", Path(".")), ["<|a|>", "<|b|>"])
    ('<|a|>', '<|b|>')
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from toktoktok.config_errors import Context, KeyPath, describe, format_key_path
from toktoktok.errors import UnsafePattern
from toktoktok.patterns import NAMED_PATTERNS, Pattern, resolve_pattern, tiktoken_rejects
from toktoktok.tiktoken_file import find_nested
from toktoktok.uris import RemotePath

from .schema import (
    DOCUMENT_RULES,
    ENGINES,
    HF_KEYS,
    HF_ROLES,
    MAX_HELDOUT_SHARE,
    MAX_MERGES,
    MAX_MIN_FREQUENCY,
    MAX_MODEL_MAX_LENGTH,
    MAX_PAD_TO_MULTIPLE_OF,
    MAX_PATTERN_TIMEOUT_S,
    MAX_PIECE_BYTES,
    MAX_RAY_CPUS,
    MAX_SEED,
    MAX_SPECIAL_ID,
    MAX_THREADS,
    MAX_TOKEN_BYTES,
    MAX_TOKEN_WORDS,
    MAX_WEIGHT,
    MAX_WORKING_SET_MB,
    MIN_PATTERN_TIMEOUT_S,
    MIN_PIECE_BYTES,
    OUTPUT_SUFFIX,
    PATTERN_ALIASES,
    PHASE_KEYS,
    RAY_KEYS,
    SOURCE_KEYS,
    SPLIT_ON,
    WARM_START_KEYS,
    Config,
    HfSettings,
    Phase,
    RayOptions,
    Source,
    WarmStart,
    default_work_dir,
    slugify,
)
from .values import (
    boolean,
    check_keys,
    choice,
    existing,
    integer,
    is_int,
    mapping,
    number,
    optional_integer,
    path_value,
    require,
    sequence,
    string,
    string_list,
)


def validate_output(ctx: Context, raw: Any) -> Path:
    """``output:`` a path ending in ``.tiktoken``, not an existing directory."""
    output = path_value(ctx, ("output",), raw)
    if not output.name.endswith(OUTPUT_SUFFIX) or output.name == OUTPUT_SUFFIX:
        wanted = f"a file name ending in {OUTPUT_SUFFIX} (e.g. my_tokenizer{OUTPUT_SUFFIX})"
        raise ctx.error(("output",), f"must be {wanted}, got {raw!r}")
    if output.is_dir():
        raise ctx.error(("output",), f"is an existing directory: {output}")
    return output


def validate_work_dir(ctx: Context, raw: Any, output: Path) -> Path:
    if raw is None:
        return default_work_dir(output)
    work_dir = path_value(ctx, ("work_dir",), raw)
    if work_dir.exists() and not work_dir.is_dir():
        raise ctx.error(("work_dir",), f"exists and is not a directory: {work_dir}")
    return work_dir


def check_work_dir_safety(ctx: Context, cfg: Config) -> None:
    """work_dir may be deleted by ``toktok clean``: it must hold nothing of the user's."""
    guarded: list[tuple[str, Path]] = [("the config file", cfg.path), ("the output", cfg.output)]
    if cfg.warm_start is not None:
        guarded.append(("the warm-start file", cfg.warm_start.file))
        if cfg.output == cfg.warm_start.file:
            raise ctx.error(("output",), f"would overwrite the warm-start file {cfg.warm_start.file}")
    for phase in cfg.phases:
        guarded += [(f"a source of phase {phase.name!r}", s.path) for s in phase.sources
                    if not isinstance(s.path, RemotePath)]  # never inside a local folder
    for what, path in guarded:
        if path == cfg.work_dir or cfg.work_dir in path.parents:
            raise ctx.error(("work_dir",), f"{cfg.work_dir} contains {what} ({path}); it must be a folder of its own")


def _source(ctx: Context, path: KeyPath, raw: Any) -> Source:
    """One entry of a phase's ``sources:`` list (exactly one of path:/file:)."""
    entry = mapping(ctx, path, raw, "a mapping with `path:` (a directory) or `file:` (a file)")
    check_keys(ctx, path, entry, SOURCE_KEYS)
    if ("path" in entry) == ("file" in entry):
        both = "has both" if "path" in entry else "has neither"
        exactly_one = "give exactly one (path: a directory to scan, file: one file)"
        raise ctx.error(path, f"{both} `path:` and `file:`; {exactly_one}")
    is_dir = "path" in entry
    key = "path" if is_dir else "file"
    location = existing(ctx, path + (key,), entry[key], want_dir=is_dir, remote=True)
    for glob_key in ("include", "exclude"):
        if glob_key in entry and not is_dir:
            raise ctx.error(path + (glob_key,), "is only allowed with `path:` (a directory), not with `file:`")
    text_column = entry.get("text_column", "text")
    if not isinstance(text_column, str) or not text_column:
        raise ctx.error(path + ("text_column",), f"must be a non-empty string, got {describe(text_column)}")
    weight = number(ctx, path + ("weight",), entry.get("weight", 1.0),
                     f"a positive number at most {MAX_WEIGHT:,.0f}", lambda w: 0 < w <= MAX_WEIGHT)
    include = string_list(ctx, path + ("include",), entry.get("include"))
    exclude = string_list(ctx, path + ("exclude",), entry.get("exclude"))
    documents = validate_documents(ctx, path + ("documents",), entry.get("documents"))
    max_bytes = entry.get("max_bytes")
    if max_bytes is not None:  # an integer only: the config parses no sizes with units
        max_bytes = integer(ctx, path + ("max_bytes",), max_bytes, 1)
    return Source(location, is_dir, text_column, weight, include, exclude, documents, max_bytes)


def validate_documents(ctx: Context, path: KeyPath, raw: Any) -> str | None:
    """A source's ``documents:``: ``file``, ``blank-line``, ``line`` or ``{split_on: STRING}``
    (held as ``split-on:STRING``); None (left out): each file's default.

        >>> ctx = Context("c.yaml", Path("."))
        >>> validate_documents(ctx, ("documents",), "line"), validate_documents(ctx, ("documents",), {"split_on": "<|x|>"})
        ('line', 'split-on:<|x|>')
    """
    if raw is None:
        return None
    wanted = "file, blank-line, line or a mapping {split_on: STRING}"
    if isinstance(raw, str):
        if raw in DOCUMENT_RULES:
            return raw
        raise ctx.error(path, f"must be {wanted}, got {raw!r}")
    if not isinstance(raw, dict):
        raise ctx.error(path, f"must be {wanted}, got {describe(raw)}")
    check_keys(ctx, path, raw, ("split_on",))
    separator = require(ctx, raw, path, "split_on")
    if not isinstance(separator, str) or not separator:
        raise ctx.error(path + ("split_on",), f"must be a non-empty string, got {describe(separator)}")
    return SPLIT_ON + separator


def _phase(ctx: Context, path: KeyPath, raw: Any, index: int, merges_optional: bool) -> Phase:
    """One entry of ``phases:``; ``index`` is 1-based. ``merges_optional``: with
    ``vocab_size``, a phase may leave ``merges:`` out (None: it gets the rest)."""
    entry = mapping(ctx, path, raw, "a mapping with name:, merges: and sources:")
    check_keys(ctx, path, entry, PHASE_KEYS)
    name = string(ctx, path + ("name",), require(ctx, entry, path, "name"))
    if merges_optional and "merges" not in entry:
        merges = None
    else:
        merges = integer(ctx, path + ("merges",), require(ctx, entry, path, "merges"), 0, MAX_MERGES)
    sources_path = path + ("sources",)
    raw_sources = require(ctx, entry, path, "sources")
    raw_sources = sequence(ctx, sources_path, raw_sources, "a non-empty list of sources", non_empty=True)
    sources = tuple(_source(ctx, sources_path + (i,), s) for i, s in enumerate(raw_sources))
    # a phase's own pattern (None: the top-level one); null given is the same as left out
    pattern = validate_pattern(ctx, entry["pattern"], path + ("pattern",)) if entry.get("pattern") is not None else None
    words = optional_integer(ctx, path + ("max_token_words",), entry.get("max_token_words"), 1, MAX_TOKEN_WORDS)
    return Phase(name, merges, sources, index, f"{index:02d}-{slugify(name)}", gets_rest=merges is None,
                 pattern=pattern, max_token_words=words)


def validate_phases(ctx: Context, raw: Any, merges_optional: bool) -> tuple[Phase, ...]:
    """The ``phases:`` list: at least one, names unique (case-insensitively and as slugs)."""
    items = sequence(ctx, ("phases",), raw, "a non-empty list of phases", non_empty=True)
    phases = tuple(_phase(ctx, ("phases", i), item, i + 1, merges_optional) for i, item in enumerate(items))
    seen_names: dict[str, int] = {}
    seen_slugs: dict[str, int] = {}
    for i, phase in enumerate(phases):
        where = ("phases", i, "name")
        for seen, key in ((seen_names, phase.name.casefold()), (seen_slugs, slugify(phase.name))):
            if key in seen:
                first = phases[seen[key]].name
                problem = f"{phase.name!r} is too close to phases[{seen[key]}].name {first!r}"
                raise ctx.error(where, f"{problem}: phase names must be unique (ignoring case and punctuation)")
            seen[key] = i
    return phases


def validate_special_tokens(ctx: Context, raw: Any) -> tuple[str, ...]:
    """``special_tokens:``: a list of non-empty, unique strings (null = none)."""
    if raw is None:
        return ()
    items = sequence(ctx, ("special_tokens",), raw, "a list of strings")
    first_at: dict[str, int] = {}
    for i, token in enumerate(items):
        if not isinstance(token, str) or not token:
            raise ctx.error(("special_tokens", i), f"must be a non-empty string, got {describe(token)}")
        if token in first_at:
            raise ctx.error(("special_tokens", i), f"{token!r} repeats special_tokens[{first_at[token]}]")
        first_at[token] = i
    return tuple(items)


def check_nesting(ctx: Context, tokens: list[tuple[KeyPath, str]]) -> None:
    """No special token may sit inside another (tiktoken would pick by hash order).

    The same token listed in two places (top level and warm start) is allowed.
    The error is raised at the later of the two in the file's order. The search
    is ``find_nested``'s, linear in the tokens' total length (a pairwise
    comparison would take minutes for 100,000 tokens).
    """
    found = find_nested(token for _, token in tokens)
    if found is None:
        return
    first: dict[str, int] = {}
    for i, (_, token) in enumerate(tokens):
        first.setdefault(token, i)
    inner, outer = found
    (path_a, a), (path_b, b) = sorted((tokens[first[inner]], tokens[first[outer]]), key=lambda t: first[t[1]])
    both = f"{b!r} and {format_key_path(path_a)} {a!r}"
    raise ctx.error(path_b, f"{both} overlap: {inner!r} is inside {outer!r}; tiktoken could match either")


def all_special_tokens(
    tokens: tuple[str, ...], warm_start: WarmStart | None
) -> list[tuple[KeyPath, str]]:
    """Every special token the config names, with its key path, for the nesting check."""
    found: list[tuple[KeyPath, str]] = [(("special_tokens", i), t) for i, t in enumerate(tokens)]
    if warm_start is not None and warm_start.special_tokens:
        found += [(("warm_start", "special_tokens", t), t) for t in warm_start.special_tokens]
    return found


def validate_warm_start(ctx: Context, raw: Any) -> WarmStart | None:
    """``warm_start: {file: base.tiktoken, special_tokens: {tok: id}}`` (null = none);
    the file is not read here."""
    if raw is None:
        return None
    path: KeyPath = ("warm_start",)
    entry = mapping(ctx, path, raw, "a mapping like {file: base.tiktoken}")
    check_keys(ctx, path, entry, WARM_START_KEYS)
    file = existing(ctx, path + ("file",), require(ctx, entry, path, "file"), want_dir=False)
    raw_specials = entry.get("special_tokens")
    if raw_specials is None:  # the base must say them: ``preflight.recognise_warm_start`` reads it
        return WarmStart(file, None)
    specials = mapping(ctx, path + ("special_tokens",), raw_specials, "a mapping of token: id")
    by_id: dict[int, str] = {}
    for token, token_id in specials.items():
        where = path + ("special_tokens", token)
        if not token:
            raise ctx.error(where, "is an empty special token")
        integer(ctx, where, token_id, 0, MAX_SPECIAL_ID)
        if token_id in by_id:
            raise ctx.error(where, f"has id {token_id}, already used by {by_id[token_id]!r}")
        by_id[token_id] = token
    return WarmStart(file, dict(specials))


def validate_hf(ctx: Context, doc: dict[str, Any], special_tokens: tuple[str, ...],
        warm_start: WarmStart | None) -> HfSettings | None:
    """``hf: {bos_token, eos_token, pad_token, unk_token, model_max_length, chat_template}``
    (null = none). A role must name a declared special token (a warm start's
    own, read from its file, are checked by ``preflight``);
    ``hf:`` implies ``export_hf: true``, so ``export_hf: false`` beside it is refused."""
    raw = doc.get("hf")
    if raw is None:
        return None
    path: KeyPath = ("hf",)
    entry = mapping(ctx, path, raw, "a mapping like {pad_token: '<|pad|>'}")
    check_keys(ctx, path, entry, HF_KEYS)
    if doc.get("export_hf") is False:
        raise ctx.error(("export_hf",), "is false, but hf: is given (hf: writes the Hugging Face files; "
                                        "remove one of the two)")
    declared = list(special_tokens) + list((warm_start.special_tokens or {}) if warm_start else {})
    roles: dict[str, str | None] = {}
    for role in HF_ROLES:
        if role not in entry:
            continue
        token = entry[role]
        if token is not None:
            string(ctx, path + (role,), token, "a special token (a string) or null")
            if token not in declared and warm_start is None:
                known = ", ".join(repr(t) for t in declared) or "none are declared"
                raise ctx.error(path + (role,), f"is {token!r}, not a declared special token "
                                                f"(special_tokens: {known})")
        roles[role] = token
    max_length = optional_integer(ctx, path + ("model_max_length",), entry.get("model_max_length"), 1,
                               MAX_MODEL_MAX_LENGTH)
    template = entry.get("chat_template")
    if template is not None:
        template = string(ctx, path + ("chat_template",), template, "a Jinja template (a non-empty string) or null")
    return HfSettings(roles, max_length, template)


def check_hf_chat_template(ctx: Context, hf: HfSettings | None) -> tuple[str, ...]:
    """``hf.chat_template`` compiled as transformers compiles it (``toktoktok.chat_template``):
    an error naming the template's line if Jinja refuses it; a warning if nothing could check it."""
    if hf is None or hf.chat_template is None:
        return ()
    from toktoktok.chat_template import check_chat_template  # jinja2 (and transformers): only with a template

    where = ("hf", "chat_template")
    try:
        checker = check_chat_template(hf.chat_template)
    except ValueError as exc:
        raise ctx.error(where, f"is not a valid Jinja template (as transformers compiles it): {exc}") from None
    if checker is None:
        return ("hf.chat_template was not checked as Jinja: jinja2 cannot be imported (transformers needs it too, "
                "to apply the template: pip install jinja2)",)
    return ()


def validate_pattern(ctx: Context, raw: Any, where: KeyPath = ("pattern",)) -> Pattern:
    """``pattern:`` null/a name (case-insensitive, tiktoken aliases) or a regex
    (``where``: the key, for a phase's own ``pattern:``)."""
    if raw is None:
        return resolve_pattern(None)
    if not isinstance(raw, str) or not raw:
        names = ", ".join(NAMED_PATTERNS)
        raise ctx.error(where, f"must be a name ({names}) or a regex string, got {describe(raw)}")
    name = PATTERN_ALIASES.get(raw.strip().lower(), raw.strip().lower())
    if name in NAMED_PATTERNS:
        return NAMED_PATTERNS[name]
    try:
        pattern = resolve_pattern(raw)
    except UnsafePattern as exc:
        raise ctx.error(where, f"is refused: it {exc}") from None
    except ValueError as exc:
        raise ctx.error(where, f"is not a valid regex: {exc}") from None
    problem = tiktoken_rejects(pattern.tiktoken)
    if problem:
        raise ctx.error(where, f"is a regex tiktoken cannot use: {problem}")
    return pattern


def scalar_settings(ctx: Context, doc: dict[str, Any]) -> dict[str, Any]:
    """The simple top-level settings, defaults filled in."""

    def get(key: str) -> tuple[KeyPath, Any]:
        default = next(f.default for f in fields(Config) if f.name == key)
        return (key,), doc.get(key, default)

    threads_path, threads = get("threads")
    if not is_int(threads) or not (threads == -1 or threads >= 1):
        raise ctx.error(threads_path, f"must be -1 (all cores) or an integer >= 1, got {describe(threads)}")
    integer(ctx, threads_path, threads, -1, MAX_THREADS)
    share_ok = lambda x: 0 <= x <= MAX_HELDOUT_SHARE  # noqa: E731
    return {
        "working_set_mb": integer(ctx, *get("working_set_mb"), 1, MAX_WORKING_SET_MB),
        "threads": threads,
        "verbose": boolean(ctx, *get("verbose")),
        "hardcoded_merges": boolean(ctx, *get("hardcoded_merges")),
        "seed": integer(ctx, *get("seed"), 0, MAX_SEED),
        "min_frequency": integer(ctx, *get("min_frequency"), 1, MAX_MIN_FREQUENCY),
        "heldout_share": number(ctx, *get("heldout_share"), f"a number between 0 and {MAX_HELDOUT_SHARE}", share_ok),
        "pad_to_multiple_of": optional_integer(ctx, *get("pad_to_multiple_of"), 1, MAX_PAD_TO_MULTIPLE_OF),
        "max_token_bytes": optional_integer(ctx, *get("max_token_bytes"), 2, MAX_TOKEN_BYTES),
        "max_token_words": optional_integer(ctx, *get("max_token_words"), 1, MAX_TOKEN_WORDS),
        "export_hf": boolean(ctx, *get("export_hf")),
        "max_piece_bytes": integer(ctx, *get("max_piece_bytes"), MIN_PIECE_BYTES, MAX_PIECE_BYTES),
        "on_bad_file": choice(ctx, *get("on_bad_file"), ("fail", "skip")),
        "pattern_timeout_s": number(ctx, *get("pattern_timeout_s"), "a number of seconds between 0.01 and 3600",
                                     lambda x: MIN_PATTERN_TIMEOUT_S <= x <= MAX_PATTERN_TIMEOUT_S),
        "engine": choice(ctx, ("engine",), doc.get("engine", "local"), ENGINES),
        "ray": _ray_options(ctx, doc.get("ray")),
    }


def _ray_options(ctx: Context, value: Any) -> RayOptions:
    """``ray: {address: auto | ray://host:port, num_cpus: N}`` (both optional).

        >>> _ray_options(Context("c.yaml", Path(".")), {"address": "auto"})
        RayOptions(address='auto', num_cpus=None)
    """
    if value is None:
        return RayOptions()
    if not isinstance(value, dict):
        raise ctx.error(("ray",), f"must be a mapping such as {{address: auto, num_cpus: 8}}, got {describe(value)}")
    check_keys(ctx, ("ray",), value, RAY_KEYS)
    address = value.get("address")
    if address is not None and not (isinstance(address, str) and (address == "auto" or address.startswith("ray://"))):
        raise ctx.error(("ray", "address"), f"must be auto or ray://host:port (left out: start a local Ray instance), "
                        f"got {describe(address)}")
    return RayOptions(address=address, num_cpus=optional_integer(ctx, ("ray", "num_cpus"), value.get("num_cpus"), 1,
                                                                     MAX_RAY_CPUS))


def phase_warnings(phases: tuple[Phase, ...]) -> tuple[str, ...]:
    """Valid but probably unintended: ``merges: 0``, a source listed twice in a phase."""
    out: list[str] = []
    for phase in phases:
        if phase.merges == 0 and phase.gets_rest:
            out.append(f"phase {phase.name!r} gets the rest of vocab_size, which is 0: it adds no tokens")
        elif phase.merges == 0:
            out.append(f"phase {phase.name!r} has merges: 0: it adds no tokens")
        seen: set[tuple[Any, ...]] = set()
        for source in phase.sources:
            key = (source.path, source.is_dir, source.text_column, source.include, source.exclude, source.documents)
            if key in seen:
                twice = f"phase {phase.name!r} lists {source.path} twice"
                out.append(f"{twice}: its text counts twice (weight: says so more plainly)")
            seen.add(key)
    return tuple(out)
