#!/usr/bin/env python3
"""The scale benchmark's next size: 5 GB and more of real text from several Debian packages.

    .venv/bin/python benchmarks/run.py --section big-corpus [--out /work/scale-data]

(the ``scale`` section builds it itself when its size ``5GB`` runs and it is absent).

One package's source tree stops near 1.4 GB of text, so this corpus takes
``PACKAGES``, distinct kinds of text each (C of two Linux releases, C++ and
Ada of two GCC releases, Java of OpenJDK, Rust, Go, and the HTML manuals of
LibreOffice's API, Python, Rust's library, libstdc++, Qt and VTK, the
kernel's documentation):

1. ``apt-get download`` of each into ``OUT/debs`` (as ``scale_corpus``);
2. each package's files streamed out of its ``.deb``
   (``dpkg-deb --fsys-tarfile``), nothing unpacked to disk: a plain member,
   a source tarball inside (``*.tar.xz``, ``*.tar.gz``, ``*.tar.bz2``, read
   member by member) or a ``.zip`` inside (OpenJDK's ``src.zip``), and a
   ``NAME.gz`` whose ``NAME`` is wanted; kept when its name ends in one of
   ``SUFFIXES`` or is one of ``scale_corpus.NAMES``, it decodes as strict UTF-8
   and is not all white space;
3. a file whose text was already taken (the same bytes in another release or
   package: the two Linux releases share most files) is dropped: the first
   one in package order stays;
4. the rest in an order fixed by a hash of package and path
   (``scale_corpus.order_key``), every 20th to ``heldout.txt``, the others to
   ``train.txt``: one file a document, as ``scale_corpus.as_document`` writes
   the kernel corpus (stripped, then a blank line);
5. ``manifest.json``: each package's version and counts, and the totals.

The outputs live outside the repository (``OUT/big``) and are never committed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

from sections import scale_corpus

PACKAGES = (
    "linux-source-6.1", "linux-source-6.12", "gcc-12-source", "gcc-11-source", "openjdk-17-source", "rust-src",
    "golang-1.19-src", "libreoffice-dev-doc", "python3.11-doc", "linux-doc-6.1", "rust-doc", "libstdc++-12-doc",
    "qtbase5-doc-html", "vtk9-doc",
)
SUFFIXES = (*scale_corpus.SUFFIXES, ".html", ".java", ".go", ".cc", ".cpp", ".hpp", ".hh", ".cxx", ".js",
            ".css", ".xml", ".texi", ".adb", ".ads", ".f90", ".d", ".m", ".toml", ".tex", ".java.in")
ARCHIVES = (".tar.xz", ".tar.gz", ".tar.bz2", ".tgz")
MIN_BYTES = 5_000_000_000  # the point's size: the build says so when the packages give less


def wanted(name: str) -> bool:
    """Whether a file's path names one of the corpus's kinds of text.

        >>> [wanted(n) for n in ("a/b.java", "a/Makefile", "a/x.png", "a/index.html")]
        [True, True, False, True]
    """
    base = name.rsplit("/", 1)[-1]
    return base in scale_corpus.NAMES or base.endswith(SUFFIXES)


def archive_files(name: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of the wanted files of a tarball or zip held in ``data``."""
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if not info.is_dir() and wanted(info.filename):
                    yield f"{name}/{info.filename}", zf.read(info)
        return
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        for member in tar:
            if member.isfile() and wanted(member.name):
                fh = tar.extractfile(member)
                if fh is not None:
                    yield f"{name}/{member.name}", fh.read()


def deb_files(deb: Path) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every wanted file of ``deb``: its own, and those of the archives it holds."""
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            if not member.isfile():
                continue
            name = member.name
            inner = name.endswith(ARCHIVES) or name.endswith("src.zip")
            zipped = name.endswith(".gz") and not name.endswith(ARCHIVES) and wanted(name[:-3])
            if not (inner or zipped or wanted(name)):
                continue
            fh = tar.extractfile(member)
            assert fh is not None
            data = fh.read()
            if inner:
                yield from archive_files(name, data)
            elif zipped:
                yield name[:-3], gzip.decompress(data)
            else:
                yield name, data
    if proc.wait() != 0:
        sys.exit(f"reading {deb} failed (exit {proc.returncode})")


def build(debs: dict[str, Path], out: Path) -> dict:
    """Write ``train.txt`` and ``heldout.txt`` of the packages' files; return the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    seen: set[bytes] = set()
    files: list[tuple[bytes, bytes]] = []  # (order key, document): the whole text held once
    per_package = {}
    for package, deb in debs.items():
        counts = {"kept": 0, "bytes": 0, "same_text_as_before": 0, "not_utf8": 0, "blank": 0}
        for path, raw in deb_files(deb):
            doc = scale_corpus.document_of(raw, counts)
            if doc is None:
                continue
            digest = hashlib.blake2b(doc, digest_size=16).digest()
            if digest in seen:
                counts["same_text_as_before"] += 1
                continue
            seen.add(digest)
            files.append((scale_corpus.order_key(f"{package}/{path}"), doc))
            counts["kept"] += 1
            counts["bytes"] += len(doc)
        per_package[package] = {"version": scale_corpus.deb_field(deb, "Version"), "deb": deb.name, **counts}
        print(f"big corpus: {package}: {counts['kept']:,} files, {counts['bytes'] / 1e9:.2f} GB", file=sys.stderr)
    files.sort(key=lambda kf: kf[0])
    sizes = {"train": 0, "heldout": 0}
    counts = {"train": 0, "heldout": 0}
    with open(out / "train.txt.part", "wb") as train, open(out / "heldout.txt.part", "wb") as heldout:
        for n, (_, doc) in enumerate(files, start=1):
            which = "heldout" if n % scale_corpus.HOLD_OUT_EVERY == 0 else "train"
            (heldout if which == "heldout" else train).write(doc)
            sizes[which] += len(doc)
            counts[which] += 1
    for name in ("train.txt", "heldout.txt"):
        (out / f"{name}.part").rename(out / name)
    return {
        "packages": per_package,
        "suffixes": list(SUFFIXES),
        "names": list(scale_corpus.NAMES),
        "order": "blake2b-64 of package/path",
        "hold_out_every": scale_corpus.HOLD_OUT_EVERY,
        "dedup": "blake2b-128 of the document's bytes; the first in package order kept",
        "train": {"bytes": sizes["train"], "files": counts["train"]},
        "heldout": {"bytes": sizes["heldout"], "files": counts["heldout"]},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def ensure(out: Path) -> dict:
    """The corpus under ``out/big`` (built if absent) and its manifest."""
    corpus = out / "big"
    manifest = corpus / "manifest.json"
    if manifest.exists():
        return json.loads(manifest.read_text())
    debs = {p: scale_corpus.download(p, out / "debs") for p in PACKAGES}
    facts = build(debs, corpus)
    if facts["train"]["bytes"] < MIN_BYTES:
        print(f"big corpus: {facts['train']['bytes'] / 1e9:.2f} GB of training text, under "
              f"{MIN_BYTES / 1e9:.0f} GB", file=sys.stderr)
    manifest.write_text(json.dumps(facts, indent=2) + "\n")
    return facts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="run.py --section big-corpus", description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=scale_corpus.DEFAULT_OUT, help="folder for the .debs and corpora")
    print(json.dumps(ensure(ap.parse_args(argv).out), indent=2))


if __name__ == "__main__":
    main()
