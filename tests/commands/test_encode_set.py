"""``toktok encode``'s output folder is one set: one run at a time writes it
(a lock), a kill at any file event never leaves a new file beside an
earlier run's, ``index.json`` names the tokenizer that made the ids, a split
that would leave training empty is refused, and a write that fails names its
file. Each run here is a real ``toktok`` process; faults are real signals and
real resource limits, set at exact file events by a small wrapper."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.commands.test_encode import EOT, encoding, make_tokenizer
from tests.conftest import TOKTOK, english_text, toktok

LOCK = ".encode.lock"  # docs/outputs.md: the lock file inside --out

# Runs `toktok` after wrapping os.replace (every rename of a finished file) so that
# the KILL_AT-th one whose target lies in KILL_IN kills the process before it renames.
KILLER = """
import os, signal, sys
at, where, seen = int(os.environ["KILL_AT"]), os.environ["KILL_IN"], [0]
real = os.replace
def replace(src, dst, *a, **k):
    if str(dst).startswith(where):
        seen[0] += 1
        if seen[0] == at:
            os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *a, **k)
os.replace = replace
sys.argv[0] = "toktok"
from toktoktok_stages.cli.entry import main
main()
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    root = tmp_path_factory.mktemp("encode-set")
    tok = make_tokenizer(root)
    old, new = root / "old.txt", root / "new.txt"
    old.write_text(english_text(30_000), encoding="utf-8")
    new.write_text(english_text(20_000, offset=40_000), encoding="utf-8")
    return {"root": root, "tok": tok, "old": old, "new": new}


def _visible(folder: Path) -> dict[str, bytes]:
    """The files a trainer sees (hidden temporary and lock files left out), with their bytes."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")}


def _stdin_run(tok: Path, out: Path, *args: str) -> subprocess.Popen:
    """``toktok encode -t TOK - -o OUT ARGS`` reading a pipe the test writes later."""
    return subprocess.Popen([str(TOKTOK), "encode", "-t", str(tok), "-", "-o", str(out), *args], env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _writing(proc: subprocess.Popen, out: Path) -> None:
    """Wait until ``proc`` has its output files open (a temporary file in ``out``)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir() and any(p.name.endswith(".tmp") for p in out.iterdir()):
            return
        time.sleep(0.01)
    raise AssertionError(f"encode never started writing: {proc.poll()}, {proc.stderr.read() if proc.stderr else ''}")


def test_one_encode_at_a_time_writes_a_folder(texts, tmp_path):
    out = tmp_path / "race"
    first = _stdin_run(texts["tok"], out, "--format", "bin", "--val-share", "0.2", "--separator", EOT)
    try:
        _writing(first, out)
        second = toktok("encode", "-t", texts["tok"], texts["old"], "-o", out, "--format", "bin")
        assert second.code == 1, second.err
        assert str(out / LOCK) in second.err and str(first.pid) in second.err, second.err
        assert len(second.err.strip().splitlines()) == 1
        data, err = first.communicate(texts["new"].read_bytes(), timeout=120)
    finally:
        first.kill() if first.poll() is None else None
    assert first.returncode == 0, err
    index = json.loads((out / "index.json").read_text())
    enc = encoding(texts["tok"])
    tokens = np.fromfile(out / "train.bin", dtype="<u2").tolist() + np.fromfile(out / "val.bin", dtype="<u2").tolist()
    assert len(tokens) == index["tokens"] and index["documents"] == tokens.count(enc.encode_single_token(EOT))
    again = toktok("encode", "-t", texts["tok"], texts["old"], "-o", out, "--format", "bin")
    assert again.code == 0, "the lock file is not a stranger's file: " + again.err


def test_index_names_the_tokenizer_that_was_loaded(texts, tmp_path):
    folder = tmp_path / "tok"
    tok = make_tokenizer(folder)
    loaded = tok.read_bytes()
    other = make_tokenizer(tmp_path / "other", top=400)  # another vocabulary, published while encode runs
    out = tmp_path / "out"
    run = _stdin_run(tok, out, "--format", "bin", "--val-share", "0.2")
    try:
        _writing(run, out)
        for name in (other, other.with_name("tok.meta.json")):
            shutil.copy(name, folder / f".{name.name}.new")
            os.replace(folder / f".{name.name}.new", folder / name.name)
        _, err = run.communicate(texts["new"].read_bytes(), timeout=120)
    finally:
        run.kill() if run.poll() is None else None
    assert run.returncode == 0, err
    index = json.loads((out / "index.json").read_text())
    assert index["tokenizer_sha256"] == hashlib.sha256(loaded).hexdigest()
    assert index["vocab_size"] == encoding(make_tokenizer(tmp_path / "again")).n_vocab


@pytest.mark.parametrize("fmt, args", [
    ("bin", ["--val-share", "0.2"]),
    ("megatron", ["--val-share", "0.2"]),
    ("npy", ["--val-share", "0.2", "--shard-tokens", "5000"]),
])
def test_a_kill_at_any_rename_never_mixes_two_runs(texts, tmp_path, fmt, args):
    common = ["encode", "--format", fmt, "--separator", EOT, *args]
    earlier = tmp_path / "earlier"
    smaller = ["--shard-tokens", "1500"] if fmt == "npy" else []  # the earlier run has more shards
    other = make_tokenizer(tmp_path / "other", top=40_000)  # another vocab_size: bin's meta.pkl differs too
    assert toktok(*common, "-t", other, *smaller, texts["old"], "-o", earlier).code == 0
    common += ["-t", str(texts["tok"])]
    states, finished = [], None
    for at in range(1, 30):
        out = tmp_path / f"kill-{at}"
        shutil.copytree(earlier, out)
        proc = subprocess.run([sys.executable, "-c", KILLER, *common, str(texts["new"]), "-o", str(out)],
                              env=_env() | {"KILL_AT": str(at), "KILL_IN": str(out)}, capture_output=True,
                              timeout=300)
        if proc.returncode == 0:
            finished = _visible(out)
            break
        assert proc.returncode == -9, proc.stderr
        states.append((at, _visible(out)))
    assert finished is not None and len(states) >= 3
    old = _visible(earlier)
    assert all(old[n] != finished[n] for n in set(old) & set(finished)), "the two runs differ in every file"
    for at, seen in states:
        olds = {n for n, data in seen.items() if old.get(n) == data}
        news = {n for n, data in seen.items() if finished.get(n) == data}
        assert olds | news == set(seen), (at, sorted(seen))
        assert not olds or not news, f"kill at rename {at}: new {sorted(news)} beside earlier {sorted(olds)}"
        if "index.json" in seen:
            assert seen == old, f"kill at rename {at}: an index beside files it does not describe"


@pytest.mark.parametrize("fmt", ["bin", "megatron", "npy"])
def test_a_split_that_leaves_training_empty_is_refused(texts, tmp_path, fmt):
    out = tmp_path / "out"
    assert toktok("encode", "-t", texts["tok"], texts["old"], "-o", out, "--format", fmt).code == 0
    before = _visible(out)
    r = toktok("encode", "-t", texts["tok"], texts["new"], "-o", out, "--format", fmt, "--val-share", "0.9999")
    assert r.code == 2 and "--val-share" in r.err and "training" in r.err, r.err
    assert _visible(out) == before, "a refused run keeps the earlier set as it was"
    few = toktok("encode", "-t", texts["tok"], texts["new"], "-o", out, "--format", fmt, "--val-share", "0.0001")
    assert few.code == 0 and "warning: no document fell in the validation split" in few.out, few.err


def test_a_write_that_fails_names_its_file(texts, tmp_path):
    out = tmp_path / "full"
    big = tmp_path / "big.txt"
    big.write_text(english_text(200_000), encoding="utf-8")

    def small_files() -> None:  # a file may not grow past 64 KiB: writing more fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))

    proc = subprocess.run([str(TOKTOK), "encode", "-t", str(texts["tok"]), str(big), "-o", str(out), "--format",
                           "bin", "--val-share", "0.01"], env=_env(), capture_output=True, text=True, timeout=300,
                          preexec_fn=small_files)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == f"error: cannot write {out / 'train.bin'}: File too large", proc.stderr
