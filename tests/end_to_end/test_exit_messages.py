"""Exit codes and messages at the edges: each one line naming the file, key or option.

- A reader that closed our standard output before the summary (``| head -0``):
  the work is done, exit 0 without a word, for every command that prints.
- A FIFO (not a regular file) as a source ``file:`` or an encode input: said so,
  not "no such file".
- ``file://otherhost/path``: a message about the host.
- ``toktok compare`` (no stages, nothing written) interrupted: "interrupted"
  with no word about stages.
- ``--pattern`` with a tokenizer that has a companion: show, encode and decode
  apply it as ``toktoktok.load(pattern=...)`` does.
- ``toktoktok.load(special_tokens=[...])``: one line saying it takes a dict.
- ``train_texts`` refusing its arguments, or failing, leaves no ``NAME.input/``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

import toktoktok
from tests.processes import TOKTOK, cli, error_line, finish, phase, signal_group, start, write_config
from toktoktok.errors import UsageError
from toktoktok_stages.pipeline import train_texts


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("exits")
    data = root / "data"
    data.mkdir()
    words = "the cat sat on the mat and the dog ran far away from home today ".split()
    (data / "a.txt").write_text("\n\n".join(" ".join(words[(i * 5 + j) % len(words)] for j in range(40))
                                            for i in range(400)))
    config = write_config(root / "p", [phase("A", 50, {"path": str(data)})])
    assert cli("run", "-c", config).code == 0
    return config, data, root / "p" / "out" / "tok.tiktoken"


def to_closed_pipe(args: list[str]) -> subprocess.CompletedProcess:
    """``toktok ARGS | head -0``: standard output a pipe whose reader is gone before it starts."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([str(TOKTOK), *args], stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)


COMMANDS = [
    ["run", "-c", "CFG", "--force"], ["plan", "-c", "CFG"], ["plan", "-c", "CFG", "--json"],
    ["show", "-t", "TOK", "the cat sat"], ["inspect", "TOK"], ["encode", "DATA", "-t", "TOK", "-o", "ENC"],
    ["decode", "-t", "TOK", "1", "2", "3"], ["compare", "TOK", "--text", "DATA"], ["--help"], ["--version"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:1] + c[3:4]))
def test_a_closed_standard_output_after_the_work_exits_0_without_a_word(tmp_path, trained, command):
    config, data, tok = trained
    args = [str({"CFG": config, "TOK": tok, "DATA": data, "ENC": tmp_path / "enc"}.get(a, a)) for a in command]
    done = to_closed_pipe(args)
    assert done.returncode == 0, done.stderr
    assert all(line.startswith("warning: ") for line in done.stderr.splitlines() if line.strip()), done.stderr
    if command[0] == "encode":
        assert (tmp_path / "enc").is_dir()  # the work was done


def test_a_fifo_is_not_a_regular_file(tmp_path, trained):
    _, _, tok = trained
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    result = cli("encode", fifo, "-t", tok, "-o", tmp_path / "enc", timeout=60)
    line = error_line(result.err)
    assert result.code in (1, 2) and str(fifo) in line and "not a regular file" in line, result
    config = write_config(tmp_path / "p", [phase("A", 10, {"file": str(fifo)})])
    result = cli("plan", "-c", config, timeout=60)
    line = error_line(result.err)
    assert result.code == 2 and str(fifo) in line and "not a regular file" in line, result
    assert "no such file" not in line.lower()


def test_a_file_uri_with_another_host_says_so(tmp_path):
    config = write_config(tmp_path / "p", [phase("A", 10, {"file": "file://otherhost/data/a.txt"})])
    result = cli("plan", "-c", config, timeout=60)
    line = error_line(result.err)
    assert result.code == 2 and "otherhost" in line and "host" in line, result
    assert "percent" not in line, line


def test_compare_interrupted_says_nothing_of_stages(tmp_path, trained):
    _, data, tok = trained
    big = tmp_path / "big.txt"
    big.write_text((data / "a.txt").read_text() * 400)
    said = []
    for delay in (1.5, 2.5, 4):
        proc = start("compare", tok, "--text", big)
        time.sleep(delay)
        signal_group(proc, signal.SIGINT)
        result = finish(proc)
        if result.code == 130:
            said.append(result.err.strip().splitlines()[-1])
    assert said, "compare ended before every interrupt"
    for line in said:
        assert line.startswith("interrupted") and "stage" not in line and "rerun" not in line, line


def test_pattern_with_a_companion_is_applied_as_load_applies_it(tmp_path, trained):
    _, _, tok = trained
    text = "DON'T stop   the cat's 12345 mat"
    mine = toktoktok.load(tok, pattern="gpt2")
    assert mine.encode_ordinary(text) != toktoktok.load(tok).encode_ordinary(text)  # the pattern matters here
    shown = cli("show", "-t", tok, "--pattern", "gpt2", "--color", "never", text)
    assert shown.code == 0, shown
    ids = next(line for line in shown.out.splitlines() if line.startswith("ids: "))
    assert ids == f"ids: {mine.encode_ordinary(text)}", shown.out
    (tmp_path / "t.txt").write_text(text)
    enc = cli("encode", tmp_path / "t.txt", "-t", tok, "--pattern", "gpt2", "-o", tmp_path / "enc")
    assert enc.code == 0, enc
    import numpy as np

    shards = sorted((tmp_path / "enc").glob("*.npy"))
    assert np.concatenate([np.load(s) for s in shards]).tolist()[: len(mine.encode_ordinary(text))] == \
        mine.encode_ordinary(text)


def test_load_with_a_list_of_special_tokens_says_it_takes_a_dict(trained):
    _, _, tok = trained
    with pytest.raises(UsageError) as caught:
        toktoktok.load(tok, special_tokens=["<|x|>"])
    message = str(caught.value)
    assert "\n" not in message and "dict of token -> id" in message and "list" in message, message


@pytest.mark.parametrize("bad", [
    {"output": "OUT/x.txt"}, {"merges": "ten"}, {"special_tokens": "<|x|>"}, {"heldout_share": 0.9},
    {"texts": ["fine", 7]},
])
def test_train_texts_refusing_leaves_no_input_folder(tmp_path, bad):
    kwargs = {"output": str(tmp_path / "tok.tiktoken"), "merges": 10, "texts": ["hello world"] * 3, **bad}
    kwargs["output"] = kwargs["output"].replace("OUT", str(tmp_path))
    texts = kwargs.pop("texts")
    with pytest.raises((UsageError, TypeError, ValueError)):
        train_texts(texts, **kwargs)
    assert not any(p.name.endswith(".input") for p in tmp_path.iterdir()), list(tmp_path.iterdir())
