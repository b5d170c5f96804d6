"""No hang, no orphan, Ctrl-C always works; and bounds the user set are applied.

- Ctrl-C at any moment of any command: exit 130, one line, no traceback
  (early: while Python loads the modules; late: in the middle of the work).
- A custom pattern that backtracks without end stops at ``pattern_timeout_s``
  (exit 1 naming the file), whatever ``on_bad_file`` says.
- Killing the main process leaves no worker process behind; Ctrl-C with a
  worker stuck in such a pattern still exits promptly.
- ``max_piece_bytes`` cuts longer pieces (at the default and at 1024).
- ``on_bad_file: skip``: the counts are those of what was trained.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest

from tests.processes import (
    TOKTOK,
    children,
    cli,
    finish,
    manifest,
    phase,
    signal_group,
    start,
    wait_for,
    work,
    write_config,
)

# a pattern that covers every character, but backtracks without end on a long run of "a"
# followed by no "b": (?:a|aa)+ tries every way of splitting the run before it fails
SLOW_PATTERN = r"(?:a|aa)+b|\s+|[^\sa]+|a"


ROOT = Path(__file__).resolve().parents[2]  # the checkout, whatever its folder is named


def frames_of_ours(err: str, root: Path = ROOT) -> list[str]:
    """The traceback lines of ``err`` in our packages: files under ``root/toktoktok/``
    or ``root/stages/``, matched below the checkout (a clone named ``toktoktok`` has
    that name in every path, its virtual environment's included).
    """
    ours = []
    for line in err.splitlines():
        line = line.strip()
        if not line.startswith('File "'):
            continue
        path = Path(line[len('File "'):].split('"', 1)[0])
        if path.is_relative_to(root) and path.relative_to(root).parts[:1] in (("toktoktok",), ("stages",)):
            ours.append(line)
    return ours


# the modules the console script runs before ``cli.entry.prepare`` sets the Ctrl-C handler
BEFORE_HANDLER = ("stages/__init__.py", "stages/cli/__init__.py", "stages/cli/entry.py")


def _interrupted(result) -> str:
    if result.code in (-signal.SIGINT, 1) and result.out == "" and "interrupted" not in result.err and (
            result.err == "" or result.err.rstrip().endswith(("KeyboardInterrupt", "KeyboardInterrupt:"))):
        # before Python ran any of toktoktok: nothing done. Killed by the signal (a shell says 130), or exit 1
        # when it came while the interpreter itself started (its site module reading the editable install's
        # .pth, or setting up __main__): nothing said, or Python's own traceback, in which no line of
        # toktoktok's ran yet (the import machinery finding the package: a few milliseconds; a frame of ours
        # at line 0 is a module entered, none of its lines run), or only the first lines of the three modules
        # the console script enters before the handler is set (their docstrings and standard-library imports)
        ours = frames_of_ours(result.err)
        assert all(", line 0, in <module>" in f or f.split('"')[1].endswith(BEFORE_HANDLER) for f in ours), result
        return ""
    if result.code == 1 and result.err.startswith("Fatal Python error: init_"):  # the interpreter's own start
        assert "KeyboardInterrupt" in result.err, result  # (its first milliseconds, before any of our code)
        return ""
    assert result.code == 130, result
    assert "Traceback" not in result.err, result.err
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("interrupted"), result.err
    return lines[-1]


def test_frames_of_ours_whatever_the_clone_is_named():
    root = Path("/x/toktoktok")
    err = "\n".join([
        'Traceback (most recent call last):',
        '  File "/x/toktoktok/.venv/bin/toktok", line 5, in <module>',
        '  File "/x/toktoktok/.venv/lib/python3.11/site-packages/click/core.py", line 9, in main',
        '  File "/x/toktoktok/stages/cli/entry.py", line 0, in <module>',
        '  File "/x/toktoktok/toktoktok/__init__.py", line 3, in <module>',
        '  File "/elsewhere/stages/x.py", line 1, in f',
    ])
    assert frames_of_ours(err, root) == [
        'File "/x/toktoktok/stages/cli/entry.py", line 0, in <module>',
        'File "/x/toktoktok/toktoktok/__init__.py", line 3, in <module>',
    ]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupts")
    data = root / "data"
    data.mkdir()
    words = "the cat sat on the mat and the dog ran far away from home today ".split()
    text = "\n\n".join(" ".join(words[(i * 7 + j) % len(words)] for j in range(60)) for i in range(3000))
    (data / "a.txt").write_text(text)
    config = write_config(root / "p", [phase("A", 300, {"path": str(data)})], threads=2, heldout_share=0.01)
    assert cli("run", "-c", config).code == 0
    return config, data


COMMANDS = [
    ["run", "--force"], ["ingest", "--force"], ["train", "--force"], ["export", "--force"], ["plan"],
    ["inspect", "OUT"], ["encode", "DATA", "-t", "OUT", "-o", "ENC"], ["compare", "OUT", "--text", "DATA"],
]


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_ctrl_c_at_any_moment_of_any_command(tmp_path, small, command):
    """SIGINT to the process group at several moments: exit 130 with one line; or,
    if the command was already done, exit 0. The earliest moment always interrupts."""
    config, data = small
    out = work(config).parent / "tok.tiktoken"
    args = [str({"OUT": out, "DATA": data, "ENC": tmp_path / "enc"}.get(a, a)) for a in command]
    if command[0] in ("run", "ingest", "train", "export", "plan"):
        args += ["-c", str(config)]
    interrupted = 0
    for delay in (0.02, 0.15, 0.4, 0.8, 1.5):
        proc = start(*args)
        time.sleep(delay)
        signal_group(proc, signal.SIGINT)
        result = finish(proc)
        if result.code == 0:
            continue
        _interrupted(result)
        interrupted += 1
    assert interrupted >= 1
    assert cli("run", "-c", config).code == 0, "a rerun after the interrupts finishes"


@pytest.mark.slow
@pytest.mark.parametrize("command", [["run", "--force"], ["encode", "DATA", "-t", "OUT", "-o", "ENC"]],
                         ids=lambda c: c[0])
def test_started_with_ctrl_c_ignored_it_stays_ignored(tmp_path, small, command):
    """A ``&`` job of a script inherits SIGINT ignored: Ctrl-C sent all its life changes nothing."""
    config, data = small
    out = work(config).parent / "tok.tiktoken"
    args = [str({"OUT": out, "DATA": data, "ENC": tmp_path / "enc"}.get(a, a)) for a in command]
    if command[0] == "run":
        args += ["-c", str(config)]
    proc = subprocess.Popen([str(TOKTOK), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    sent = 0
    while proc.poll() is None and sent < 600:
        signal_group(proc, signal.SIGINT)
        sent += 1
        time.sleep(0.05)
    result = finish(proc)
    assert sent > 10, "the command ended before it could be tried"
    assert result.code == 0 and "interrupted" not in result.err, result


def test_a_pattern_that_never_ends_stops_at_its_timeout(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "fine.txt").write_text("hello there world\n\n" * 50)
    (data / "slow.txt").write_text("hello\n\n" + "a" * 60 + " end\n")
    for threads in (1, 2):
        config = write_config(tmp_path / f"p{threads}", [phase("A", 10, {"path": str(data)})], threads=threads,
                              pattern=SLOW_PATTERN, pattern_timeout_s=0.2, on_bad_file="skip")
        started = time.monotonic()
        result = cli("run", "-c", config)
        assert result.code == 1, result
        assert str(data / "slow.txt") in result.err and "pattern_timeout_s" in result.err, result.err
        assert time.monotonic() - started < 60


def test_killing_the_main_process_leaves_no_worker(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for k in range(4):
        (data / f"slow{k}.txt").write_text("a" * 80 + " end\n")
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})], threads=2,
                          pattern=SLOW_PATTERN, pattern_timeout_s=3600)
    proc = start("ingest", "-c", config)

    def busy_workers() -> list[int]:
        found = []
        for child in children(proc.pid):
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(child)
            except OSError:
                pass
        return found

    assert wait_for(lambda: len(busy_workers()) >= 1, proc), finish(proc)
    time.sleep(1.0)  # the workers are inside the pattern now
    workers = busy_workers()
    proc.kill()  # SIGKILL to the main process alone
    proc.wait()

    def gone() -> bool:
        return all(not Path(f"/proc/{w}").exists() or "Z" in Path(f"/proc/{w}/stat").read_text().split()[2]
                   for w in workers)

    assert wait_for(gone, None, timeout=20), f"workers left running: {workers}"


def test_ctrl_c_with_a_worker_stuck_in_the_pattern_exits(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "slow.txt").write_text("a" * 80 + " end\n")
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})], threads=2,
                          pattern=SLOW_PATTERN, pattern_timeout_s=3600)
    proc = start("ingest", "-c", config)
    assert wait_for(lambda: len(children(proc.pid)) >= 1, proc)
    time.sleep(1.5)
    signal_group(proc, signal.SIGINT)
    _interrupted(finish(proc, timeout=30))


@pytest.mark.parametrize("limit", [None, 1024])
def test_max_piece_bytes_cuts_long_pieces(tmp_path, limit):
    data = tmp_path / "data"
    data.mkdir()
    run_a, run_e = "a" * 1_300_000, "é" * 700_000  # one piece each to the pattern: 1.3 MB and 1.4 MB
    (data / "a.txt").write_text(f"hello world\n\n{run_a} tail\n\n{run_e}\n")
    settings = {"heldout_share": 0, "threads": 1} | ({"max_piece_bytes": limit} if limit else {})
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})], **settings)
    assert cli("ingest", "-c", config).code == 0
    folder = work(config) / "ingest" / "01-a"
    df = pl.concat([pl.read_ipc(p) for p in sorted(folder.glob("chunk-*.arrow"))])
    limit = limit or 1 << 20
    sizes = df["piece"].bin.size()
    assert sizes.max() <= limit
    assert (sizes == limit).any(), "the run of 'a' is cut at the limit"
    pieces = dict(zip(df["piece"].to_list(), df["count"].to_list()))
    a_bytes = sum(len(p) * n for p, n in pieces.items() if set(p) == {ord("a")})
    e_bytes = sum(len(p) * n for p, n in pieces.items() if p and set(p) <= set("é".encode()))
    assert a_bytes == len(run_a) and e_bytes == len(run_e.encode()), "no byte lost or added"
    assert all(p.decode("utf-8") for p in pieces), "every part is whole characters"
    assert manifest(folder)["counts"]["forced_cuts"] >= (1_300_000 // limit) + (1_400_000 // limit) - 1


def test_skipped_bad_file_is_not_counted(tmp_path):
    """``on_bad_file: skip``: a file that fails half way is taken out of the counts
    when none of it was written; the manifest lists it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "good.txt").write_text("one document here\n\nand another one\n")
    good = "\n".join('{"text": "row %d"}' % i for i in range(500))
    (data / "broken.jsonl").write_text(good + '\n{"text": "cut here')
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})], threads=1, heldout_share=0,
                          on_bad_file="skip")
    result = cli("ingest", "-c", config)
    assert result.code == 0, result.err
    m = manifest(work(config) / "ingest" / "01-a")
    assert m["counts"]["documents"] == 2 and m["counts"]["files"] == 1, m["counts"]
    assert [b["path"] for b in m["counts"]["bad_files"]] == [str(data / "broken.jsonl")]


def _ctrl_c_while(loaded: list[str], what: str):
    """A kernel loader that gets Ctrl-C in its middle and finishes anyway."""
    import os

    def load() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler has run by now
        loaded.append(what)

    return load


def test_ctrl_c_while_a_txt_reader_loads_its_kernels_waits_for_them(tmp_path, monkeypatch):
    """The first ``.txt`` read of a process (``encode``, ``compare`` start numba there)
    holds Ctrl-C until the kernels are loaded, then raises it: no half-loaded code."""
    from toktoktok import documents
    from toktoktok.sources import txt_windows

    path = tmp_path / "a.txt"
    path.write_text("one\n\ntwo\n")
    loaded: list[str] = []
    monkeypatch.setattr(documents, "load_document_kernels", _ctrl_c_while(loaded, "documents"))
    txt_windows._load_document_kernels_once.cache_clear()
    try:
        with pytest.raises(KeyboardInterrupt):
            list(txt_windows.iter_txt_windows(path))
        assert loaded == ["documents"]
    finally:
        txt_windows._load_document_kernels_once.cache_clear()


def test_ctrl_c_while_export_loads_the_segmenter_waits_for_it(small, monkeypatch):
    """Export (which may be the process's first use of numba) holds Ctrl-C while the
    segmenter loads, then stops with its one-line message and keeps the outputs."""
    import io

    from toktoktok.config import load_config
    from toktoktok_stages import export, pipeline
    from toktoktok_stages.workdir.progress import Progress

    config, _ = small
    cfg = load_config(config)
    before = cfg.output.read_bytes()
    loaded: list[str] = []
    monkeypatch.setattr(export, "load_segment_kernels", _ctrl_c_while(loaded, "segment"))
    with pytest.raises(KeyboardInterrupt) as caught:
        pipeline.export(cfg, force=True, progress=Progress(stream=io.StringIO()))
    assert loaded == ["segment"]
    assert "kept as they were" in str(caught.value)
    assert cfg.output.read_bytes() == before


def _converted(loaded: list[str], what: str):
    """Work that gets Ctrl-C in its middle inside a library that turns it into an
    error of its own (as matplotlib's C++ bindings raise TypeError)."""
    import os

    def work(*args, **kwargs) -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler has run by now
        except KeyboardInterrupt:
            loaded.append(what)
            raise TypeError("incompatible function arguments") from None

    return work


def test_a_ctrl_c_a_library_turns_into_its_own_error_still_interrupts(small, monkeypatch):
    """Ctrl-C that lands in a library raising an error of its own (the report's plots)
    ends the export as an interrupt, with its one line on the kept outputs, not as
    a failed export; the same error with no Ctrl-C stays a failure."""
    import io

    from toktoktok.config import load_config
    from toktoktok.errors import ExportFailed, Interrupted
    from toktoktok.interrupts import on_interrupt
    from toktoktok_stages import pipeline, report
    from toktoktok_stages.workdir.progress import Progress

    config, _ = small
    cfg = load_config(config)
    before = cfg.output.read_bytes()
    came: list[str] = []
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        monkeypatch.setattr(report, "write_report", _converted(came, "report"))
        with pytest.raises(Interrupted) as caught:
            pipeline.export(cfg, force=True, progress=Progress(stream=io.StringIO()))
        assert came == ["report"]
        assert "kept as they were" in str(caught.value) and "export" in str(caught.value)
        assert cfg.output.read_bytes() == before

        def plain_failure(*args, **kwargs) -> None:
            raise TypeError("incompatible function arguments")

        monkeypatch.setattr(report, "write_report", plain_failure)
        with pytest.raises(ExportFailed):
            pipeline.export(cfg, force=True, progress=Progress(stream=io.StringIO()))
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("kind", ["config", "other"])
def test_the_cli_exits_130_for_an_error_a_ctrl_c_became(kind, capsys):
    """The command line's last resort: an error raised after a Ctrl-C (a config check
    that turned pyarrow's error into a ConfigError, any other) exits 130 with the
    one line; the same error with no Ctrl-C keeps its own exit code (2, 1)."""
    from toktoktok.errors import ConfigError
    from toktoktok.interrupts import on_interrupt
    from toktoktok_stages.cli import guard

    error = ConfigError("sources[0].path: cannot be reached") if kind == "config" else TypeError("incompatible")

    def failing() -> None:
        raise error

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with pytest.raises(SystemExit) as exited:
            guard.guarded(lambda: _raise_after_ctrl_c(error), verbose=False)
        assert exited.value.code == 130
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith("interrupted")
        with pytest.raises(SystemExit) as exited:
            guard.guarded(failing, verbose=False)
        assert exited.value.code == (2 if kind == "config" else 1)
    finally:
        signal.signal(signal.SIGINT, previous)


def _raise_after_ctrl_c(error: Exception) -> None:
    """Ctrl-C in the middle of a library call that raises ``error`` instead."""
    import os

    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    except KeyboardInterrupt:
        raise error from None
