#!/usr/bin/env python3
"""The scale benchmark's corpora: the Linux kernel's source from Debian's ``linux-source-6.1``, and prose.

    .venv/bin/python benchmarks/run.py --section corpus [--out /work/scale-data] [--package linux-source-6.1[=VERSION]]
        [--prose SHARED_CORPORA]

(the ``scale`` section builds them itself when they are absent).

Steps (all skipped when ``OUT/kernel/manifest.json`` exists; the download when the ``.deb`` does):

1. ``apt-get download PACKAGE`` into ``OUT/debs`` (run ``apt-get update``
   once before, as root);
2. stream the kernel's ``.tar.xz`` out of the ``.deb``
   (``dpkg-deb --fsys-tarfile | tar -xO | xz -dc``, nothing unpacked to
   disk) and keep every member whose name ends in one of ``SUFFIXES`` or is
   ``Kconfig`` or ``Makefile`` and that decodes as strict UTF-8 (and is not
   all white space);
3. put them in an order fixed by a hash of their path (``order_key``), so
   that a prefix is a sample of the whole tree: in the tarball's order the
   first 0.1 GB is ``Documentation/`` and ``arch/``, and the next 0.2 GB is
   mostly the register headers of one GPU driver, and a cost measured
   against size would mix size with the kind of text. Every 20th file in
   that order (the 20th, 40th, ...) goes to ``heldout.txt``, the
   others to ``train-full.txt``; prefixes of the training text, cut at a
   file's end, to ``train-0.1GB.txt`` and ``train-0.3GB.txt`` (the first
   files up to 10^8 and 3 × 10^8 bytes);
4. ``manifest.json``: the package and its version, file and byte counts.

One file, one document: toktoktok's ``.txt`` reader (``toktoktok/documents.py``)
starts a document after a blank line followed by a character that is not
white space. Each file is written with its leading and trailing white space
stripped and followed by ``"\\n\\n"``, so every file starts a document and no
document spans two files:

    >>> as_document("\\n  int x;\\n")
    'int x;\\n\\n'

A blank line *inside* a file followed by code also starts a document under
that rule, so the reader finds more documents than files (the manifest of a
run says how many); the bytes inside a file are left as they are, because
making a file one document would mean editing every such blank line and so
the text every trainer learns from.

The prose point (``ensure_prose``, skipped when the source is absent): the
English text of the shared corpora (``english.txt.zst`` and its held-out
split ``english.heldout.txt.zst``, in the folder ``<project root>/../shared/corpora``
unless told; documents separated by one blank line), decompressed with the
``zstandard`` package into ``OUT/prose/train.txt`` and ``OUT/prose/heldout.txt``
once, with a manifest of their bytes and documents (toktoktok's reader's
rule, ``DOC_BOUNDARY``). The manifest records the source files' sizes, so a
different source is decompressed again.

The outputs live outside the repository (``--out``, default
``/work/scale-data/kernel`` and ``/work/scale-data/prose``) and are never committed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import zstandard
from benchkit.corpus import DOC_BOUNDARY, SHARED_CORPORA

SUFFIXES = (
    ".c", ".h", ".S", ".rst", ".txt", ".py", ".sh", ".dts", ".dtsi",
    ".yaml", ".json", ".pl", ".rs", ".md",
)
NAMES = ("Kconfig", "Makefile")
HOLD_OUT_EVERY = 20
PREFIXES = {"0.1GB": 100_000_000, "0.3GB": 300_000_000}
DEFAULT_OUT = Path("/work/scale-data")
PROSE_NAME = "english"  # the shared corpora's prose: NAME.txt.zst and NAME.heldout.txt.zst


def wanted(name: str) -> bool:
    """Whether a tarball member's path is one of the corpus's kinds of file.

        >>> [wanted(n) for n in ("a/b.c", "a/Kconfig", "a/Kconfig.debug", "a/x.S", "a/x.s")]
        [True, True, False, True, False]
    """
    base = name.rsplit("/", 1)[-1]
    return base in NAMES or base.endswith(SUFFIXES)


def order_key(path: str) -> bytes:
    """The corpus's order of files: a hash of the path, the same on every machine.

        >>> order_key("./linux-source-6.1/kernel/fork.c").hex()[:8]
        '2e31ad87'
    """
    return hashlib.blake2b(path.encode("utf-8"), digest_size=8).digest()


def as_document(text: str) -> str:
    """A file's text as one document of the corpus (see the module's docstring)."""
    return text.strip() + "\n\n"


def document_of(raw: bytes, counts: dict[str, int]) -> bytes | None:
    """A file's bytes as a document of the corpus (``as_document``), or None when they are
    not UTF-8 or all white space (counted in ``counts["not_utf8"]`` or ``counts["blank"]``).

        >>> counts = {"not_utf8": 0, "blank": 0}
        >>> document_of(b" x\\n", counts), document_of(b"\\xff", counts), document_of(b"  ", counts), counts
        (b'x\\n\\n', None, None, {'not_utf8': 1, 'blank': 1})
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        counts["not_utf8"] += 1
        return None
    if not text.strip():
        counts["blank"] += 1
        return None
    return as_document(text).encode("utf-8")


def download(package: str, debs: Path) -> Path:
    """The ``.deb`` of ``package`` in ``debs``, fetched with ``apt-get download`` if absent."""
    name = package.split("=", 1)[0]
    found = sorted(debs.glob(f"{name}_*.deb"))
    if not found:
        debs.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["apt-get", "download", package], cwd=debs).returncode != 0:
            # a fresh machine's package lists may not know the package yet
            subprocess.run(["apt-get", "update"], check=False, stdout=subprocess.DEVNULL)
            subprocess.run(["apt-get", "download", package], cwd=debs, check=False)
        found = sorted(debs.glob(f"{name}_*.deb"))
    if not found:
        sys.exit(f"no {name}_*.deb in {debs} after apt-get download and apt-get update")
    return found[-1]


def deb_field(deb: Path, field: str) -> str:
    return subprocess.run(
        ["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True, check=True
    ).stdout.strip()


def kernel_files(deb: Path) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every wanted regular file of the kernel tarball inside ``deb``, in tar order."""
    cmd = (
        f"dpkg-deb --fsys-tarfile '{deb}' | tar -xO --wildcards './usr/src/linux-source-*.tar.xz'"
        " | xz -dc"
    )
    proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            if member.isfile() and wanted(member.name):
                fh = tar.extractfile(member)
                assert fh is not None
                yield member.name, fh.read()
    if proc.wait() != 0:
        sys.exit(f"extracting {deb} failed (exit {proc.returncode})")


def build(deb: Path, out: Path) -> dict:
    """Write the training text, its prefixes and the held-out text; return the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    counts = {"kept": 0, "not_utf8": 0, "blank": 0, "train_files": 0, "heldout_files": 0}
    sizes = {"full": 0, "heldout": 0}
    cuts: dict[str, dict[str, int]] = {}
    train = open(out / "train-full.txt.part", "wb")
    heldout = open(out / "heldout.txt.part", "wb")
    prefixes = {k: open(out / f"train-{k}.txt.part", "wb") for k in PREFIXES}
    files: list[tuple[bytes, bytes]] = []  # (order key, document): 1.3 GB held once
    for path, raw in kernel_files(deb):
        if (doc := document_of(raw, counts)) is not None:
            files.append((order_key(path), doc))
    files.sort(key=lambda kf: kf[0])
    for _, data in files:
        counts["kept"] += 1
        if counts["kept"] % HOLD_OUT_EVERY == 0:
            heldout.write(data)
            sizes["heldout"] += len(data)
            counts["heldout_files"] += 1
            continue
        train.write(data)
        counts["train_files"] += 1
        for key, limit in PREFIXES.items():
            if key in prefixes and sizes["full"] + len(data) > limit:
                prefixes.pop(key).close()
                cuts[key] = {"bytes": sizes["full"], "files": counts["train_files"] - 1}
            elif key in prefixes:
                prefixes[key].write(data)
        sizes["full"] += len(data)
    for key, fh in prefixes.items():  # a corpus smaller than a prefix: the prefix is all of it
        fh.close()
        cuts[key] = {"bytes": sizes["full"], "files": counts["train_files"]}
    train.close()
    heldout.close()
    for name in ["train-full.txt", "heldout.txt", *(f"train-{k}.txt" for k in PREFIXES)]:
        (out / f"{name}.part").rename(out / name)
    cuts["full"] = {"bytes": sizes["full"], "files": counts["train_files"]}
    return {
        "package": deb_field(deb, "Package"),
        "version": deb_field(deb, "Version"),
        "deb": deb.name,
        "suffixes": list(SUFFIXES),
        "names": list(NAMES),
        "order": "blake2b-64 of the tar member's path",
        "hold_out_every": HOLD_OUT_EVERY,
        "files": counts,
        "train": cuts,
        "heldout_bytes": sizes["heldout"],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def ensure(out: Path, package: str = "linux-source-6.1") -> dict:
    """The corpora under ``out/kernel`` (built if absent) and their manifest."""
    corpus = out / "kernel"
    manifest = corpus / "manifest.json"
    if manifest.exists():
        return json.loads(manifest.read_text())
    deb = download(package, out / "debs")
    facts = build(deb, corpus)
    manifest.write_text(json.dumps(facts, indent=2) + "\n")
    return facts


# --- prose: the shared corpora's English text ----------------------------------------


def count_documents(path: Path, block_chars: int = 1 << 22) -> int:
    """Documents of a UTF-8 ``.txt`` as toktoktok's reader finds them: text after each ``DOC_BOUNDARY``.

    Read in blocks; the text after the last boundary found waits for the next
    block (a boundary needs the character after it), so the count is that of
    the whole text at once.
    """
    count, buf = 0, ""
    with path.open(encoding="utf-8", errors="replace", newline="") as fh:
        while block := fh.read(block_chars):
            buf += block
            start = 0
            for m in DOC_BOUNDARY.finditer(buf):
                count, start = count + 1, m.end()
            buf = buf[start:]
    return count + bool(buf)


def readme_row(folder: Path, filename: str) -> str | None:
    """What the corpora's README says ``filename`` is: the second cell of its table row, if any.

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "README.md").write_text("| file | what |\\n| a.txt.zst | Manuals (GNU) | 1 MB |\\n")
        ...     readme_row(Path(tmp), "a.txt.zst")
        'Manuals (GNU)'
    """
    readme = folder / "README.md"
    if not readme.exists():
        return None
    for line in readme.read_text(encoding="utf-8", errors="replace").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] == filename:
            return cells[1]
    return None


def prose_sources(source: Path) -> dict[str, Path] | None:
    """The prose files in the shared corpora's folder ``source`` (training, held-out); None when absent."""
    found = {"train": source / f"{PROSE_NAME}.txt.zst", "heldout": source / f"{PROSE_NAME}.heldout.txt.zst"}
    return found if all(p.is_file() for p in found.values()) else None


def decompress(source: Path, target: Path) -> None:
    """``source`` (zstd) decompressed into ``target``, streamed, written whole or not at all."""
    part = target.with_name(target.name + ".part")
    with source.open("rb") as src, part.open("wb") as dst:
        zstandard.ZstdDecompressor().copy_stream(src, dst)
    part.rename(target)


def ensure_prose(source: Path, out: Path) -> dict | None:
    """The prose corpus under ``out/prose`` (decompressed from ``source`` if absent or from another
    source) and its manifest; None when ``source`` lacks the prose files."""
    found = prose_sources(source)
    if found is None:
        return None
    corpus = out / "prose"
    manifest = corpus / "manifest.json"
    origin = {k: {"path": str(p.resolve()), "bytes": p.stat().st_size} for k, p in found.items()}
    if manifest.exists():
        facts = json.loads(manifest.read_text())
        if facts.get("source") == origin:
            return facts
    corpus.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    facts = {"source": origin, "what": readme_row(source, found["train"].name)}
    for key, path in found.items():
        target = corpus / f"{key}.txt"
        decompress(path, target)
        facts[key] = {"bytes": target.stat().st_size, "documents": count_documents(target)}
    facts["seconds"] = round(time.perf_counter() - t0, 1)
    manifest.write_text(json.dumps(facts, indent=2) + "\n")
    return facts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="run.py --section corpus", description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the .deb and corpora")
    ap.add_argument("--package", default="linux-source-6.1", help="apt package[=version]")
    ap.add_argument("--prose", type=Path, default=SHARED_CORPORA,
                    help=f"folder of {PROSE_NAME}.txt.zst and {PROSE_NAME}.heldout.txt.zst (the shared corpora)")
    args = ap.parse_args(argv)
    print(json.dumps({"kernel": ensure(args.out, args.package), "prose": ensure_prose(args.prose, args.out)},
                     indent=2))


if __name__ == "__main__":
    main()
