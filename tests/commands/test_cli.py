"""The command line (docs/cli.md): versions, help, exit codes, one-line errors,
stage order messages, --phase, and what a failed run leaves behind.

Cases where the process itself matters (exit status, stderr with no Python
traceback) run the installed entry points; the others use click's CliRunner.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import toktoktok
from tests.conftest import (
    SPECIALS,
    english_text,
    manifest,
    parse_tiktoken,
    toktok,
    work_of,
    write_config,
)
from toktoktok.tiktoken_file import write_tiktoken

STAGE_HELP = {
    # subcommand: words its help must hold (what it reads, what it writes)
    "run": ["Reads", "writes", "WORK/ingest", "WORK/train", ".tiktoken", ".meta.json"],
    "ingest": ["Reads", "sources", "writes", "chunk-", "heldout.arrow", "manifest.json"],
    "train": ["Reads", "chunk-", "writes", "merges.arrow", "manifest.json"],
    "export": ["Reads", "merges.arrow", "writes", ".tiktoken", ".meta.json", "manifest.json"],
}


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def project(tmp_path):
    """A small two-phase project: English prose (.txt), then a second phase."""
    english = tmp_path / "data" / "english"
    other = tmp_path / "data" / "other"
    english.mkdir(parents=True)
    other.mkdir(parents=True)
    (english / "prose.txt").write_text(english_text(6_000), encoding="utf-8")
    (other / "more.txt").write_text(english_text(4_000, offset=20_000), encoding="utf-8")
    phases = [
        {"name": "English", "merges": 40, "sources": [{"path": str(english)}]},
        {"name": "Other Text", "merges": 20, "sources": [{"path": str(other)}]},
    ]
    return write_config(tmp_path / "p", phases, heldout_share=0, threads=1, special_tokens=SPECIALS)


# ---------------------------------------------------------------- version and help


@pytest.mark.parametrize("legacy", [False, True])
def test_version(legacy):
    r = toktok("--version", real=True, legacy=legacy)
    assert r.code == 0, r.err
    assert toktoktok.__version__ in r.out
    assert "toktoktok" in r.out


def test_help_of_every_subcommand_says_what_it_reads_and_writes():
    from toktoktok_stages.cli.app import toktok as group

    top = toktok("--help")
    assert top.code == 0
    for name in STAGE_HELP:
        assert name in top.out
    for name in sorted(set(group.commands) | set(STAGE_HELP)):
        r = toktok(name, "--help")
        assert r.code == 0, (name, r.err)
        text = " ".join(r.out.split())
        assert "Reads" in text or "reads" in text.lower(), f"`toktok {name} --help` does not say what it reads"
        assert "writes" in text.lower() or "prints" in text.lower(), f"`toktok {name} --help` says nothing of its output"
        for word in STAGE_HELP.get(name, []):
            assert word in text, f"`toktok {name} --help` does not mention {word!r}"
        assert "-c, --config" in text or name == "compile"  # compile takes no config: it reads none


def test_help_of_the_real_entry_points():
    r = toktok("run", "--help", real=True)
    assert r.code == 0 and "WORK/train" in r.out
    legacy = toktok("--help", real=True, legacy=True)
    assert legacy.code == 0
    assert "toktok run" in legacy.out and "--config" in legacy.out


# ---------------------------------------------------------------- configuration errors: exit 2


def _bad_configs(tmp_path, project):
    good = project.read_text()
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(good.replace("threads: 1", "threads: 1\nmerge_count: 5"))
    missing = tmp_path / "missing.yaml"
    missing.write_text(good.replace(str(tmp_path / "data" / "other"), str(tmp_path / "data" / "nowhere")))
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("output: [unclosed\nphases:\n  - name: x\n")
    return [(unknown, "merge_count"), (missing, "phases[1].sources[0].path"), (bad_yaml, "invalid YAML")]


def test_config_errors_exit_2_with_one_line(tmp_path, project):
    for config, named in _bad_configs(tmp_path, project):
        r = toktok("run", "-c", config, real=True)
        assert r.code == 2, (config.name, r.code, r.err)
        line = one_line_error(r.err)
        assert named in line, line
        assert str(config) in line or config.name in line, "the message names the config file"
        assert " line " in line, "and the YAML line"
        assert not work_of(project).exists(), "nothing is written before the config is valid"


@pytest.mark.parametrize("stage", ["ingest", "train", "export"])
def test_config_errors_exit_2_in_every_stage(tmp_path, project, stage):
    config, named = _bad_configs(tmp_path, project)[0]
    r = toktok(stage, "-c", config)
    assert r.code == 2
    assert named in one_line_error(r.err)


def test_missing_config_file_exits_2(tmp_path):
    r = toktok("run", "-c", tmp_path / "nope.yaml")
    assert r.code == 2
    assert "nope.yaml" in one_line_error(r.err)


def test_verbose_shows_the_traceback(tmp_path, project):
    config, _ = _bad_configs(tmp_path, project)[0]
    r = toktok("run", "-c", config, "--verbose", real=True)
    assert r.code == 2
    assert "Traceback" in r.err and "error: " in r.err


# ---------------------------------------------------------------- stage order


def test_train_before_ingest_says_run_ingest(project):
    r = toktok("train", "-c", project, real=True)
    assert r.code == 1
    line = one_line_error(r.err)
    assert "toktok ingest" in line
    assert not (work_of(project) / "train" / "01-english" / "manifest.json").exists()


def test_export_before_train_says_run_train(project):
    fresh = toktok("export", "-c", project)
    assert fresh.code == 1
    assert "toktok train" in one_line_error(fresh.err) or "toktok ingest" in fresh.err
    assert toktok("ingest", "-c", project).code == 0
    r = toktok("export", "-c", project)
    assert r.code == 1
    assert "toktok train" in one_line_error(r.err)
    assert not (project.parent / "out" / "tok.tiktoken").exists()


# ---------------------------------------------------------------- options refused


def test_export_hf_writes_a_tokenizer_json_with_tiktokens_ids(project):
    tokenizers = pytest.importorskip("tokenizers")
    project.write_text(project.read_text() + "export_hf: true\n")
    r = toktok("run", "-c", project)
    assert r.code == 0, r.err
    out = project.parent / "out"
    assert sorted(p.name for p in (out / "tok.hf").iterdir()) == [
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    enc = toktoktok.load(out / "tok.tiktoken")
    hf = tokenizers.Tokenizer.from_file(str(out / "tok.hf" / "tokenizer.json"))
    text = "Hello, world!\n\n  def f(x):\n\treturn 42 ñ 日本<|endoftext|>end"
    assert hf.encode(text).ids == enc.encode(text, allowed_special="all")


def test_export_hf_flag(project):
    pytest.importorskip("tokenizers")
    assert toktok("run", "-c", project).code == 0
    assert not (project.parent / "out" / "tok.hf").exists()
    r = toktok("export", "-c", project, "--hf")
    assert r.code == 0, r.err
    assert (project.parent / "out" / "tok.hf" / "tokenizer.json").is_file()


def test_warm_start_is_refused_or_keeps_every_base_id(tmp_path, project):
    """The brief: warm_start is refused ("not yet supported", exit 2). If a later
    version supports it, docs/configuration.md holds instead: every base token keeps its id."""
    base = {bytes([b]): b for b in range(256)} | {b"th": 256, b"the": 257, b" the": 258}
    write_tiktoken(tmp_path / "base.tiktoken", base)
    warm = f"warm_start: {{file: {tmp_path / 'base.tiktoken'}, special_tokens: {{}}}}\n"  # it has none
    project.write_text(project.read_text() + warm)
    r = toktok("run", "-c", project)
    if "not yet supported" in r.err:
        assert r.code == 2
        assert "warm_start" in one_line_error(r.err)
        assert not work_of(project).exists()
    else:
        assert r.code == 0, r.err
        ranks = dict(parse_tiktoken(project.parent / "out" / "tok.tiktoken"))
        assert all(ranks[tok] == rank for tok, rank in base.items())
        assert min(r for t, r in ranks.items() if t not in base) == 259


# ---------------------------------------------------------------- --phase


def test_phase_option_runs_one_phase(project):
    work = work_of(project)
    r = toktok("ingest", "-c", project, "--phase", "english")  # names are case-insensitive
    assert r.code == 0, r.err
    assert (work / "ingest" / "01-english" / "manifest.json").is_file()
    assert not (work / "ingest" / "02-other-text").exists()
    assert "Other" not in r.out

    r = toktok("train", "-c", project, "--phase", "01-english")  # or the folder's slug
    assert r.code == 0, r.err
    assert (work / "train" / "01-english" / "manifest.json").is_file()
    assert not (work / "train" / "02-other-text").exists()

    r = toktok("train", "-c", project, "--phase", "Other Text")
    assert r.code == 1, "phase 2 has not been ingested"
    assert "toktok ingest" in one_line_error(r.err)

    assert toktok("ingest", "-c", project, "--phase", "Other Text").code == 0
    assert toktok("train", "-c", project, "--phase", "Other Text").code == 0
    assert manifest(work / "train" / "02-other-text")["counts"]["merges_made"] == 20
    r = toktok("run", "-c", project)
    assert r.code == 0 and r.out.count("up to date") == 2, "the phases run alone are current"


@pytest.mark.parametrize("stage", ["ingest", "train"])
def test_unknown_phase_exits_2(project, stage):
    r = toktok(stage, "-c", project, "--phase", "Klingon")
    assert r.code == 2
    line = one_line_error(r.err)
    assert "Klingon" in line and "English" in line, "names the phase asked for and the known ones"


# ---------------------------------------------------------------- failures leave nothing that claims completeness


def _parquet_project(tmp_path, project, on_bad_file=None, extra=()):
    """The project with phase 2 reading a parquet file that has no `text` column."""
    bad = tmp_path / "data" / "bad.parquet"
    pq.write_table(pa.table({"body": ["some text", "more text"]}), bad)
    phases = [
        {"name": "English", "merges": 40, "sources": [{"path": str(tmp_path / "data" / "english")}]},
        {"name": "Other Text", "merges": 20, "sources": [{"file": str(bad)}, *({"file": str(e)} for e in extra)]},
    ]
    settings = {"on_bad_file": on_bad_file} if on_bad_file else {}
    write_config(project.parent, phases, heldout_share=0, threads=1, special_tokens=SPECIALS, **settings)
    return bad


def test_failed_ingest_leaves_no_manifest_and_no_output(tmp_path, project):
    bad = _parquet_project(tmp_path, project)
    r = toktok("run", "-c", project, real=True)
    assert r.code == 1, r.err
    line = one_line_error(r.err)
    assert str(bad) in line and "text" in line
    work = work_of(project)
    assert (work / "ingest" / "01-english" / "manifest.json").is_file(), "phase 1 finished"
    assert not (work / "ingest" / "02-other-text" / "manifest.json").exists()
    assert not list(work.rglob("train/*/manifest.json"))
    assert not (work / "export" / "manifest.json").exists()
    out = project.parent / "out"
    assert not (out / "tok.tiktoken").exists() and not (out / "tok.meta.json").exists()
    # the stage alone fails the same way, and a retry does not pretend
    r = toktok("ingest", "-c", project)
    assert r.code == 1 and str(bad) in r.err
    assert not (work / "ingest" / "02-other-text" / "manifest.json").exists()
    assert toktok("train", "-c", project).code == 1


def test_bad_file_skipped_when_asked(tmp_path, project):
    ok = tmp_path / "data" / "ok.txt"
    ok.write_text(english_text(2_000, offset=30_000))
    bad = _parquet_project(tmp_path, project, on_bad_file="skip", extra=[ok])
    r = toktok("run", "-c", project)
    assert r.code == 0, r.err
    assert str(bad) in r.err
    counts = manifest(work_of(project) / "ingest" / "02-other-text")["counts"]
    assert [b["path"] for b in counts["bad_files"]] == [str(bad)]
    assert counts["files"] == 1


# ---------------------------------------------------------------- the command's own process

_PROBE = ("{setup}; import os, numpy; from numpy._core import multiarray as m; "
          "print(os.environ.get('NUMPY_MADVISE_HUGEPAGE'), os.environ.get('OPENBLAS_NUM_THREADS'), "
          "m._set_madvise_hugepage(False))")
_COMMAND = "from toktoktok_stages.cli import entry; entry.prepare()"  # what toktok and toktoktok run first
_SCRIPT = "import toktoktok_stages.cli.app, toktoktok_stages.pipeline"  # a script importing the package


@pytest.mark.parametrize(("setup", "preset", "want"), [
    (_COMMAND, {}, "0 1 False"),  # the command: no huge pages, one BLAS thread
    (_COMMAND, {"NUMPY_MADVISE_HUGEPAGE": "1", "OPENBLAS_NUM_THREADS": "2"}, "1 2 True"),  # set: kept
    (_SCRIPT, {}, "None None"),  # imported by a script: its environment is left alone
])
def test_the_command_runs_numpy_without_huge_pages_and_one_blas_thread(setup, preset, want):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("NUMPY_MADVISE_HUGEPAGE", "OPENBLAS_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", _PROBE.format(setup=setup)], env={**env, **preset},
                         capture_output=True, text=True, check=True).stdout.split()
    assert " ".join(out).startswith(want)


_POOL = ("{setup}; import os, pyarrow; "
         "print(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'), pyarrow.default_memory_pool().backend_name)")


@pytest.mark.parametrize(("setup", "preset"), [
    (_COMMAND, {}),  # the command: jemalloc where this pyarrow has it
    (_COMMAND, {"ARROW_DEFAULT_MEMORY_POOL": "system"}),  # set: kept
    (_SCRIPT, {}),  # imported by a script: Arrow's own default
])
def test_the_command_gives_arrow_jemalloc_where_it_has_it(setup, preset):
    import os
    import subprocess
    import sys

    import pyarrow as pa

    try:
        pa.jemalloc_memory_pool()
        has = True
    except NotImplementedError:
        has = False
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    done = subprocess.run([sys.executable, "-c", _POOL.format(setup=setup)], env={**env, **preset},
                          capture_output=True, text=True, check=True)
    assert done.stderr == ""  # never Arrow's warning about a pool it lacks
    named, backend = done.stdout.split()
    if preset:
        assert (named, backend) == ("system", "system")
    elif setup == _COMMAND and has:
        assert (named, backend) == ("jemalloc", "jemalloc")
    else:
        assert named == "None" and backend != "jemalloc"


def test_no_jemalloc_named_for_a_pyarrow_that_does_not_say_it_has_it(tmp_path, monkeypatch):
    """Where the build settings pyarrow ships are missing or lack jemalloc, nothing is named."""
    import importlib.machinery
    import importlib.util

    from toktoktok_stages.cli import entry

    fake = tmp_path / "pyarrow"
    (fake / "include" / "arrow" / "util").mkdir(parents=True)
    spec = importlib.machinery.ModuleSpec("pyarrow", None, is_package=True)
    spec.submodule_search_locations = [str(fake)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    assert entry.arrow_has_jemalloc() is False  # no config.h
    (fake / "include" / "arrow" / "util" / "config.h").write_text("#define ARROW_MIMALLOC\n")
    assert entry.arrow_has_jemalloc() is False
    (fake / "include" / "arrow" / "util" / "config.h").write_text("#define ARROW_JEMALLOC\n#define ARROW_MIMALLOC\n")
    assert entry.arrow_has_jemalloc() is True


@pytest.mark.parametrize("setup", [_COMMAND, _SCRIPT])
def test_the_command_collects_less_often_and_a_script_keeps_pythons_thresholds(setup):
    import gc
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", f"{setup}; import gc; print(*gc.get_threshold())"],
                          capture_output=True, text=True, check=True)
    young, *older = map(int, done.stdout.split())
    if setup == _COMMAND:
        assert young > 10 * gc.get_threshold()[0] and older == [20, 20]
    else:
        assert (young, *older) == gc.get_threshold()
