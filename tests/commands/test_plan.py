"""``toktok plan -c CFG``: the effective configuration, the files per phase,
the sample share and the expected peak memory, before any work starts.

The corpora are written here (plain, jsonl and gzip files of real English
text), and every figure the plan prints is computed again independently:
sizes with ``os.stat``, text bytes by decompressing, the share as
``capacity / total`` from docs/training.md (``working_set_mb`` MiB of text), and the
share ingest really uses from the manifest a real ``toktok ingest`` writes.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import english_text, manifest, toktok, work_of, write_config
from toktoktok.sampling import TEXT_PER_BUDGET_BYTE

MIB = 1 << 20
TEXT = TEXT_PER_BUDGET_BYTE  # the documented rule: bytes of text kept per byte of budget


def every_path(root: Path) -> set[str]:
    """Every file and folder under root (what 'wrote nothing' compares)."""
    return {str(p) for p in root.rglob("*")}


def plan_json(config: Path) -> dict:
    r = toktok("plan", "-c", config, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def big_text(size: int, seed: int) -> str:
    """About ``size`` bytes of English documents (paragraphs), different per seed."""
    base = english_text(60_000, offset=seed * 7_000)
    paragraphs = [p for p in base.split("\n\n") if p.strip()]
    out, n = [], 0
    i = 0
    while n < size:
        p = f"{i}. {paragraphs[i % len(paragraphs)]}"
        out.append(p)
        n += len(p.encode("utf-8")) + 2
        i += 1
    return "\n\n".join(out) + "\n"


@pytest.fixture
def small(tmp_path):
    """One phase of three small files: .txt, .jsonl and .txt.gz (a folder), plus a single file."""
    data = tmp_path / "data"
    (data / "dir").mkdir(parents=True)
    (data / "dir" / "a.txt").write_text(english_text(20_000), encoding="utf-8")
    rows = [{"text": p} for p in english_text(8_000, offset=30_000).split("\n\n") if p.strip()]
    (data / "dir" / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    gz_text = english_text(12_000, offset=50_000).encode("utf-8")
    (data / "dir" / "c.txt.gz").write_bytes(gzip.compress(gz_text, mtime=0))
    (data / "single.txt").write_text(english_text(5_000, offset=70_000), encoding="utf-8")
    phases = [{"name": "Small", "merges": 10, "sources": [{"path": str(data / "dir")}]},
              {"name": "Single", "merges": 5, "sources": [{"file": str(data / "single.txt")}]}]
    config = write_config(tmp_path / "cfg", phases, working_set_mb=64, threads=1)
    return {"config": config, "data": data, "gz_text_bytes": len(gz_text), "root": tmp_path}


@pytest.fixture
def sampled(tmp_path):
    """About 3 MB of text in three .txt files and a 1 MB budget: the phase is sampled."""
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        (data / f"part-{i}.txt").write_text(big_text(1_000_000, i), encoding="utf-8")
    phases = [{"name": "Big", "merges": 20, "sources": [{"path": str(data)}]}]
    config = write_config(tmp_path / "cfg", phases, working_set_mb=1, threads=1, heldout_share=0.01)
    return {"config": config, "data": data, "root": tmp_path}


def test_plan_lists_each_file_with_its_size_and_text(small):
    plan = plan_json(small["config"])
    first, second = plan["phases"]
    folder = small["data"] / "dir"
    assert [f["path"] for f in first["files"]] == [str(folder / n) for n in ("a.txt", "b.jsonl", "c.txt.gz")]
    assert [f["format"] for f in first["files"]] == ["txt", "jsonl", "txt.gz"]
    for f in first["files"] + second["files"]:
        assert f["size_bytes"] == os.stat(f["path"]).st_size
    texts = [f["text_bytes"] for f in first["files"]]
    assert texts == [os.stat(folder / "a.txt").st_size, os.stat(folder / "b.jsonl").st_size,
                     small["gz_text_bytes"]]  # the gzip file's text is its decompressed length
    assert first["size_bytes"] == sum(os.stat(f["path"]).st_size for f in first["files"])
    assert first["text_bytes"] == sum(texts)
    assert [f["path"] for f in second["files"]] == [str(small["data"] / "single.txt")]
    assert (first["name"], first["slug"], first["merges"]) == ("Small", "01-small", 10)


def test_plan_not_sampled_when_the_budget_holds_the_text(small):
    plan = plan_json(small["config"])
    for phase in plan["phases"]:
        assert phase["sampled"] is False and phase["share"] == 1.0
        assert phase["capacity_bytes"] == int(64 * MIB * TEXT)
        assert phase["kept_text_bytes"] == phase["text_bytes"]
    r = toktok("plan", "-c", small["config"])
    assert r.code == 0, r.err
    assert r.out.count("sampled: no") == 2 and "sampled: yes" not in r.out
    assert f"capacity: {64 * TEXT:.1f} MiB of text (working_set_mb: 64)" in r.out
    for f in plan["phases"][0]["files"]:  # one table row per file: format, KiB on disk, KiB of text, documents, path
        row = next(line for line in r.out.splitlines() if line.endswith(f["path"]))
        size, text = os.stat(f["path"]).st_size, f["text_bytes"]
        rule = "blank-line" if f["format"].startswith("txt") else "file"  # each file's default rule
        assert row.split() == [f["format"], f"{size / 1024:.1f}", "KiB", f"{text / 1024:.1f}", "KiB", rule, f["path"]]


def test_plan_prints_the_effective_configuration_first(small):
    r = toktok("plan", "-c", small["config"])
    assert r.code == 0, r.err
    head, _, rest = r.out.partition("\nphase 1 of 2: Small (01-small), 10 merges\n")
    assert rest, r.out
    settings = yaml.safe_load(head)  # the first part is YAML
    assert settings["output"] == str(small["config"].parent / "out" / "tok.tiktoken")
    assert settings["work_dir"] == str(work_of(small["config"]))
    assert settings["threads"] == 1 and settings["working_set_mb"] == 64
    assert settings["heldout_share"] == 0.005 and settings["min_frequency"] == 2  # defaults filled in
    assert settings["pattern"] == "default" and settings["on_bad_file"] == "fail"
    assert settings["phases"][0]["sources"][0]["path"] == str(small["data"] / "dir")
    assert settings["phases"][1]["sources"][0]["file"] == str(small["data"] / "single.txt")
    assert rest.index("phase 2 of 2: Single") < rest.index("\nexpected peak memory: about")
    assert r.out.rstrip().splitlines()[-1].startswith("expected peak memory: about ")


def test_plan_share_is_capacity_over_the_text(sampled):
    files = sorted(sampled["data"].glob("*.txt"))
    total = sum(os.stat(f).st_size for f in files)
    assert total > 2.5 * MIB
    expected = int(MIB * TEXT) / total  # working_set_mb MiB x TEXT_PER_BUDGET_BYTE of text is kept, of `total`
    plan = plan_json(sampled["config"])
    (phase,) = plan["phases"]
    assert phase["sampled"] is True and phase["text_bytes"] == total
    assert phase["share"] == pytest.approx(expected, rel=1e-12)
    assert phase["kept_text_bytes"] == int(MIB * TEXT)
    assert plan["expected_peak_mb"] == phase["expected_peak_mb"] == pytest.approx(plan["fixed_overhead_mb"] + 1, abs=0.01)
    r = toktok("plan", "-c", sampled["config"])
    assert r.code == 0, r.err
    assert (f"sampled: yes, keeping {expected:.1%} of documents (about {TEXT * 1024:.1f} KiB of {total / MIB:.1f} MiB)"
            in r.out), r.out
    peak = plan["fixed_overhead_mb"] + 1
    assert (f"expected peak memory: about {peak} MiB (fixed overhead {plan['fixed_overhead_mb']} MiB + 1.0 MiB of work, "
            "at most working_set_mb = 1 MiB)") in r.out


def test_plan_share_is_the_share_ingest_keeps(sampled):
    share = plan_json(sampled["config"])["phases"][0]["share"]
    r = toktok("ingest", "-c", sampled["config"])
    assert r.code == 0, r.err
    recorded = manifest(work_of(sampled["config"]) / "ingest" / "01-big")
    assert recorded["sample"]["share"] == share < 1
    kept = recorded["counts"]["kept_bytes"]  # about the capacity, as sampling promises
    assert 0.8 * MIB * TEXT < kept < 1.2 * MIB * TEXT
    again = plan_json(sampled["config"])["phases"][0]  # sizes now come from the manifest: the same
    assert again["share"] == share


def test_plan_writes_nothing(small):
    before = every_path(small["root"])
    out = small["config"].parent / "out"
    for args in (("plan", "-c", small["config"]), ("plan", "-c", small["config"], "--json")):
        r = toktok(*args)
        assert r.code == 0, r.err
    assert not out.exists() and not work_of(small["config"]).exists()
    assert every_path(small["root"]) == before


def test_plan_bad_config_exits_2_naming_the_key(tmp_path):
    phases = [{"name": "A", "merges": "many", "sources": [{"path": str(tmp_path)}]}]
    r = toktok("plan", "-c", write_config(tmp_path / "bad", phases))
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("error: ") and "phases[0].merges" in r.err and "line" in r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_plan_missing_source_exits_2_like_run(tmp_path):
    missing = tmp_path / "nowhere"
    phases = [{"name": "A", "merges": 3, "sources": [{"path": str(missing)}]}]
    config = write_config(tmp_path / "cfg", phases)
    r = toktok("plan", "-c", config)
    assert r.code == 2, (r.out, r.err)
    assert "phases[0].sources[0].path" in r.err and str(missing) in r.err
    assert len(r.err.strip().splitlines()) == 1
    run = toktok("run", "-c", config)
    assert run.code == 2 and run.err == r.err  # the same check, the same message
    assert not (tmp_path / "cfg" / "out").exists()


# ---------------------------------------------------------------- the configuration, pasted back

INTERNAL = ("index", "slug", "gets_rest", "is_dir")  # the loaded config's own fields, never a config's keys


def pasted(config: Path, where: Path) -> Path:
    """The configuration block ``toktok plan`` prints (its first lines, to the first blank
    line), written as a config file in another folder, as a user pastes it."""
    r = toktok("plan", "-c", config)
    assert r.code == 0, r.err
    block = r.out.split("\n\n")[0]
    assert block.startswith("# effective configuration of ")
    where.mkdir(parents=True)
    (where / "pasted.yaml").write_text(block + "\n", encoding="utf-8")
    return where / "pasted.yaml"


def stage_keys(config: Path) -> dict:
    """Every setting that shapes a run and each stage's settings, as ``toktok run`` computes them."""
    from toktoktok.config import effective_settings, load_config
    from toktoktok_stages.workdir import Work
    from toktoktok_stages.workdir.keys import export_settings, ingest_settings, train_settings

    work, _ = Work(load_config(config)).check_ready()
    cfg, base = work.cfg, work.base_description()
    return {"settings": effective_settings(cfg), "threads": cfg.threads, "engine": cfg.engine, "ray": cfg.ray,
            "ingest": [ingest_settings(cfg, p) for p in cfg.phases],
            "train": [train_settings(cfg, p, base) for p in cfg.phases], "export": export_settings(cfg, base)}


def no_internal_keys(node) -> None:
    if isinstance(node, dict):
        assert not set(node) & set(INTERNAL), sorted(node)
        for value in node.values():
            no_internal_keys(value)
    elif isinstance(node, list):
        for value in node:
            no_internal_keys(value)


def test_the_demo_configuration_pasted_back_gives_the_same_run(tmp_path):
    from tests.helpers import ROOT

    (tmp_path / "configs").mkdir()
    config = tmp_path / "configs" / "demo.yaml"
    config.write_text((ROOT / "configs" / "demo.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    for kind in ("english", "code"):  # the demo's folders, a small file each
        (tmp_path / "data" / "demo" / kind).mkdir(parents=True)
        (tmp_path / "data" / "demo" / kind / "a.txt").write_text(english_text(3_000), encoding="utf-8")
    again = pasted(config, tmp_path / "elsewhere")
    no_internal_keys(yaml.safe_load(again.read_text(encoding="utf-8")))
    assert stage_keys(again) == stage_keys(config)


def test_a_multi_phase_configuration_with_every_kind_of_source_pasted_back(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.commands.test_encode import make_tokenizer

    data = tmp_path / "data"
    (data / "dir" / "skip").mkdir(parents=True)
    (data / "dir" / "a.txt").write_text(english_text(4_000), encoding="utf-8")
    (data / "dir" / "skip" / "b.txt").write_text(english_text(2_000), encoding="utf-8")
    (data / "rows.jsonl").write_text(json.dumps({"body": english_text(2_000)}) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"text": [english_text(2_000, offset=4_000)]}), data / "t.parquet")
    (data / "s.txt.gz").write_bytes(gzip.compress(english_text(3_000).encode(), mtime=0))
    base = make_tokenizer(tmp_path / "base")  # a warm start with special tokens of its own
    phases = [
        {"name": "Prose & more", "merges": 7, "sources": [
            {"path": str(data / "dir"), "include": ["**/*.txt"], "exclude": ["skip/*"], "documents": "line"},
            {"file": str(data / "t.parquet"), "weight": 2.5}]},
        {"name": "Rows", "merges": 3, "sources": [{"file": str(data / "rows.jsonl"), "text_column": "body"}]},
        {"name": "Rest", "sources": [{"file": str(data / "s.txt.gz"), "documents": {"split_on": "\n---\n"},
                                      "max_bytes": 1000}]},
    ]
    config = write_config(tmp_path / "cfg", phases, vocab_size=400, special_tokens=["<|im_start|>"],
                          warm_start={"file": str(base)}, pattern=r"\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+|\s+",
                          hf={"eos_token": "<|endoftext|>", "pad_token": None, "model_max_length": 2048},
                          pad_to_multiple_of=8, heldout_share=0.02, seed=11, on_bad_file="skip")
    again = pasted(config, tmp_path / "elsewhere")
    doc = yaml.safe_load(again.read_text(encoding="utf-8"))
    no_internal_keys(doc)
    assert "merges" not in doc["phases"][2], "the phase that gets the rest of vocab_size says so, as written"
    assert doc["phases"][0]["sources"][1]["file"] == str(data / "t.parquet")
    assert stage_keys(again) == stage_keys(config)
