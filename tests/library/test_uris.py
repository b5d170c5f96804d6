"""Sources named by a pyarrow.fs URI (toktoktok/uris.py): read through pyarrow's
filesystem, listed, fingerprinted and trained on exactly as the same files by path.

pyarrow's ``LocalFileSystem`` (a ``RemotePath`` of a ``file://`` URI, which the
config itself turns into a plain path) runs every line of the remote code here;
``s3://`` is tested against a real S3-compatible server when
``TOKTOKTOK_TEST_S3`` names a writable prefix, e.g.
``s3://bucket/prefix?endpoint_override=http://127.0.0.1:9000&scheme=http``
(credentials from pyarrow's usual ``AWS_*`` variables), and skipped otherwise.
The Ray engine's reading of URIs is in tests/stages/test_ingest_ray.py.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from pyarrow import fs

from tests.helpers import stdlib_text
from tests.processes import phase, write_config
from toktoktok import uris
from toktoktok.config import ConfigError, Source, load_config
from toktoktok.sources import SourceError, iter_blocks, iter_txt_windows, list_source_files, text_bytes
from toktoktok.uris import RemotePath
from toktoktok_stages import pipeline, workdir
from toktoktok_stages.workdir.progress import Progress


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Every format, a hidden file, a sub-folder, a name to percent-encode."""
    data = tmp_path_factory.mktemp("uris") / "data"
    (data / "sub dir").mkdir(parents=True)
    text = stdlib_text(200_000)
    (data / "a.txt").write_bytes(b"\xef\xbb\xbf" + text[:80_000].encode() + b"\n\nbad \xff\n\nend")
    (data / "b.txt.gz").write_bytes(gzip.compress(text[80_000:120_000].encode()))
    (data / "sub dir" / "c é.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(
        "".join(json.dumps({"text": text[i: i + 1500]}) + "\n" for i in range(120_000, 160_000, 1500)).encode()))
    pq.write_table(pa.table({"text": [text[i: i + 900] for i in range(160_000, 200_000, 900)]}),
                   data / "sub dir" / "d.parquet")
    (data / ".hidden.txt").write_text("never read")
    (data / "notes.md").write_text("not a source")
    return data


def remote(path: Path) -> RemotePath:
    return RemotePath(path.as_uri())


def test_listing_and_fingerprints_are_the_paths(folder):
    for include in ((), ("**/*.parquet", "a.txt")):
        local = list_source_files(Source(folder, True, include=include))
        far = list_source_files(Source(remote(folder), True, include=include), strict=True)
        assert [str(f) for f in far] == [p.as_uri() for p in local] and len(local) == (4 if not include else 2)
    for path, uri in zip(local, far):
        st = os.stat(path)
        assert (uri.stat().st_size, uri.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        src = Source(folder, True)
        assert {**workdir.fingerprint(src, uri), "path": ""} == {**workdir.fingerprint(src, path), "path": ""}
    assert list_source_files(Source(remote(folder / "a.txt"), False)) == [remote(folder / "a.txt")]


def test_every_format_reads_as_by_path(folder):
    for path in list_source_files(Source(folder, True)):
        uri = remote(path)
        assert text_bytes(uri) == text_bytes(path), path
        assert list(iter_blocks(uri, block_chars=4096)) == list(iter_blocks(path, block_chars=4096)), path
    size = (folder / "a.txt").stat().st_size
    span = (30_000, size)  # a range read at its offset (the Ray engine's)
    far = [(bytes(w.data), w.ends.tolist()) for w in iter_txt_windows(remote(folder / "a.txt"), span=span)]
    near = [(bytes(w.data), w.ends.tolist()) for w in iter_txt_windows(folder / "a.txt", span=span)]
    assert far == near and far


def test_missing_files_and_folders_fail_like_paths(folder):
    with pytest.raises(SourceError, match="no such file"):
        list_source_files(Source(remote(folder / "none.txt"), False))
    with pytest.raises(SourceError, match="no such directory"):
        list_source_files(Source(remote(folder / "none"), True))
    with pytest.raises(FileNotFoundError):
        remote(folder / "none.txt").stat()
    with pytest.raises(SourceError, match="none.txt"):
        list(iter_blocks(remote(folder / "none.txt")))


def fake_s3(monkeypatch, root: Path) -> None:
    """``s3://bucket/...`` read from ``root`` by pyarrow's LocalFileSystem, in this process."""
    real = uris.filesystem
    monkeypatch.setattr(uris, "filesystem", lambda uri: (fs.LocalFileSystem(), str(root / "bucket"))
                        if uri.startswith("s3://bucket/") else real(uri))


def test_a_config_source_by_uri_is_checked_and_trained_on_as_by_path(tmp_path, folder, monkeypatch):
    """An ``s3://`` source in a config (its filesystem here pyarrow's local one):
    checked to exist like a path, never made relative to the config's folder, and
    the same tokenizer as the folder by path; a URI is not allowed for an output."""
    (tmp_path / "bucket").mkdir()
    (tmp_path / "bucket" / "corpus").symlink_to(folder)
    fake_s3(monkeypatch, tmp_path)
    by_path = write_config(tmp_path / "path", [phase("A", 200, {"path": str(folder)})], heldout_share=0.05)
    by_uri = write_config(tmp_path / "uri", [phase("A", 200, {"path": "s3://bucket/corpus/?region=xx"})],
                          heldout_share=0.05)
    cfg = load_config(by_uri)
    assert cfg.phases[0].sources[0].path == RemotePath("s3://bucket/corpus?region=xx")
    outputs = []
    for config in (by_path, by_uri):
        pipeline.run(load_config(config), progress=Progress())
        outputs.append((config.parent / "out" / "tok.tiktoken").read_bytes())
    assert outputs[0] == outputs[1]
    manifest = json.loads((by_uri.parent / "out" / "tok.work" / "ingest" / "01-a" / "manifest.json").read_text())
    assert manifest["inputs"]["path"][0] == "s3://bucket/corpus/a.txt"
    for bad, words in (({"path": "s3://bucket/nothing"}, "does not exist: s3://bucket/nothing"),
                       ({"file": "s3://bucket/corpus"}, "is a directory, not a file"),
                       ({"path": "s3://bucket/corpus/a.txt"}, "is a file, not a directory")):
        with pytest.raises(ConfigError, match=words):
            load_config(write_config(tmp_path / "bad", [phase("A", 10, bad)]))
    with pytest.raises(ConfigError, match="only sources are read through pyarrow.fs"):
        load_config(write_config(tmp_path / "bad", [phase("A", 10, {"path": str(folder)})],
                                 output="s3://bucket/tok.tiktoken"))


S3 = os.environ.get("TOKTOKTOK_TEST_S3")


@pytest.mark.skipif(not S3, reason="no S3-compatible server: set TOKTOKTOK_TEST_S3=s3://bucket/prefix"
                                   "?endpoint_override=host:port&scheme=http (and AWS_ACCESS_KEY_ID, "
                                   "AWS_SECRET_ACCESS_KEY) to run it")
def test_s3_source_same_as_by_path(tmp_path, folder):
    """The folder uploaded under a fresh prefix of ``TOKTOKTOK_TEST_S3``, trained on
    by its ``s3://`` URI: the same tokenizer as by path; the prefix removed after."""
    base, _, query = S3.partition("?")
    prefix = f"{base.rstrip('/')}/toktoktok-test-{uuid.uuid4().hex[:8]}"
    s3, inner = fs.FileSystem.from_uri(f"{prefix}?{query}" if query else prefix)
    try:
        for path in list_source_files(Source(folder, True)):
            rel = path.relative_to(folder).as_posix()
            with s3.open_output_stream(f"{inner}/{rel}", compression=None) as out:  # the bytes as they are
                out.write(path.read_bytes())
        uri = f"{prefix}/?{query}" if query else f"{prefix}/"
        outputs = []
        for where, source in (("path", str(folder)), ("s3", uri)):
            config = write_config(tmp_path / where, [phase("A", 200, {"path": source})], heldout_share=0.05)
            pipeline.run(load_config(config), progress=Progress())
            outputs.append((config.parent / "out" / "tok.tiktoken").read_bytes())
        assert outputs[0] == outputs[1]
    finally:
        s3.delete_dir_contents(inner, missing_dir_ok=True)


def test_a_remote_path_pickles_and_compares():
    import pickle

    p = RemotePath("s3://b/x/y.txt?endpoint_override=h:9000")
    assert pickle.loads(pickle.dumps(p)) == p and p != RemotePath("s3://b/x/y.txt")
    assert dataclasses.replace(Source(p, False)).path.query == "endpoint_override=h:9000"
    assert sorted([RemotePath("s3://b/b"), RemotePath("s3://b/a")])[0].name == "a"
