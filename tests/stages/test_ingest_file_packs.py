"""A folder of small files read in packs counts what it counts one file at a time.

``WholeFiles.send_pack`` sends runs of files read by ``read_pack`` as
segments of one buffer, and the tally's counts summed; the files a pack
leaves to Python (not UTF-8, a NUL byte, a wide byte order mark, too large,
unreadable) go the way of any file, in their place. With packs turned off
(``packs_possible`` giving None) every file goes that way: the chunk
files' pieces, the manifest's counts, its bad files and each input's text
bytes must be the same both ways, with one counting thread and with two.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import chunk_counts, ingest_here, read_arrow
from tests.helpers import stdlib_sources
from toktoktok_stages.ingest import local

COUNTS = ("files", "documents", "bytes_read", "replaced_chars", "units", "kept_documents", "kept_bytes",
          "recoded_files", "bad_files", "heldout_documents", "heldout_bytes", "heldout_truncated")


def _write_folder(root: Path) -> None:
    rng = random.Random(7)
    docs = [d for d in stdlib_sources(1_100_000).split("\n\n\n") if d]
    for i, doc in enumerate(docs[:400]):
        data = doc.encode("utf-8")
        odd = i % 37
        if odd == 1:
            data = b"\xef\xbb\xbf" + data  # a UTF-8 byte order mark: dropped
        elif odd == 2:
            data = b""
        elif odd == 3:
            data = b"\xef\xbb\xbf"  # the mark alone
        elif odd == 4:
            data = data[:50] + b"\xc3(" + data[50:]  # invalid UTF-8: replaced, read by Python
        elif odd == 5:
            data = "\ufeff".encode("utf-16") + doc.encode("utf-16-le")  # UTF-16 by its mark: decoded
        elif odd == 6:
            data = (data + b"\n\n") * (1 + (1 << 20) // max(len(data), 1))  # over a whole file's size: read as it goes
        elif odd == 7:
            data = b"\x00\x01\x02\xff" * 100  # not text: a bad file, skipped
        suffix = rng.choice([".c", ".py", ".txt", ".md"])
        path = root / f"d{i % 5}" / f"f{i:04d}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("packs") / "files"
    _write_folder(root)
    return root


def _ingest(work: Path, folder: Path, threads: int, heldout: float) -> tuple[dict, Counter[bytes], list[str]]:
    sources = [{"path": str(folder / "d0"), "include": ["**/*"], "weight": 2},
               {"path": str(folder), "include": ["**/*"], "exclude": ["d0/**"], "documents": "blank-line"},
               {"path": str(folder / "d0"), "include": ["**/*.txt"]},
               {"path": str(folder / "d3"), "include": ["**/*"], "documents": "file"}]
    manifest, phase = ingest_here(work, sources, threads=threads, on_bad_file="skip", heldout_share=heldout)
    return manifest, chunk_counts(phase), read_arrow(phase / "heldout.arrow")["text"].to_pylist()


@pytest.mark.parametrize(("threads", "heldout"), [(1, 0.0), (2, 0.0), (2, 0.2)])
def test_packs_count_what_single_files_count(tmp_path: Path, folder: Path, threads: int, heldout: float,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With a held-out share, the draw for a pack's files of one document each is made
    at once, and a file it picks goes the way of any file, in its place."""
    monkeypatch.setattr(local, "PACK_FILES", 9)  # many packs, and runs cut by their ends
    sent: list[int] = []
    send_pack = local.WholeFiles.send_pack
    monkeypatch.setattr(local.WholeFiles, "send_pack", lambda self, item, *a: (sent.append(item.count),
                                                                              send_pack(self, item, *a)))
    packed, packed_counts, packed_held = _ingest(tmp_path / "packed", folder, threads, heldout)
    assert len(sent) > 20 and sum(sent) > (250 if not heldout else 80)  # the packs did the reading
    monkeypatch.setattr(local.WholeFiles, "packs_possible", lambda self, files: None)
    single, single_counts, single_held = _ingest(tmp_path / "single", folder, threads, heldout)
    assert packed_counts == single_counts
    assert packed_held == single_held and (len(packed_held) > 10) == (heldout > 0)
    assert {k: packed["counts"][k] for k in COUNTS} == {k: single["counts"][k] for k in COUNTS}
    assert packed["inputs"]["text_bytes"] == single["inputs"]["text_bytes"]
    assert packed["counts"]["recoded_files"] > 0 and packed["counts"]["replaced_chars"] > 0
    assert len(packed["counts"]["bad_files"]) > 5


def test_no_packs_where_a_file_may_not_train_whole(tmp_path: Path, folder: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample, a special token, or a held-out share with documents cut at blank
    lines: each file is decided (or cut) alone."""
    sent: list[int] = []
    monkeypatch.setattr(local.WholeFiles, "send_pack", lambda self, item, *a: sent.append(item.count))
    source = {"path": str(folder / "d1"), "include": ["**/*"]}
    manifest, _ = ingest_here(tmp_path / "sampled", [source], working_set_mb=1, on_bad_file="skip")
    assert manifest["sample"]["share"] < 1
    ingest_here(tmp_path / "special", [source], special_tokens=["<|endoftext|>"], on_bad_file="skip")
    ingest_here(tmp_path / "held", [{**source, "documents": "blank-line"}], heldout_share=0.1, on_bad_file="skip")
    assert sent == []
