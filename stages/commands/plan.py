"""``toktok plan -c CFG``: what a run would do, shown before any work starts.

What it prints (docs/cli.md, toktok plan): the effective configuration as
YAML (``effective_configuration``, a config that loads as it is, every
default filled in and every path absolute), the id layout (``id_layout``), then per
phase its files (with the rule that cuts each into documents), text bytes, capacity, sample share and expected peak
memory, and last the run's expected peak (the largest phase's).

Design: the plan computes nothing of its own. The files, their text bytes
(the sizes an earlier ingest recorded reused) and the share come from the
phase's ingest folder (``Work.ingest(phase).inputs``), what ``toktok ingest``
reads, so the share planned is the share ingest keeps; the memory from
``toktoktok.memory``. Sources are checked as ``run`` checks them
(``Work.check_ready``: a ``ConfigError``, exit 2). Nothing is written and the
lock is not taken, so a plan may be made while a run is going on. Sizes are
in binary units (``MiB`` = 2**20 bytes); ``--json`` gives bytes.

    >>> human(3 << 20), human(1536), human(12)
    ('3.0 MiB', '1.5 KiB', '12 B')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from toktoktok.config import Config, Phase, effective_settings, new_special_tokens
from toktoktok.id_layout import BYTES, HARDCODED_MERGES, Block, blocks

if TYPE_CHECKING:
    from ..workdir import Work
    from ..workdir.folders import IngestInputs


def human(size: float) -> str:
    """A byte count in binary units (``stages.progress.human_bytes``)."""
    from ..workdir.progress import human_bytes

    return human_bytes(size)


def effective_configuration(cfg: Config) -> dict[str, Any]:
    """The config as a document that loads as it is: every key, defaults filled in,
    paths absolute (``effective_settings`` in the config's own spelling).

    A phase whose merges are the rest of ``vocab_size`` leaves ``merges`` out,
    as written, so the document says the same; the pattern is its name, or the
    regex; a source says ``path:`` (a folder) or ``file:``. Nothing internal
    (phase slugs and numbers) is in it: the phase tables show those. Loaded,
    it gives the same settings, so the same stage keys (tests/commands/test_plan.py).
    """
    settings = effective_settings(cfg)
    doc: dict[str, Any] = {"output": settings.pop("output"), "work_dir": settings.pop("work_dir"),
                           "vocab_size": settings.pop("vocab_size"), "working_set_mb": settings.pop("working_set_mb"),
                           "threads": cfg.threads}
    pattern = settings.pop("pattern")
    phases = settings.pop("phases")
    doc |= settings
    doc["pattern"] = pattern["name"] if pattern["name"] != "custom" else pattern["tiktoken"]
    if cfg.hf is not None:
        doc["hf"] = {**cfg.hf.roles, "model_max_length": cfg.hf.model_max_length,
                     "chat_template": cfg.hf.chat_template}
    if cfg.warm_start is not None and cfg.warm_start.special_tokens is None:
        del doc["warm_start"]["special_tokens"]  # the base's own, read from it as when left out
    doc |= {"engine": cfg.engine, "ray": {"address": cfg.ray.address, "num_cpus": cfg.ray.num_cpus}}
    doc["phases"] = [_phase_document(phase, entry) for phase, entry in zip(cfg.phases, phases)]
    return doc


def _phase_document(phase: Phase, entry: dict[str, Any]) -> dict[str, Any]:
    """One phase of ``effective_configuration``."""
    from toktoktok.config.schema import SPLIT_ON

    out: dict[str, Any] = {"name": phase.name}
    if not phase.gets_rest:
        out["merges"] = phase.merges
    if phase.pattern is not None:  # its own, as written: a name, or the regex
        out["pattern"] = phase.pattern.name if phase.pattern.name != "custom" else phase.pattern.tiktoken
    if phase.max_token_words is not None:
        out["max_token_words"] = phase.max_token_words
    out["sources"] = []
    for src, raw in zip(phase.sources, entry["sources"]):
        source = {"path" if src.is_dir else "file": raw.pop("path")}
        raw.pop("is_dir")
        if not src.is_dir:  # globs belong to a folder's scan
            raw.pop("include"), raw.pop("exclude")
        rule = raw.get("documents")
        if rule is not None and rule.startswith(SPLIT_ON):
            raw["documents"] = {"split_on": rule[len(SPLIT_ON):]}
        out["sources"].append(source | raw)
    return out


def _files(inputs: IngestInputs) -> list[dict[str, Any]]:
    """Each file of a phase: its source, format, size on disk, text bytes (None: unreadable)
    and the rule that cuts it into documents (a file of rows: ``file``, a row a document)."""
    from toktoktok.sources import document_rule, file_format

    return [{"path": str(path), "source": str(src.path), "format": ".".join(filter(None, file_format(path))),
             "size_bytes": on_disk, "text_bytes": size,
             "documents": document_rule(file_format(path)[0], src.documents)}
            for (src, path), on_disk, size in zip(inputs.files, inputs.fingerprints.columns["size"], inputs.sizes)]


def _sources(phase: Phase, inputs: IngestInputs) -> list[dict[str, Any]]:
    """Each source of a phase where one sets ``max_bytes`` (none otherwise): its text
    bytes before its cap, the cap, the share it keeps and the text it keeps."""
    caps = inputs.caps
    if not caps:
        return []
    place = {id(src): i for i, src in enumerate(phase.sources)}
    text = [0] * len(phase.sources)
    for (src, _), size in zip(inputs.files, inputs.sizes):
        text[place[id(src)]] += size or 0
    return [{"source": str(src.path), "text_bytes": total, "max_bytes": src.max_bytes, "cap_share": cap,
             "kept_text_bytes": round(total * cap)} for src, total, cap in zip(phase.sources, text, caps)]


def phase_plan(work: Work, phase: Phase) -> dict[str, Any]:
    """One phase: its files, totals, capacity, sample share and expected peak memory."""
    from toktoktok import memory, sampling

    cfg, inputs = work.cfg, work.ingest(phase).inputs(exact=True)
    files = _files(inputs)
    text = sum(f["text_bytes"] or 0 for f in files)
    capacity = sampling.capacity(cfg.working_set_mb)
    share = inputs.share
    sources = _sources(phase, inputs)
    capped = sum(s["kept_text_bytes"] for s in sources) if sources else text  # the text the caps keep
    kept = min(capped, capacity)  # share * capped, when sampled
    return {
        "name": phase.name, "slug": phase.slug, "merges": phase.merges, "gets_rest": phase.gets_rest,
        "pattern": cfg.pattern_of(phase).name, "files": files,
        **({"sources": sources, "capped_text_bytes": capped} if sources else {}),
        "size_bytes": sum(f["size_bytes"] for f in files), "text_bytes": text,
        "capacity_bytes": capacity, "sampled": share < 1, "share": share, "kept_text_bytes": kept,
        "expected_peak_mb": memory.expected_peak_mb(working_set_mb=cfg.working_set_mb, kept_text_bytes=kept),
    }


def make_plan(cfg: Config) -> dict[str, Any]:
    """The whole plan as JSON-able values (what ``--json`` prints); writes nothing.

    Raises ``ConfigError`` for what ``run`` would refuse before starting.
    """
    from toktoktok import memory
    from toktoktok.tuning import resolve_threads

    from ..ingest import check_engine
    from ..workdir import Work

    work, warnings = Work(cfg).check_ready()
    check_engine(work.cfg)
    cfg = work.cfg
    phases = [phase_plan(work, phase) for phase in cfg.phases]
    layout = id_layout(work)
    return {
        "config": str(cfg.path),
        "settings": effective_configuration(cfg),
        "threads_resolved": resolve_threads(cfg.threads),
        "queries_left_out": sum(bool(getattr(src.path, "query", "")) for p in cfg.phases for src in p.sources),
        "ids": [block.as_dict() for block in layout],
        "vocab_size": layout[-1].last + 1,
        "phases": phases,
        "working_set_mb": cfg.working_set_mb,
        "fixed_overhead_mb": memory.FIXED_OVERHEAD_MB,
        "expected_peak_mb": max(p["expected_peak_mb"] for p in phases),
        "warnings": warnings,
    }


def id_layout(work: Work) -> list[Block]:
    """The ids a run gives, block by block in the order they are given, if every
    phase makes all its merges: the bytes and hardcoded merges (or the warm
    start's base, its gaps and special tokens included), each phase, the new
    special tokens, the padding."""
    cfg = work.cfg
    if cfg.warm_start is not None:
        base = [("warm start base", len(work.base_vocab()))]
        specials = new_special_tokens(cfg, work.base_special_tokens())
    else:
        base = [("bytes", BYTES)] + ([("hardcoded merges", HARDCODED_MERGES)] if cfg.hardcoded_merges else [])
        specials = new_special_tokens(cfg)
    merges = [(p.name, p.merges or 0) for p in cfg.phases]
    return blocks(base=base, merges=merges, specials=len(specials), pad_to=cfg.pad_to_multiple_of)


def render_ids(plan: dict[str, Any]) -> list[str]:
    """The id layout as a table: ``first..last  count  block``."""
    given = plan["settings"].get("vocab_size")
    head = f"ids: {plan['vocab_size']:,} in all" + (" (vocab_size)" if given is not None else
                                                     " (if every phase makes all its merges)")
    lines = [head, f"  {'first':>9} {'last':>9} {'count':>9}  block"]
    for b in plan["ids"]:
        span = (f"{b['first']:>9} {b['last']:>9}" if b["count"] else f"{'-':>9} {'-':>9}")
        lines.append(f"  {span} {b['count']:>9}  {b['name']}")
    return lines


def _render_phase(p: dict[str, Any], number: int, count: int, working_set_mb: int) -> list[str]:
    """The lines of one phase: a table of its files, then totals, sample and memory."""
    rest = " (the rest of vocab_size)" if p["gets_rest"] else ""
    last = " (the tokenizer's: the last phase's)" if number == count else ""
    lines = [f"phase {number} of {count}: {p['name']} ({p['slug']}), {p['merges']} merges{rest}",
             f"  pattern: {p['pattern']}{last}",
             f"  {'format':<9} {'on disk':>9} {'text':>9}  {'documents':<10}  file"]
    for f in p["files"]:
        text = human(f["text_bytes"]) if f["text_bytes"] is not None else "unreadable (skipped)"
        lines.append(f"  {f['format']:<9} {human(f['size_bytes']):>9} {text:>9}  {f['documents']:<10}  {f['path']}")
    lines.append(f"  total: {len(p['files'])} files, {human(p['size_bytes'])} on disk, "
                 f"{human(p['text_bytes'])} of text")
    for c in p.get("sources", []):
        cap = "no max_bytes" if c["max_bytes"] is None else f"max_bytes {human(c['max_bytes'])}"
        lines.append(f"  source {c['source']}: {human(c['text_bytes'])} of text, {cap}: keeping "
                     f"{c['cap_share']:.1%} (about {human(c['kept_text_bytes'])})")
    if "capped_text_bytes" in p:
        lines.append(f"  after the caps: {human(p['capped_text_bytes'])} of text")
    lines.append(f"  capacity: {human(p['capacity_bytes'])} of text (working_set_mb: {working_set_mb})")
    if p["sampled"]:
        lines.append(f"  sampled: yes, keeping {p['share']:.1%} of documents "
                     f"(about {human(p['kept_text_bytes'])} of {human(p.get('capped_text_bytes', p['text_bytes']))})")
    else:
        lines.append("  sampled: no")
    lines.append(f"  expected peak memory: about {p['expected_peak_mb']:.0f} MiB")
    return lines


class _Dumper(yaml.SafeDumper):
    """YAML with a string holding a line break in double quotes (``"\\n---\\n"``), so the
    configuration block has no blank line inside it and ends at the first one."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = '"' if any(c in value for c in "\n\r\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def render(plan: dict[str, Any]) -> str:
    """The plan as text: the configuration as YAML, each phase, the run's peak memory."""
    settings = yaml.dump(plan["settings"], Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000)
    lines = [f"# effective configuration of {plan['config']}: a config that loads as it is "
             f"(defaults filled in, paths absolute)", settings.rstrip("\n")]
    lines.append("")
    if plan["settings"]["threads"] == -1:  # after the block, which a user may paste as it is
        lines += [f"# not part of the configuration: threads -1 is {plan['threads_resolved']} on this machine", ""]
    if plan["queries_left_out"]:  # a remote path's ?options may hold an access key: never printed
        lines += [f"# not shown: the ?query of {plan['queries_left_out']} remote source paths (add it back to paste "
                  f"the configuration)", ""]
    lines += render_ids(plan) + [""]
    for i, p in enumerate(plan["phases"], 1):
        lines += _render_phase(p, i, len(plan["phases"]), plan["working_set_mb"]) + [""]
    fixed, peak = plan["fixed_overhead_mb"], plan["expected_peak_mb"]
    lines.append(f"expected peak memory: about {peak:.0f} MiB (fixed overhead {fixed} MiB + {peak - fixed:.1f} MiB "
                 f"of work, at most working_set_mb = {plan['working_set_mb']} MiB)")
    return "\n".join(lines)
