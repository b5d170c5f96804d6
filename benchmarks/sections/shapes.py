"""Shapes: ``toktok ingest`` on the same kernel text in every shape users bring, against one ``.txt``.

    make bench-scale      # runs it after the scale section, into results/SCALE.md (its "## shapes" part)
    .venv/bin/python benchmarks/run.py --section shapes --data DATA --reps 3 [--mb 50] [--out /tmp/SCALE.md]

The text (``shapes_corpus.py``, built once under ``--data``): the scale
section's training files of Debian's ``linux-source-6.1``, one file a
document, or its first ``--mb`` MB for a quick run; every shape holds the
same bytes. Each shape is ingested by ``toktok ingest -c CFG --force`` as a
whole process in a fresh folder (``threads: -1``, ``heldout_share: 0``, a
``working_set_mb`` that keeps all text, one phase of a few merges), measured
from outside as the scale section measures (``benchkit.measure``: wall,
true peak RSS from ``ru_maxrss`` and the sampled process tree, the kernel's
high-water mark never reset); shapes run in turn, ``--reps`` times, medians.
After each ingest, the limit its shape works against, measured in the same
run by ``shapes_probe.py`` (a pyarrow read, a decompression, a plain read,
opening every file). Before each ingest, the shape's files are read once
(``shapes_probe.py warm``), so every shape starts from the page cache. After
the first repetition, each ingest's chunk tables are summed piece by piece
and compared across the one-file-a-document shapes.

The folder shape is read through ``include:`` globs of its suffixes when
this toktoktok reads any suffix (tried with ``toktok plan`` on a ``.c``
file), else as ``.txt`` copies of its files (hard links), with
``documents: file`` when ``plan`` accepts it; the report says which. The report replaces the ``## shapes`` part of ``--out`` (the scale
section keeps that part when it rewrites the file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from sections import scale_corpus, shapes_corpus
from benchkit import report as bench_report
from benchkit.measure import Measured, median_of, run_measured
from benchkit.report import md_table, num
from benchkit.toktok import fresh, run_env, stage_manifests, toktok_bin

HERE = Path(__file__).resolve().parents[1]  # benchmarks/
PROBE = Path(__file__).resolve().parent / "shapes_probe.py"
HEADING = "## shapes"
MERGES = 10
TINY_BYTES = 2_000_000
MB = 1_000_000
REFERENCE = "parquet"  # the inventory every one-file-a-document shape is compared with
CORES = len(os.sched_getaffinity(0))  # the cores the ingests count on (``threads: -1``)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Shape:
    """A shape: its source in the config, its label, the limit it works against."""

    name: str
    label: str
    source: dict
    limit: tuple[str, list[Path], str]  # (probe kind, paths, what it is)
    per_file: bool  # one file (row, line) a document, as every shape but the .txt ones


@dataclass
class Result:
    runs: list[Measured] = field(default_factory=list)
    manifests: list[dict] = field(default_factory=list)
    limits: list[dict] = field(default_factory=list)
    inventory: dict | None = None

    def med(self, attr: str) -> float | None:
        return median_of([getattr(r, attr) for r in self.runs if r.returncode == 0])

    def manifest(self, key: str) -> float | None:
        return median_of([m[key] for m in self.manifests])

    def limit(self, key: str) -> float | None:
        return median_of([x[key] for x in self.limits if key in x])


@dataclass(frozen=True)
class Reader:
    """What this toktoktok reads: any suffix through ``include:``; ``documents: file`` on a source."""

    suffixes: bool
    documents: bool


def accepts(source: dict, folder: Path, env: dict[str, str]) -> bool:
    """Whether ``toktok plan`` accepts a config reading ``source``."""
    cfg = config(source, folder, 1)
    return subprocess.run([toktok_bin(), "plan", "-c", str(cfg)], capture_output=True, env=env).returncode == 0


def reader(folder: Path, env: dict[str, str]) -> Reader:
    """Tried with ``toktok plan`` on a folder of one ``.c`` file and one ``.txt`` file."""
    src = fresh(folder / "src")
    (src / "a.c").write_text("int main(void)\n{\n\treturn 0;\n}\n", encoding="utf-8")
    (src / "b.txt").write_text("int x;\n", encoding="utf-8")
    return Reader(accepts({"path": str(src), "include": ["**/*.c"]}, folder, env),
                  accepts({"path": str(src), "documents": "file"}, folder, env))


def config(source: dict, folder: Path, text_bytes: int) -> Path:
    """An ingest config of one phase reading ``source``, all its text kept (``working_set_mb``)."""
    cfg = {"output": str(folder / "out.tiktoken"), "work_dir": str(folder / "work"),
           "working_set_mb": max(1024, 8 * (text_bytes >> 20)), "hardcoded_merges": False, "heldout_share": 0,
           "min_frequency": 2, "seed": 0, "threads": -1,
           "phases": [{"name": "shapes", "merges": MERGES, "sources": [source]}]}
    path = folder / "shapes.yaml"
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")  # JSON is YAML
    return path


def shapes_of(root: Path, facts: dict, reader: Reader) -> list[Shape]:
    """The shapes under ``root`` (``shapes_corpus.SHAPE_FILES``), in the order they run."""
    f = {name: root / rel for name, rel in shapes_corpus.SHAPE_FILES.items()}
    files, parts = f"{facts['files']:,}", sorted((f["parquet-folder"]).glob("*.parquet"))
    shards = sorted(f["datasets"].glob("data-*.arrow"))
    read, pyarrow = "plain read of the file (`os.read`, 1 MiB blocks)", "pyarrow streams the `text` column"
    whole = {"documents": "file"} if reader.documents else {}
    if reader.suffixes:
        globs = [f"**/*{s}" for s in scale_corpus.SUFFIXES] + list(scale_corpus.NAMES)
        folder = Shape("folder", f"a folder of {files} files as they are (`.c`, `.h`, ...), `include:` their "
                       "suffixes", {"path": str(f["folder"]), "include": globs, **whole},
                       ("files", [f["folder"]], "list the folder, open/read/close every file"), True)
    else:
        folder = Shape("folder", f"a folder of {files} `.txt` copies of the files (this toktoktok reads no other "
                       "suffix)", {"path": str(f["folder-txt"]), **whole},
                       ("files", [f["folder-txt"]], "list the folder, open/read/close every file"), True)
    return [
        Shape("txt", "one `.txt` (documents separated by a blank line)", {"file": str(f["txt"])},
              ("read", [f["txt"]], read), False),
        folder,
        Shape("parquet", "one parquet, one row a document (`text`, 100,000-row groups, snappy)",
              {"file": str(f["parquet"])}, ("parquet", [f["parquet"]], pyarrow), True),
        Shape("parquet-zstd", "one parquet, zstd", {"file": str(f["parquet-zstd"])},
              ("parquet", [f["parquet-zstd"]], pyarrow), True),
        Shape("parquet-none", "one parquet, uncompressed", {"file": str(f["parquet-none"])},
              ("parquet", [f["parquet-none"]], pyarrow), True),
        Shape("parquet-large", "one parquet, `large_string`, snappy", {"file": str(f["parquet-large"])},
              ("parquet", [f["parquet-large"]], pyarrow), True),
        Shape("parquet-folder", f"a folder of {len(parts)} parquet files (snappy)", {"path": str(f["parquet-folder"])},
              ("parquet", parts, pyarrow + " (every file)"), True),
        Shape("arrow", "one Arrow IPC file (file format, 1,000-row batches)", {"file": str(f["arrow"])},
              ("arrow", [f["arrow"]], "pyarrow reads the file whole (no memory map)"), True),
        Shape("datasets", f"a `datasets`-style folder ({len(shards)} `data-*.arrow` stream file(s))",
              {"path": str(f["datasets"]), "include": ["data-*.arrow"]},
              ("arrow", shards, "pyarrow reads every stream file whole"), True),
        Shape("jsonl", "one `.jsonl`, one object a line (`text`, `path`)", {"file": str(f["jsonl"])},
              ("jsonl", [f["jsonl"]], "toktoktok's JSON lines reader (one thread)"), True),
        Shape("jsonl.gz", "one `.jsonl.gz` (level 6)", {"file": str(f["jsonl.gz"])},
              ("jsonl", [f["jsonl.gz"]], "toktoktok's JSON lines reader, ISA-L's `igzip` decompressing"), True),
        Shape("jsonl.zst", "one `.jsonl.zst` (level 3)", {"file": str(f["jsonl.zst"])},
              ("jsonl", [f["jsonl.zst"]], "toktoktok's JSON lines reader, `zstandard` decompressing"), True),
        Shape("txt.gz", "the one `.txt` as `.txt.gz` (level 6)", {"file": str(f["txt.gz"])},
              ("gzip", [f["txt.gz"]], "ISA-L's `igzip` decompresses it"), False),
        Shape("txt.zst", "the one `.txt` as `.txt.zst` (level 3)", {"file": str(f["txt.zst"])},
              ("zstd", [f["txt.zst"]], "`zstandard` decompresses it"), False),
    ]


def probe(*args: str | Path) -> dict:
    done = subprocess.run([sys.executable, str(PROBE), *map(str, args)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"shapes_probe.py {' '.join(map(str, args[:2]))} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def ingest_facts(folder: Path) -> dict[str, float]:
    """The ingest manifest's seconds, documents, bytes read and distinct pieces."""
    found = stage_manifests(folder / "work", "ingest")
    return {"seconds": sum(m["seconds"]["total"] for m in found),
            "documents": sum(m["counts"]["documents"] for m in found),
            "bytes": sum(m["counts"]["bytes_read"] for m in found),
            "pieces": sum(m["counts"]["pieces"] for m in found)}


def ingest(shape: Shape, folder: Path, text_bytes: int, env: dict[str, str]) -> tuple[Measured, Path]:
    cfg = config(shape.source, fresh(folder), text_bytes)
    return run_measured([toktok_bin(), "ingest", "-c", str(cfg), "--force"], folder / "log.txt", env=env), folder


def tiny_docs(parquet: Path, limit: int = TINY_BYTES) -> list[tuple[str, bytes]]:
    """(path, text) of the first documents of the shapes' parquet, up to about ``limit`` bytes."""
    docs, size = [], 0
    for batch in pq.ParquetFile(parquet).iter_batches(batch_size=200, columns=["path", "text"]):
        for path, text in zip(batch.column("path").to_pylist(), batch.column("text").to_pylist()):
            docs.append((path, text.encode("utf-8")))
            size += len(docs[-1][1])
            if size >= limit:
                return docs
    return docs


def run_shapes(shapes: list[Shape], reps: int, text_bytes: int, work: Path,
               env: dict[str, str]) -> dict[str, Result]:
    """Every shape in turn, ``reps`` times: its ingest, then its limit; inventories after the first repetition."""
    results = {s.name: Result() for s in shapes}
    (work / "inventories").mkdir(parents=True, exist_ok=True)
    for rep in range(1, reps + 1):
        for shape in shapes:
            res = results[shape.name]
            kind, paths, _ = shape.limit
            probe("warm", *paths)  # its files in the page cache, which holds less than all the shapes
            measured, folder = ingest(shape, work / shape.name / f"rep{rep}", text_bytes, env)
            res.runs.append(measured)
            if measured.returncode == 0:
                res.manifests.append(ingest_facts(folder))
                if rep == 1:
                    res.inventory = probe("inventory", next((folder / "work" / "ingest").iterdir()),
                                          work / "inventories" / f"{shape.name}.arrow")
            res.limits.append(probe("limit", kind, *paths))
            log(f"rep {rep}/{reps} {shape.name}: {measured.wall:.2f} s, {measured.peak_mb:.0f} MB true peak, "
                f"limit {res.limits[-1]['seconds']:.2f} s"
                + ("" if measured.returncode == 0 else f", FAILED (see {measured.log})"))
            shutil.rmtree(folder / "work", ignore_errors=True)  # its inventory is kept apart
    return results


def reference(shapes: list[Shape], results: dict[str, Result]) -> str | None:
    """The shape every inventory is compared with: ``REFERENCE``, else the first one-file-a-document shape run."""
    names = [s.name for s in shapes if s.per_file and results[s.name].inventory is not None]
    return REFERENCE if REFERENCE in names else next(iter(names), None)


def agreement(shapes: list[Shape], results: dict[str, Result], work: Path) -> tuple[list[list[str]], set[str]]:
    """Per shape: distinct pieces, pieces, and whether its summed inventory is the reference's piece by piece;
    and the shapes that agree with it. A folder of text files agrees when it does once the documents that begin
    with a byte order mark are read as a text file reads them (``shapes_probe.diff_bom``): the folder's reader
    drops the mark, as for ``.txt``, where a row keeps it."""
    ref = reference(shapes, results)
    ref_inv = results[ref].inventory if ref else None
    parquet = next((Path(s.source["file"]) for s in shapes if s.name == REFERENCE), None)
    rows, agree = [], {ref} if ref else set()
    for shape in shapes:
        inv = results[shape.name].inventory
        if inv is None:
            rows.append([shape.name, "–", "–", "failed"])
            continue
        if ref_inv is None or shape.name == ref:
            same = "reference" if shape.name == ref else "–"
        elif inv["sha256"] == ref_inv["sha256"]:
            same = "yes, identical"
            agree.add(shape.name)
        else:
            mine, theirs = work / "inventories" / f"{shape.name}.arrow", work / "inventories" / f"{ref}.arrow"
            d = probe("diff", mine, theirs)
            if shape.name == "folder" and ref == REFERENCE and parquet is not None:
                marked = probe("diff-bom", mine, theirs, parquet)
                if not (marked["only_a"] or marked["only_b"] or marked["differ"]):
                    d = None
                    n = marked["marked"]
                    which = "the document that begins" if n == 1 else f"the {n:,} documents that begin"
                    same = (f"yes, once {which} with a byte order mark {'is' if n == 1 else 'are'} read as text "
                            "files are (the mark dropped, as for `.txt`; a row keeps it)")
                    agree.add(shape.name)
            if d is not None:
                shown = "; ".join(f"`{cell(p)}` {a if a is not None else 'absent'} here, "
                                  f"{b if b is not None else 'absent'} in {ref}" for p, a, b in d["examples"])
                same = (f"**no**: {d['only_a']:,} pieces only here, {d['only_b']:,} only in {ref}, "
                        f"{d['differ']:,} counted differently (e.g. {shown})")
        rows.append([shape.name + ("" if shape.per_file else " (blank-line documents)"), f"{inv['rows']:,}",
                     f"{inv['total']:,}", same])
    return rows, agree


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell's code span.

        >>> print(cell("b'a|`'"))
        b'a\\|\\x60'
    """
    return text.replace("|", "\\|").replace("`", "\\x60")


def verdict(shapes: list[Shape], results: dict[str, Result], agree: set[str]) -> str:
    """One line: do the one-file-a-document shapes' inventories agree (``agree``: those that do, from ``agreement``)."""
    invs = {s.name: results[s.name].inventory for s in shapes if s.per_file}
    if any(v is None for v in invs.values()):
        return "Some ingest failed: the inventories cannot all be compared."
    return (f"The inventories of the one-file-a-document shapes ({', '.join(invs)}) "
            + ("**agree**: the same distinct pieces with the same counts (the folder's as said in its row)."
               if set(invs) <= agree else "**do not agree** (below)."))


def on_disk(facts: dict, name: str, reader: Reader) -> int:
    """Bytes on disk of shape ``name`` (the folder read as ``.txt`` copies: the copies, hard links of the same size)."""
    return facts["disk_bytes"].get("folder-txt" if name == "folder" and not reader.suffixes else name, 0)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a is not None and b else "–"


def same_as_scale(data: Path, facts: dict) -> str | None:
    """Whether the one ``.txt`` has the size of the scale section's ``train-full.txt`` built here (full run only)."""
    manifest = data / "kernel" / "manifest.json"
    if facts["mb"] is not None or not manifest.exists():
        return None
    scale = json.loads(manifest.read_text())
    if scale.get("deb") != facts["deb"]:
        return f"(The scale corpus under `--data` was built from another package, `{scale.get('deb')}`.)\n"
    same = scale["train"]["full"]["bytes"] == facts["bytes"] and scale["train"]["full"]["files"] == facts["files"]
    return ("The one `.txt` has the files and bytes of the scale section's `train-full.txt` built here"
            + (": the same text." if same else f" **not**: {scale['train']['full']} there.") + "\n")


def folder_note(reader: Reader) -> str:
    """How the folder shape is read, in the report's words."""
    if reader.suffixes:
        how = ("this toktoktok reads any suffix (`toktok plan` accepted `include: [\"**/*.c\"]`), so the folder is "
               "read as it is, through `include:` globs of its suffixes and names")
    else:
        how = ("this toktoktok reads no other suffix than its own (`toktok plan` refused `include: [\"**/*.c\"]`), "
               "so the folder is read as `.txt` copies of its files (hard links named `NAME.txt`)")
    if reader.documents:
        return how + "; `documents: file` makes each file one document."
    return how + ("; this toktoktok has no `documents:` key, so a `.txt` file (a copy, or one of the tree's own) is "
                  "cut at blank lines and loses a leading byte order mark, as a `.txt` is read.")


def report(args: argparse.Namespace, facts: dict, run: dict, shapes: list[Shape], results: dict[str, Result],
           reader: Reader, work: Path) -> str:
    base = results["txt"]
    rows, lrows = [], []
    for s in shapes:
        r = results[s.name]
        failed = len(r.runs) - len([x for x in r.runs if x.returncode == 0])
        label = s.label + (f" ({failed} of {len(r.runs)} failed)" if failed else "")
        wall, peak, stage = r.med("wall"), r.med("peak_mb"), r.manifest("seconds")
        nbytes = r.manifest("bytes")
        rows.append([label, num(wall, 2), ratio(wall, base.med("wall")), num(peak, 0),
                     ratio(peak, base.med("peak_mb")), num(stage, 2), num(nbytes / MB / stage if nbytes and stage
                                                                         else None, 0),
                     num(r.manifest("documents"), 0), num(on_disk(facts, s.name, reader) / MB, 1)])
        kind, _, what = s.limit
        seconds, lbytes = r.limit("seconds"), r.limit("bytes")
        extra = ""
        if kind == "files":
            extra = (f" (listing {num(r.limit('list_seconds'), 3)} s, open/read/close "
                     f"{num(r.limit('read_seconds'), 3)} s)")
        held, cpu = r.limit("held_mb"), r.limit("cpu_seconds")
        # the least this shape's ingest can take: the one .txt's, with the limit's CPU shared by every core
        bound = base.med("wall") + cpu / CORES if cpu is not None and base.med("wall") and s.name != "txt" else None
        lrows.append([s.name, what + extra, num(seconds, 3), num(cpu, 3),
                      num(lbytes / MB / seconds if lbytes and seconds else None, 0), ratio(seconds, stage),
                      ratio(seconds, wall), num(bound, 2) if bound else "", ratio(bound, base.med("wall")),
                      num(held, 0) if held is not None else "",
                      num(base.med("peak_mb") + held, 0) if held is not None and base.med("peak_mb") else ""])
    slice_note = (f"the first {facts['bytes'] / MB:,.1f} MB of it (`--mb {args.mb:g}`: a slice for a quick run, "
                  "not the full corpus; at this size a process's fixed part, start-up and numba's cache load, is "
                  "much of its wall)" if args.mb else "all of it")
    agreed, agree = agreement(shapes, results, work)
    lines = [
        f"{HEADING}: the same kernel source in every shape users bring", "",
        f"Run {run['date']}, commit {run['commit']}, `{run['command']}`; {run['machine']}; load average "
        f"{run['load']} at start; {run['versions']}.", "",
        f"The text: the scale section's training files of Debian's `{facts['package']}` {facts['version']} "
        f"(`apt-get download`; every UTF-8 file ending in {', '.join(facts['suffixes'])} or named "
        f"{' or '.join(facts['names'])}, in the order of a hash of its path, every 20th held out), "
        f"{slice_note}: {facts['files']:,} files, {facts['bytes'] / MB:,.1f} MB, one file a document (its text "
        "stripped, then a blank line, as in the scale corpus). `benchmarks/sections/shapes_corpus.py` writes it "
        "once in every shape below, each holding exactly these bytes: the one `.txt` is the scale section's "
        "`train-full.txt` (or its prefix), the folder holds each file under its own path and name, parquet and "
        "Arrow a row a document (`text`, and the file's `path`), the `.jsonl` an object a line "
        "(`{\"text\": ..., \"path\": ...}`), the compressed files the same bytes compressed.", "",
        "The folder shape: " + folder_note(reader), "",
        *([scale_note] if (scale_note := same_as_scale(args.data, facts)) else []),
        f"Each shape: `toktok ingest -c CFG --force` as a whole process in a fresh folder, one phase, "
        f"`threads: -1`, `heldout_share: 0`, a `working_set_mb` that keeps all text (nothing sampled), its files "
        "read once just before (so each starts from the page cache, which held less than all the shapes). Shapes "
        f"run in turn, {args.reps} repetition(s), medians. ingest s: the process's wall; peak MB: its true peak RSS "
        "measured from outside (the larger of `ru_maxrss`, the kernel's high-water mark, which nothing resets, "
        "and the sampled resident sets of its process tree); stage s: the ingest manifest's `seconds.total` "
        "(inside the process: no start-up, imports or numba cache load); MB/s: text bytes read ÷ stage s; "
        "documents: as the ingest manifest counts them (a `.txt` is cut at each blank line followed by a "
        "non-space, so it holds more than one document a file).", "",
        md_table(["shape", "ingest s", "× one `.txt`", "peak MB", "× one `.txt`", "stage s", "MB/s", "documents",
                  "MB on disk"], rows), "",
        "### The limit each shape works against", "",
        "Measured in the same run, right after each ingest (so the page cache is as the ingest left it), by "
        "`benchmarks/sections/shapes_probe.py` as a process of its own, timed around the reading alone, no "
        "tokenizing; medians. MB/s: text (or decompressed) bytes ÷ seconds; then the limit's seconds ÷ the shape's "
        "ingest stage seconds (the manifest's, as above) and ÷ its ingest wall. held MB (parquet): how far the "
        "probe's own peak RSS rose while pyarrow streamed the column, a batch of about 2 MiB of text at a time as "
        "ingest reads it: the memory pyarrow's reader holds (no less with 64-row write batches or without "
        "dictionary pages, tried on a slice of this file; more with 1,000-row groups); + one `.txt` peak: that added to the one `.txt` run's peak, "
        "the least a parquet ingest can hold with the rest of ingest as it is for a `.txt`. The JSON lines "
        "reader's seconds are CPU time on top of counting: with both cores counting, they add about half "
        f"themselves to the wall. CPU s: the probe's CPU time over the same span (every thread of it); bound s: "
        f"the one `.txt` ingest's wall plus that CPU time shared by the {CORES} usable core(s), the least the "
        "shape can take when counting keeps every core busy and the rest of its ingest costs what the `.txt`'s "
        "does; × one `.txt`: that bound over the one `.txt`'s wall.", "",
        md_table(["shape", "limit", "s", "CPU s", "MB/s", "÷ stage s", "÷ ingest s", "bound s", "× one `.txt`",
                  "held MB", "+ one `.txt` peak"], lrows), "",
        "### Do the inventories agree?", "",
        "Each ingest's chunk tables of the first repetition, summed piece by piece (the distinct pieces and "
        f"their counts), compared with the `{reference(shapes, results)}` shape's. " + verdict(shapes, results, agree)
        + " The `.txt` shapes are shown apart: their documents are other ones (cut at blank lines), so their "
        "inventory need not agree (with the default pattern, whose pieces never cross such a cut, it does).", "",
        md_table(["shape", "distinct pieces", "pieces", f"same as {reference(shapes, results)}"], agreed), "",
    ]
    return "\n".join(lines)


def write_block(out: Path, block: str) -> None:
    """``block`` in place of the ``## shapes`` part of ``out`` (appended if it has none)."""
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    rest, _ = bench_report.split_part(old, HEADING)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text((rest.rstrip("\n") + "\n\n" if rest.strip() else "") + block, encoding="utf-8")
    log(f"wrote the {HEADING} part of {out}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="run.py --section shapes", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=scale_corpus.DEFAULT_OUT,
                        help="folder of the .deb and the shapes (built when absent, in DATA/shapes or DATA/shapes-NMB)")
    parser.add_argument("--mb", type=float, default=0, help="only the first MB (10^6 bytes) of the text; 0: all")
    parser.add_argument("--reps", type=int, default=3, help="repetitions; medians are reported")
    parser.add_argument("--only", default="", help="comma-separated shapes to run (default: all)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "SCALE.md",
                        help="the report whose ## shapes part is written")
    parser.add_argument("--work", type=Path, default=None, help="bench folder (default: a temp folder, removed)")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.mb < 0:
        sys.exit("--reps takes 1 or more, --mb 0 or more")
    run = {"date": bench_report.now(), "commit": bench_report.commit(), "machine": bench_report.machine(),
           "load": bench_report.load_average(), "versions": bench_report.versions(),
           "command": " ".join(["benchmarks/run.py", "--section", "shapes", *argv])}
    log(f"shapes: building (or reusing) the text in every shape under {args.data}")
    root, facts = shapes_corpus.ensure(args.data, args.mb or None)
    work = args.work or Path(tempfile.mkdtemp(prefix="toktok-shapes-"))
    work.mkdir(parents=True, exist_ok=True)
    env = run_env(work / "numba-cache")
    shutil.rmtree(work / "numba-cache", ignore_errors=True)
    try:
        found = reader(work / "probe", env)
        log(f"any suffix read through include: {'yes' if found.suffixes else 'no, the folder is read as .txt copies'}"
            f"; documents: file {'accepted' if found.documents else 'not known'}")
        shapes = shapes_of(root, facts, found)
        if args.only:
            wanted = {"txt", *args.only.split(",")}  # the .txt is every ratio's base
            shapes = [s for s in shapes if s.name in wanted]
        log(f"warm-up: every shape of the first {TINY_BYTES / MB:.0f} MB once, empty numba cache (compiles)")
        tiny = work / "tiny-shapes"
        shapes_corpus.write_shapes(tiny_docs(root / shapes_corpus.SHAPE_FILES["parquet"]), tiny)
        for shape in shapes_of(tiny, {"files": 0}, found):
            if shape.name in {s.name for s in shapes}:
                measured, _ = ingest(shape, work / "warmup" / shape.name, TINY_BYTES, env)
                if measured.returncode:
                    log(f"  warm-up of {shape.name} failed (see {measured.log})")
        results = run_shapes(shapes, args.reps, facts["bytes"], work, env)
        block = bench_report.portable(report(args, facts, run, shapes, results, found, work), args)
        write_block(args.out, block)
        print(block)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
