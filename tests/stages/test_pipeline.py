"""End to end: `toktok run` on small real corpora, checked against the docs.

Each test reads only what the pipeline wrote (the .tiktoken file, its
companion, the work directory's Arrow files and manifests) and compares it
with what the docs says it must be, computed here independently: the piece
counts with ``regex.findall`` over each document, the merges with
``toktoktok.merge.train_reference`` (the plain-Python rule), the final
segmentation by replaying the merges, the encodings with tiktoken itself.
"""

from __future__ import annotations

import functools
import json
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pyarrow as pa
import pytest
import tiktoken
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toktoktok
from tests.conftest import (
    SPEC_PATTERN,
    SPECIALS,
    chunk_counts,
    config_doc,
    english_text,
    folder_documents,
    manifest,
    merges_rows,
    parse_tiktoken,
    piece_counts,
    read_arrow,
    replay,
    snapshot,
    source_files,
    spec_base_ranks,
    spec_base_tokens,
    toktok,
    work_of,
    write_config,
    write_corpus,
)
from toktoktok.merge import train_reference
from toktoktok.segment import segment_reference

MERGES = (120, 80)  # English Prose, Mixed

# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    dirs = write_corpus(root)
    docs = {name: folder_documents(folder) for name, folder in dirs.items()}
    counts = {name: piece_counts(d, SPECIALS) for name, d in docs.items()}
    return SimpleNamespace(root=root, dirs=dirs, docs=docs, counts=counts)


def two_phases(corpus, merges=MERGES) -> list[dict]:
    return [
        {"name": "English Prose", "merges": merges[0], "sources": [{"path": str(corpus.dirs["english"])}]},
        {"name": "Mixed", "merges": merges[1], "sources": [{"path": str(corpus.dirs["mixed"])}]},
    ]


VARIANTS = {
    # the main run: hardcoded merges on, special tokens, the real entry point
    "hardcoded": {"settings": {}, "merges": MERGES, "real": True},
    "bytes-only": {"settings": {"hardcoded_merges": False}, "merges": MERGES, "real": False},
    # min_frequency stops the second phase early; max_token_bytes bans long tokens
    "limits": {"settings": {"min_frequency": 20, "max_token_bytes": 5}, "merges": (120, 250), "real": False},
}


_TRAINED: dict[tuple[str, Path], SimpleNamespace] = {}


def _train(name: str, root: Path, corpus) -> SimpleNamespace:
    """Run one variant once per module (the tests only read what it wrote)."""
    if (name, root) not in _TRAINED:
        _TRAINED[name, root] = _run_variant(name, root, corpus)
    return _TRAINED[name, root]


def _run_variant(name: str, root: Path, corpus) -> SimpleNamespace:
    variant = VARIANTS[name]
    folder = root / name
    settings_ = {"special_tokens": SPECIALS, "heldout_share": 0, "threads": 1, **variant["settings"]}
    config = write_config(folder, two_phases(corpus, variant["merges"]), **settings_)
    run = toktok("run", "-c", config, real=variant["real"])
    assert run.code == 0, run.err
    work = work_of(config)
    out = folder / "out" / "tok.tiktoken"
    return SimpleNamespace(
        name=name,
        config=config,
        run=run,
        work=work,
        output=out,
        meta=out.with_name("tok.meta.json"),
        hardcoded=settings_.get("hardcoded_merges", True),
        min_frequency=settings_.get("min_frequency", 2),
        max_token_bytes=settings_.get("max_token_bytes"),
        merges=variant["merges"],
        phases=[("01-english-prose", "english"), ("02-mixed", "mixed")],
    )


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module", params=list(VARIANTS))
def trained(request, runs_root, corpus):
    return _train(request.param, runs_root, corpus)


@pytest.fixture(scope="module")
def main(runs_root, corpus):
    return _train("hardcoded", runs_root, corpus)


@pytest.fixture(scope="module")
def main_enc(main) -> tiktoken.Encoding:
    return toktoktok.load(main.output)


def ranks_by_phase(t) -> list[dict[bytes, int]]:
    """The vocabulary before phase 1, after phase 1, after phase 2 (from merges.arrow)."""
    ranks = spec_base_ranks(t.hardcoded)
    out = [dict(ranks)]
    for slug, _ in t.phases:
        for rank, _, _, token, _ in merges_rows(t.work / "train" / slug / "merges.arrow"):
            if token not in ranks:
                assert rank == len(ranks), f"{slug}: new token {token!r} got rank {rank}, not the next one"
                ranks[token] = rank
            else:
                assert ranks[token] == rank, f"{slug}: {token!r} repeats with another rank"
        out.append(dict(ranks))
    return out


# ---------------------------------------------------------------- the main run


def test_run_vocab_size_and_special_ids(main, main_enc):
    made = []
    for slug, _ in main.phases:
        counts = manifest(main.work / "train" / slug)["counts"]
        made.append(counts["merges_made"])
        assert counts["merges_requested"] == dict(zip([s for s, _ in main.phases], MERGES))[slug]
    assert made == list(MERGES), "the data suffices: every requested merge must be made"
    n_ranks = 256 + 1161 + sum(made)
    assert len(parse_tiktoken(main.output)) == n_ranks
    assert main_enc.n_vocab == n_ranks + len(SPECIALS)
    assert manifest(main.work / "export")["counts"]["vocab_size"] == n_ranks + len(SPECIALS)

    meta = json.loads(main.meta.read_text())
    expected_ids = {tok: n_ranks + i for i, tok in enumerate(SPECIALS)}
    assert meta["special_tokens"] == expected_ids
    assert list(meta["special_tokens"]) == SPECIALS, "config order"
    assert main_enc._special_tokens == expected_ids
    for tok, tid in expected_ids.items():
        assert main_enc.encode(tok, allowed_special="all") == [tid]
        assert main_enc.decode([tid]) == tok
        around = main_enc.encode(f"Hello{tok}world", allowed_special="all")
        assert around == main_enc.encode_ordinary("Hello") + [tid] + main_enc.encode_ordinary("world")
        assert tid not in main_enc.encode_ordinary(tok), "without allowed_special it is ordinary text"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text())
def test_round_trip_ordinary_text(main_enc, text):
    assert main_enc.decode(main_enc.encode_ordinary(text)) == text
    assert main_enc.decode(main_enc.encode(text, allowed_special=set(), disallowed_special=())) == text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.tuples(st.text(max_size=30), st.sampled_from(SPECIALS)), max_size=6), tail=st.text())
def test_round_trip_with_special_tokens(main_enc, parts, tail):
    text = "".join(t + s for t, s in parts) + tail
    ids = main_enc.encode(text, allowed_special="all")
    assert main_enc.decode(ids) == text
    special_ids = set(main_enc._special_tokens.values())
    assert sum(i in special_ids for i in ids) >= len(parts), "every inserted special token is one id"


# ---------------------------------------------------------------- exactness against the reference


def test_chunk_counts_equal_findall(trained, corpus):
    """Ingest's pieces are regex.findall over each document, special tokens cut out."""
    for slug, source in trained.phases:
        folder = trained.work / "ingest" / slug
        expected = corpus.counts[source]
        got = chunk_counts(folder)
        assert got == expected, _counter_diff(got, expected)
        counts = manifest(folder)["counts"]
        assert counts["documents"] == len(corpus.docs[source])
        assert counts["pieces"] == sum(expected.values())
        assert counts["files"] == len(source_files(corpus.dirs[source]))
    # special tokens are never counted: no piece holds one
    every = chunk_counts(trained.work / "ingest" / trained.phases[0][0])
    assert not [p for p in every if any(s.encode() in p for s in SPECIALS)]
    assert every[b"user"] >= 1 and every[b"assistant"] >= 1, "the text between special tokens is counted"


def _counter_diff(got: Counter, expected: Counter) -> str:
    extra = Counter(got)
    extra.subtract(expected)
    wrong = {k: v for k, v in extra.items() if v}
    return f"{len(wrong)} pieces differ, e.g. {list(wrong.items())[:8]}"


def test_merges_equal_reference(trained, corpus):
    """merges.arrow of every phase = train_reference run phase after phase on the exact counts."""
    ranks = spec_base_ranks(trained.hardcoded)
    for (slug, source), requested in zip(trained.phases, trained.merges):
        expected = train_reference(corpus.counts[source], ranks, merges=requested,
                                   min_frequency=trained.min_frequency, max_token_bytes=trained.max_token_bytes)
        got = merges_rows(trained.work / "train" / slug / "merges.arrow")
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g == tuple(e), f"{slug}: merge {i} is {g}, the reference learned {tuple(e)}"
        new = [(r, tok) for r, _, _, tok, _ in expected if tok not in ranks]
        m = manifest(trained.work / "train" / slug)
        assert m["counts"]["merges_made"] == len(new)
        assert m["inputs"]["vocab_size_before"] == len(ranks)
        for r, tok in new:
            ranks[tok] = r
        assert m["counts"]["vocab_size_after"] == len(ranks)
        if trained.max_token_bytes is not None:
            assert max(len(tok) for tok, r in ranks.items() if r >= 1417) <= trained.max_token_bytes
    if trained.name == "limits":
        made = manifest(trained.work / "train" / "02-mixed")["counts"]["merges_made"]
        assert made < trained.merges[1], "this case must show min_frequency stopping a phase"
    # the exported file holds exactly these ranks
    assert dict(parse_tiktoken(trained.output)) == ranks


def test_tiktoken_encodes_like_training(trained, corpus):
    """tiktoken, with the ranks after phase k, encodes every training piece of phase k
    exactly as the trainer left it (docs/training.md)."""
    stages = ranks_by_phase(trained)
    for k, (slug, source) in enumerate(trained.phases):
        before, after = stages[k], stages[k + 1]
        merges = merges_rows(trained.work / "train" / slug / "merges.arrow")
        enc_before = tiktoken.Encoding(f"before-{k}", pat_str=SPEC_PATTERN, mergeable_ranks=before, special_tokens={})
        enc_after = tiktoken.Encoding(f"after-{k}", pat_str=SPEC_PATTERN, mergeable_ranks=after, special_tokens={})
        differing = []
        for piece in corpus.counts[source]:
            start = segment_reference(piece, before)
            assert enc_before._encode_single_piece(piece) == start, "the phase starts from tiktoken's segmentation"
            final = replay(piece, before, merges)
            if enc_after._encode_single_piece(piece) != final:
                differing.append((piece, final, enc_after._encode_single_piece(piece)))
        assert not differing, f"{slug}: {len(differing)} pieces, e.g. {differing[:3]}"
    assert manifest(trained.work / "export")["counts"]["pieces_differing_from_tiktoken"] == 0
    assert manifest(trained.work / "export")["counts"]["pieces_checked_with_tiktoken"] == sum(
        len(corpus.counts[s]) for _, s in trained.phases)
    for slug, _ in trained.phases:
        assert manifest(trained.work / "train" / slug)["counts"]["differing_pieces"] == 0


# ---------------------------------------------------------------- artifacts and formats

CHUNK_COLUMNS = {"piece": pa.binary(), "count": pa.uint64()}
HELDOUT_COLUMNS = {"text": pa.large_string()}
MERGES_COLUMNS = {"rank": pa.uint32(), "left": pa.uint32(), "right": pa.uint32(), "bytes": pa.binary(),
                  "count": pa.uint64()}
USAGE_COLUMNS = {"id": pa.uint32(), "count": pa.uint64()}
POLARS = {pa.binary(): pl.Binary, pa.uint64(): pl.UInt64, pa.uint32(): pl.UInt32, pa.large_string(): pl.String}


def test_artifacts_columns_and_manifests(main):
    arrows = sorted(main.work.rglob("*.arrow"))
    names = {p.relative_to(main.work).as_posix() for p in arrows}
    for slug, _ in main.phases:
        assert f"ingest/{slug}/chunk-00000.arrow" in names
        assert f"ingest/{slug}/heldout.arrow" in names
        assert f"train/{slug}/merges.arrow" in names
    for path in arrows:
        if path.name.startswith("chunk-"):
            columns = CHUNK_COLUMNS
        elif path.name == "heldout.arrow":
            columns = HELDOUT_COLUMNS
        elif path.name == "merges.arrow":
            columns = MERGES_COLUMNS
        elif path.name == "usage.arrow":
            columns = USAGE_COLUMNS
        else:
            pytest.fail(f"unexpected artifact {path}")
        df = pl.read_ipc(path)
        assert df.columns == list(columns), path
        assert [df.schema[c] for c in columns] == [POLARS[t] for t in columns.values()], path
        table = read_arrow(path)
        assert table.schema.names == list(columns), path
        assert [f.type for f in table.schema] == list(columns.values()), path
        assert path.read_bytes()[:6] == b"ARROW1", "the IPC file format, not the stream format"
        if table.num_rows:
            assert b"\x28\xb5\x2f\xfd" in path.read_bytes(), f"{path} is not zstd-compressed"
        if path.name.startswith("chunk-"):
            pieces = table["piece"].to_pylist()
            assert len(set(pieces)) == len(pieces), "a chunk holds distinct pieces"
    stage_dirs = [main.work / "export"] + [main.work / s / slug for s in ("ingest", "train") for slug, _ in main.phases]
    for folder in stage_dirs:
        m = manifest(folder)
        assert m["outputs"], folder
        last = (folder / "manifest.json").stat().st_mtime_ns
        assert all(p.stat().st_mtime_ns <= last for p in folder.iterdir()), "the manifest is written last"
        for out in m["outputs"]:
            assert (folder / out["name"]).is_file() or Path(out.get("path", "")).is_file()


def test_usage_is_every_piece_segmented_by_tiktokens_rule_times_its_count(main):
    """usage.arrow against the plain-Python rule (``segment_reference``) with the
    vocabulary after each phase, over that phase's whole inventory."""
    by_phase = ranks_by_phase(main)
    for (slug, _), ranks in zip(main.phases, by_phase[1:]):
        want: dict[int, int] = {}
        for path in sorted((main.work / "ingest" / slug).glob("chunk-*.arrow")):
            table = read_arrow(path)
            for piece, count in zip(table["piece"].to_pylist(), table["count"].to_pylist()):
                for rank in segment_reference(piece, ranks):
                    want[rank] = want.get(rank, 0) + count
        usage = read_arrow(main.work / "train" / slug / "usage.arrow")
        assert dict(zip(usage["id"].to_pylist(), usage["count"].to_pylist())) == want, slug


def test_manifests_record_inputs_outputs_counts_rss_and_timings(main):
    for folder in [main.work / "export"] + [main.work / s / slug for s in ("ingest", "train") for slug, _ in main.phases]:
        m = manifest(folder)
        for key in ("inputs", "outputs", "counts", "seconds", "peak_rss_mb", "key"):
            assert key in m, f"{folder}/manifest.json lacks {key!r}"
        assert m["peak_rss_mb"] > 0
    for slug, _ in main.phases:
        inputs = manifest(main.work / "ingest" / slug)["inputs"]
        fields = ("path", "size", "mtime_ns", "text_column", "weight", "documents", "text_bytes")
        assert set(inputs) == set(fields) and inputs["path"], "files and fingerprints, a list a field"
        assert all(len(inputs[f]) == len(inputs["path"]) for f in fields)


def test_manifests_record_their_settings(main):
    ingest = json.dumps(manifest(main.work / "ingest" / main.phases[0][0]))
    for setting in ("pattern", "special_tokens", "seed", "heldout_share"):
        assert f'"{setting}"' in ingest, f"the ingest manifest does not record {setting}"
    train = json.dumps(manifest(main.work / "train" / main.phases[0][0]))
    for setting in ("min_frequency", "max_token_bytes"):
        assert f'"{setting}"' in train, f"the train manifest does not record {setting}"


def test_tiktoken_file_format(main):
    lines = parse_tiktoken(main.output)
    ranks = [r for _, r in lines]
    tokens = [t for t, _ in lines]
    assert ranks == list(range(len(lines))), "ranks dense from 0, in order"
    assert len(set(tokens)) == len(tokens), "bytes unique"
    assert tokens[:1417] == spec_base_tokens(True), "docs/vocabulary.md layout: bytes in cl100k order, hardcoded merges"
    assert tokens[0] == b"!"
    assert all(s.encode() not in tokens for s in SPECIALS), "special tokens are not in the .tiktoken"
    meta = json.loads(main.meta.read_text())
    assert meta["mergeable_ranks"] == len(lines)
    assert meta["pattern"]["tiktoken"] == SPEC_PATTERN
    assert toktoktok.load(main.output)._pat_str == SPEC_PATTERN
    assert [p["merges_made"] for p in meta["phases"]] == list(MERGES)


# ---------------------------------------------------------------- incrementality


def _small_project(tmp_path: Path, corpus, merges=(60, 40), output="out/tok.tiktoken", folder="p") -> Path:
    """A private copy of the sources (tests modify them) and a config."""
    src = tmp_path / "src"
    if not src.exists():
        for name, d in corpus.dirs.items():
            (src / name).mkdir(parents=True)
            for f in source_files(d):
                (src / name / f.name).write_bytes(f.read_bytes())
    phases = [
        {"name": "English Prose", "merges": merges[0], "sources": [{"path": str(src / "english")}]},
        {"name": "Mixed", "merges": merges[1], "sources": [{"path": str(src / "mixed")}]},
    ]
    return write_config(tmp_path / folder, phases, output=str(tmp_path / folder / output),
                        special_tokens=SPECIALS, heldout_share=0, threads=1)


def _split(snap: dict, work: Path, out: Path) -> dict[str, dict]:
    parts = {"ingest1": {}, "ingest2": {}, "train1": {}, "train2": {}, "export": {}}
    for path, value in snap.items():
        rel = Path(path).relative_to(work).as_posix() if Path(path).is_relative_to(work) else None
        key = ("export" if rel is None or rel.startswith("export/") else
               ("ingest" if rel.startswith("ingest/") else "train") + ("1" if "/01-" in rel else "2"))
        parts[key][path] = value
    return parts


def _changed(before: dict, after: dict) -> set[str]:
    """The stage groups (ingest1, train2, export, ...) with any file added, removed or rewritten."""
    return {k for k in before if before[k] != after[k]}


def test_incremental_reruns(tmp_path, corpus):
    config = _small_project(tmp_path, corpus)
    work, out = work_of(config), tmp_path / "p" / "out" / "tok.tiktoken"
    meta = out.with_name("tok.meta.json")

    def state():
        return _split(snapshot(work, out, meta), work, out)

    assert toktok("run", "-c", config).code == 0
    first = state()
    assert all(first.values())

    time.sleep(0.01)
    rerun = toktok("run", "-c", config)
    assert rerun.code == 0 and "up to date" in rerun.out
    assert state() == first, "a rerun with no change redoes nothing"

    # phase 2's source changes: its ingest and train, and the export, are redone
    with open(tmp_path / "src" / "mixed" / sorted(p.name for p in (tmp_path / "src" / "mixed").iterdir())[0],
              "a", encoding="utf-8") as f:
        f.write("\n\nzorblax quuxifier " * 400)
    assert toktok("run", "-c", config).code == 0
    second = state()
    assert _changed(first, second) == {"ingest2", "train2", "export"}

    # phase 1's source changes: phase 1 and phase 2's train (starting from it) are redone
    with open(tmp_path / "src" / "english" / "prose-0.txt", "a", encoding="utf-8") as f:
        f.write("\n\nflibbertigibbet wuthering " * 400)
    assert toktok("run", "-c", config).code == 0
    third = state()
    assert _changed(second, third) == {"ingest1", "train1", "train2", "export"}

    # a setting of phase 2's training only
    doc = config.read_text().replace("merges: 40", "merges: 45")
    config.write_text(doc)
    assert toktok("run", "-c", config).code == 0
    fourth = state()
    assert _changed(third, fourth) == {"train2", "export"}

    forced = toktok("run", "-c", config, "--force")
    assert forced.code == 0
    fifth = state()
    assert _changed(fourth, fifth) == {"ingest1", "ingest2", "train1", "train2", "export"}
    for name, files in fifth.items():
        for path, (mtime, _) in files.items():
            assert mtime != fourth[name].get(path, (None,))[0], f"--force must rewrite {path}"
    assert fifth["export"][str(out)][1] == fourth["export"][str(out)][1], "same inputs, same bytes"


def test_stage_by_stage_equals_run(tmp_path, corpus):
    whole = _small_project(tmp_path, corpus, folder="whole")
    staged = _small_project(tmp_path, corpus, folder="staged")
    assert toktok("run", "-c", whole).code == 0
    for stage in ("ingest", "train", "export"):
        r = toktok(stage, "-c", staged)
        assert r.code == 0, (stage, r.err)
        assert "up to date" not in r.out
    a = (tmp_path / "whole" / "out" / "tok.tiktoken").read_bytes()
    b = (tmp_path / "staged" / "out" / "tok.tiktoken").read_bytes()
    assert a == b
    assert toktok("run", "-c", staged).out.count("up to date") >= 2, "run after the stages redoes nothing"


def test_export_after_retraining_an_earlier_phase_alone(tmp_path, corpus):
    """Each stage can be rerun alone (docs/outputs.md): the result is then the same as a
    full run, or the stage says which command to run first."""
    staged = _small_project(tmp_path, corpus, folder="staged")
    fresh = _small_project(tmp_path, corpus, folder="fresh")
    assert toktok("run", "-c", staged).code == 0
    with open(tmp_path / "src" / "english" / "prose-0.txt", "a", encoding="utf-8") as f:
        f.write("\n\nflibbertigibbet wuthering " * 400)
    assert toktok("ingest", "-c", staged, "--phase", "English Prose").code == 0
    assert toktok("train", "-c", staged, "--phase", "English Prose").code == 0
    r = toktok("export", "-c", staged)
    assert toktok("run", "-c", fresh).code == 0
    if r.code == 0:
        got = (tmp_path / "staged" / "out" / "tok.tiktoken").read_bytes()
        assert got == (tmp_path / "fresh" / "out" / "tok.tiktoken").read_bytes(), "exported stale phase-2 merges"
        assert manifest(work_of(staged) / "export")["counts"]["pieces_differing_from_tiktoken"] == 0
    else:
        assert r.code == 1 and "toktok train" in r.err


# ---------------------------------------------------------------- determinism


def test_threads_and_entry_points_give_identical_files(tmp_path, corpus):
    outputs = []
    for folder, threads, legacy in (("t1", 1, False), ("t2", 2, False), ("legacy", 1, True), ("all", -1, False),
                                    ("again", 1, False)):
        config = _small_project(tmp_path, corpus, merges=MERGES, folder=folder)
        config.write_text(config.read_text().replace("threads: 1", f"threads: {threads}")
                          .replace("heldout_share: 0", "heldout_share: 0.05"))
        args = ("-c", config) if legacy else ("run", "-c", config)
        r = toktok(*args, real=True, legacy=legacy)
        assert r.code == 0, r.err
        outputs.append((tmp_path / folder / "out" / "tok.tiktoken").read_bytes())
    assert outputs[0] == outputs[1], "threads 1 and 2 differ"
    assert outputs[0] == outputs[2], "`toktoktok -c` differs from `toktok run -c`"
    assert outputs[0] == outputs[3], "threads 1 and -1 (all cores) differ"
    assert outputs[0] == outputs[4], "a repeated run differs"


def test_bounded_parts_many_chunks_and_workers(tmp_path, corpus, monkeypatch):
    """Tiny read blocks, parts, batches and chunks (as a large corpus would get):
    the counted pieces stay exactly regex.findall over whole documents, the
    chunk files are many, and threads 1 and 2 give the same chunk files (rows
    sorted by piece, cut at fixed places in the data) and .tiktoken."""
    from toktoktok.pretokenize import PartCutter
    from toktoktok.sources import row_batches
    from toktoktok_stages.ingest import batching, chunking, local, routing, table_rows

    for name in ("iter_row_batches", "iter_jsonl_batches"):
        monkeypatch.setattr(table_rows, name, functools.partial(getattr(row_batches, name), batch_bytes=97))
    monkeypatch.setattr(local, "WHOLE_FILE_BYTES", -1)  # small files read as they go, in tiny reads
    monkeypatch.setattr(routing, "TXT_READ_BYTES", 97)
    monkeypatch.setattr(routing, "PartCutter", functools.partial(PartCutter, part_chars=64))
    monkeypatch.setattr(batching, "BATCH_TEXT_CHARS", 3_000)
    monkeypatch.setattr(chunking, "CHUNK_BYTES", 10_000)
    outputs, chunks = [], []
    for threads in (1, 2):
        config = _small_project(tmp_path, corpus, folder=f"t{threads}")
        config.write_text(config.read_text().replace("threads: 1", f"threads: {threads}"))
        r = toktok("run", "-c", config)
        assert r.code == 0, r.err
        work = work_of(config)
        for slug, source in (("01-english-prose", "english"), ("02-mixed", "mixed")):
            folder = work / "ingest" / slug
            assert len(list(folder.glob("chunk-*.arrow"))) > 1
            assert chunk_counts(folder) == corpus.counts[source]
            assert manifest(folder)["counts"]["documents"] == len(corpus.docs[source])
            chunks.append([pa.ipc.open_file(p).read_all() for p in sorted(folder.glob("chunk-*.arrow"))])
        outputs.append((tmp_path / f"t{threads}" / "out" / "tok.tiktoken").read_bytes())
    half = len(chunks) // 2
    assert all(len(a) == len(b) and all(x.equals(y) for x, y in zip(a, b))
               for a, b in zip(chunks[:half], chunks[half:])), "threads 1 and 2 wrote different chunk files"
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("limit", [1 << 30, 60_000, 6_000])
def test_chunker_writes_the_sum_sorted_by_piece(tmp_path, limit):
    """The chunker's files hold exactly a Counter over the batches, rows sorted by
    piece; with a small limit the file is also written in the middle, and how a
    step's counts are split among tables (as among worker threads) changes nothing."""
    import random

    from toktoktok import counts
    from toktoktok.summing import RunningSum
    from toktoktok_stages.ingest import chunking

    rng = random.Random(limit)
    words = [bytes(rng.choices(b"abcdefgh", k=rng.randint(1, 6))) for _ in range(400)]
    steps = [[Counter(rng.choices(words, k=60)) for _ in range(rng.randint(1, 3))] for _ in range(40)]
    written = []
    for split in (True, False):
        folder = tmp_path / ("split" if split else "whole")
        folder.mkdir()
        chunker = chunking.Chunker(folder, limit)
        for step in steps:
            if split:  # each part a running sum, as worker threads hand them over
                parts = []
                for batch in step:
                    part = RunningSum()
                    part.add(counts.from_lists(list(batch), list(batch.values())))
                    parts.append(part)
                chunker.add(*parts, file_index=0)
            else:
                whole = sum(step, Counter())
                chunker.add(counts.from_lists(list(whole), list(whole.values())), file_index=0)
        chunker.file_done()
        chunker.flush()
        written.append([pa.ipc.open_file(folder / o["name"]).read_all() for o in chunker.outputs])
    split, whole = written
    assert len(split) == len(whole) and all(a.equals(b) for a, b in zip(split, whole))
    total: Counter[bytes] = Counter()
    for table in split:
        pieces = table["piece"].to_pylist()
        assert pieces == sorted(pieces)
        for piece, count in zip(pieces, table["count"].to_pylist()):
            total[piece] += count
    assert total == sum((b for step in steps for b in step), Counter())
    assert (len(split) > 1) == (limit == 6_000)


@pytest.mark.parametrize("limit", [1 << 30, 6_000])
def test_chunker_without_separate_files_writes_the_same_sum(tmp_path, limit):
    """With ``on_bad_file: fail`` the chunker keeps one sum over every file (no file's
    counts are ever dropped): its files hold the same counts as with each file's
    sum kept apart, each file sorted and within the limit's steps; a drop is refused."""
    import random

    from toktoktok import counts
    from toktoktok_stages.ingest import chunking

    rng = random.Random(limit)
    words = [bytes(rng.choices(b"abcdefgh", k=rng.randint(1, 6))) for _ in range(400)]
    files = [[Counter(rng.choices(words, k=60)) for _ in range(rng.randint(1, 6))] for _ in range(12)]
    totals = []
    for separate in (True, False):
        folder = tmp_path / str(separate)
        folder.mkdir()
        chunker = chunking.Chunker(folder, limit, separate_files=separate)
        for index, steps in enumerate(files):
            for step in steps:
                chunker.add(counts.from_lists(list(step), list(step.values())), file_index=index)
            chunker.file_done()
        chunker.flush()
        total: Counter[bytes] = Counter()
        for output in chunker.outputs:
            table = pa.ipc.open_file(folder / output["name"]).read_all()
            assert table["piece"].to_pylist() == sorted(table["piece"].to_pylist())
            for piece, count in zip(table["piece"].to_pylist(), table["count"].to_pylist()):
                total[piece] += count
        assert chunker.pieces == sum(total.values())
        totals.append(total)
        if not separate:
            with pytest.raises(RuntimeError):
                chunker.drop(0)
    assert totals[0] == totals[1] == sum((c for steps in files for c in steps), Counter())


# ---------------------------------------------------------------- budgets larger than the data


def test_phase_running_out_of_pairs(tmp_path):
    data = tmp_path / "tiny"
    data.mkdir()
    (data / "a.txt").write_text("the cat sat on the mat. the cat sat on the hat.\n", encoding="utf-8")
    config = write_config(tmp_path / "p", [{"name": "Tiny", "merges": 5000, "sources": [{"path": str(data)}]}],
                          heldout_share=0, threads=1, special_tokens=["<|endoftext|>"])
    r = toktok("run", "-c", config, real=True)
    assert r.code == 0, r.err
    assert "warning" in r.err.lower() and "ran out of pairs" in r.err
    made = manifest(work_of(config) / "train" / "01-tiny")["counts"]["merges_made"]
    counts = piece_counts(["the cat sat on the mat. the cat sat on the hat.\n"], [])
    expected = train_reference(counts, spec_base_ranks(True), merges=5000)
    assert 0 < made == len(expected) < 5000
    enc = toktoktok.load(tmp_path / "p" / "out" / "tok.tiktoken")
    assert len(parse_tiktoken(tmp_path / "p" / "out" / "tok.tiktoken")) == 1417 + made
    assert enc.encode("<|endoftext|>", allowed_special="all") == [1417 + made]


def test_zero_merges(tmp_path):
    data = tmp_path / "tiny"
    data.mkdir()
    (data / "a.txt").write_text(english_text(2_000), encoding="utf-8")
    config = write_config(tmp_path / "p", [{"name": "None", "merges": 0, "sources": [{"path": str(data)}]}],
                          heldout_share=0, threads=1, special_tokens=["<|endoftext|>"])
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    assert "warning" in r.err and "merges: 0" in r.err
    lines = parse_tiktoken(tmp_path / "p" / "out" / "tok.tiktoken")
    assert [t for t, _ in lines] == spec_base_tokens(True)
    assert manifest(work_of(config) / "train" / "01-none")["counts"]["merges_made"] == 0
    enc = toktoktok.load(tmp_path / "p" / "out" / "tok.tiktoken")
    assert enc.n_vocab == 1418 and enc.encode("<|endoftext|>", allowed_special="all") == [1417]


def test_memory_does_not_grow_with_an_unreachable_budget(tmp_path):
    """docs/configuration.md: a budget larger than the data supports is valid; docs/performance.md#memory: peak memory
    stays within working_set_mb plus a fixed overhead."""
    data = tmp_path / "tiny"
    data.mkdir()
    (data / "a.txt").write_text("hello world hello world, the cat sat on the mat\n", encoding="utf-8")
    config = write_config(tmp_path / "p", [{"name": "Tiny", "merges": 50_000_000, "sources": [{"path": str(data)}]}],
                          heldout_share=0, threads=1, working_set_mb=64)
    r = toktok("run", "-c", config, real=True)
    assert r.code == 0, r.err
    ingest_rss = manifest(work_of(config) / "ingest" / "01-tiny")["peak_rss_mb"]
    train_rss = manifest(work_of(config) / "train" / "01-tiny")["peak_rss_mb"]
    assert train_rss - ingest_rss < 100, f"training 10 pieces raised the peak from {ingest_rss} to {train_rss} MB"


# ---------------------------------------------------------------- documents


DOCS = [
    "First document first paragraph\nIts second line\n\n",
    "Second document\n\n\n",
    "Third document indented lines continue it\n\n    like this one\n\n",
    "Fourth\r\n\r\n",
    "Fifth with trailing spaces   \n\n",
    "def sixth\n    return one\n\n\n\n",
    "Seventh <|endoftext|> with a special token\n\n",
    "Eighth with old Mac line ends\r\r",
    "Ninth with mixed ones\n\r\n",
    "Tenth and last no final newline",
]


@pytest.mark.parametrize("block_chars", [None, 1, 2, 5])
def test_txt_documents_and_newline_pieces(tmp_path, monkeypatch, block_chars):
    """Documents and newline pieces; also when the file is read a few characters at a
    time (a line break pair, a special token, a blank line split between reads)."""
    if block_chars:
        from toktoktok_stages.ingest import local, routing

        monkeypatch.setattr(local, "WHOLE_FILE_BYTES", -1)  # read as it goes, a few bytes at a time
        monkeypatch.setattr(routing, "TXT_READ_BYTES", block_chars)
    data = tmp_path / "docs"
    data.mkdir()
    text = "".join(DOCS)
    (data / "docs.txt").write_text(text, encoding="utf-8", newline="")
    config = write_config(tmp_path / "p", [{"name": "Docs", "merges": 3, "sources": [{"path": str(data)}]}],
                          heldout_share=0, threads=1, special_tokens=["<|endoftext|>"], min_frequency=1)
    r = toktok("ingest", "-c", config)
    assert r.code == 0, r.err
    folder = work_of(config) / "ingest" / "01-docs"
    assert manifest(folder)["counts"]["documents"] == len(DOCS)
    counts = chunk_counts(folder)
    assert counts == piece_counts(DOCS, ["<|endoftext|>"])
    # multi-newline pieces are single pieces: the text is not read line by line
    assert counts[b"\n\n"] == 4
    assert counts[b"\n\n\n"] == 1
    assert counts[b"\n\n\n\n"] == 1
    assert counts[b"\r\n\r\n"] == 1 and counts[b"\r\r"] == 1 and counts[b"\n\r\n"] == 1
    assert counts[b"   \n\n"] == 1
    assert counts[b"\n"] == 2
    assert counts[b"   "] == 2 and counts[b" like"] == 1  # an indented line continues its document
    assert not [p for p in counts if b"endoftext" in p]


def test_heldout_documents_are_whole_documents(tmp_path):
    data = tmp_path / "docs"
    data.mkdir()
    paragraphs = [p + "\n\n" for p in english_text(40_000).split("\n\n") if p.strip()]
    (data / "plays.txt").write_text("".join(paragraphs), encoding="utf-8")
    docs = folder_documents(data)
    config = write_config(tmp_path / "p", [{"name": "Plays", "merges": 10, "sources": [{"path": str(data)}]}],
                          heldout_share=0.2, threads=1)
    r = toktok("ingest", "-c", config)
    assert r.code == 0, r.err
    folder = work_of(config) / "ingest" / "01-plays"
    held = read_arrow(folder / "heldout.arrow")["text"].to_pylist()
    assert 0 < len(held) < len(docs)
    remaining = Counter(docs)
    for h in held:
        assert remaining[h] > 0, f"held-out text {h[:40]!r} is not a whole document"
        remaining[h] -= 1
    trained_docs = list(remaining.elements())
    assert chunk_counts(folder) == piece_counts(trained_docs, [])
    assert manifest(folder)["counts"]["heldout_documents"] == len(held)


def test_special_token_across_a_document_boundary_is_not_counted(tmp_path):
    """docs/pretokenization.md: special tokens are cut out of the raw text before the pattern runs and
    are never counted."""
    data = tmp_path / "docs"
    data.mkdir()
    text = "alpha beta\n\n<|sep|>gamma delta\n"
    (data / "a.txt").write_text(text, encoding="utf-8")
    config = write_config(tmp_path / "p", [{"name": "Sep", "merges": 1, "sources": [{"path": str(data)}]}],
                          heldout_share=0, threads=1, special_tokens=["\n\n<|sep|>"])
    r = toktok("ingest", "-c", config)
    assert r.code == 0, r.err
    counts = chunk_counts(work_of(config) / "ingest" / "01-sep")
    assert b"sep" not in counts and b"<|" not in counts
    assert counts == piece_counts([text], ["\n\n<|sep|>"])


@pytest.mark.parametrize("weight", [3, 0.35])
def test_weighted_counts_are_the_same_for_any_threads(tmp_path, corpus, monkeypatch, weight):
    """A source's weight with many small batches (so many groups of batches): the
    chunk files are the same at threads 1 and 2, an integer weight multiplies every
    count exactly, and a fractional one gives each piece about weight x its count
    (rounded per group of batches, at least 1: off by at most one per group)."""
    from toktoktok_stages.ingest import batching

    monkeypatch.setattr(batching, "BATCH_TEXT_CHARS", 2_000)
    raw = None
    chunks = []
    for threads, w in ((1, 1), (1, weight), (2, weight)):
        config = _small_project(tmp_path, corpus, folder=f"t{threads}-{w}")
        doc = config_doc(config)
        doc["threads"] = threads
        doc["phases"][0]["sources"][0]["weight"] = w
        config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        r = toktok("ingest", "-c", config, "--phase", "English Prose")
        assert r.code == 0, r.err
        folder = work_of(config) / "ingest" / "01-english-prose"
        if w == 1:
            raw = chunk_counts(folder)
            continue
        chunks.append([p.read_bytes() for p in sorted(folder.glob("chunk-*.arrow"))])
        got = chunk_counts(folder)
        assert set(got) == set(raw)
        counted = manifest(folder)["counts"]
        # a group ends at a file's end or after GROUP_BATCHES batches of at least 2,000 characters
        groups = counted["files"] + counted["kept_bytes"] // (2_000 * batching.GROUP_BATCHES) + 1
        for piece, n in raw.items():
            if float(weight).is_integer():
                assert got[piece] == n * weight
            else:
                assert got[piece] >= 1 and abs(got[piece] - n * weight) <= groups, (piece, n, got[piece])
    assert chunks[0] == chunks[1], "threads 1 and 2 wrote different chunk files"
