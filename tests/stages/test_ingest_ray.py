"""The Ray engine (``engine: ray``, stages/ingest/ray_engine.py) against a real local Ray
instance: one ``ray.init`` for all of these tests (the ``ray_local`` fixture).

- The summed inventory, ``merges.arrow`` and the ``.tiktoken`` are those of the
  local engine for several splits of the files into byte ranges, several fan-ins
  of the sum tree and 1 or 2 scanner threads per task (2 or 1 tasks at once);
  with a sample and a held-out share, in byte ranges too, the held-out text and
  the manifest's unit counts as well, the held-out cap reached across tasks, and
  a phase whose every unit would be held out training on its last one; a file
  that fails after filling a chunk file is dropped whole by both.
- Sources read through pyarrow.fs (``file://`` URIs as ``RemotePath``) in ranges.
- A task whose worker is killed is retried, and counted once.
- kill -9 of ``toktok ingest --engine ray`` leaves none of the processes it started;
  Ctrl-C exits 130 and leaves none either.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import SHARED, stdlib_sources, stdlib_text
from tests.processes import TOKTOK, cli, finish, phase, read_arrow, signal_group, start, wait_for, write_config

pytest.importorskip("ray")

from toktoktok import sampling  # noqa: E402
from toktoktok.config import load_config  # noqa: E402
from toktoktok.uris import RemotePath  # noqa: E402
from toktoktok_stages import pipeline  # noqa: E402
from toktoktok_stages.ingest import (
    ray_engine,
    routing,  # noqa: E402
)
from toktoktok_stages.workdir.progress import Progress  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_local")

SHARED = SHARED / "corpora"
SLOW_PATTERN = r"(?:a|aa)+b|\s+|[^\sa]+|a"  # backtracks without end on a long run of "a" (test_interrupts.py)


def english(limit: int) -> str:
    """Real text of ``limit`` characters: the shared English corpus where there is one,
    else Python's own standard library sources (the tests need the length: a sample
    and a held-out cap must be reached)."""
    corpus = SHARED / "english.txt.zst"
    if corpus.is_file():
        import zstandard

        with open(corpus, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
            data = reader.read(limit)
        return data.decode("utf-8", "ignore")
    return stdlib_sources(limit)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A folder of every kind of source: two .txt files (one with a byte order mark and a
    few invalid bytes), a .txt.gz, a jsonl with a special token."""
    data = tmp_path_factory.mktemp("ray") / "data"
    data.mkdir()
    text = english(600_000)
    (data / "a.txt").write_text(text[:300_000], encoding="utf-8")
    (data / "b.txt").write_bytes(b"\xef\xbb\xbf" + stdlib_text(150_000).encode() + b"\n\nbad \xff\xfe bytes\n\nend")
    (data / "c.txt.gz").write_bytes(gzip.compress(text[300_000:400_000].encode()))
    (data / "d.jsonl").write_text("".join(json.dumps({"text": text[i: i + 3000] + " <|endoftext|>"}) + "\n"
                                          for i in range(400_000, 500_000, 3000)))
    return data


def run(folder: Path, data: Path | str, engine: str, *, merges: int = 300, weight: float = 1, **settings) -> Path:
    """``toktok run`` in this process (so a Ray engine finds the session's instance); the config."""
    config = write_config(folder, [phase("A", merges, {"path": str(data), "weight": weight})],
                          special_tokens=["<|endoftext|>"], **settings)
    cfg = dataclasses.replace(load_config(config), engine=engine)
    pipeline.run(cfg, progress=Progress())
    return config


def results(config: Path) -> dict[str, object]:
    """What must not depend on the engine: inventory (sorted), merges, .tiktoken, held-out text."""
    work = config.parent / "out" / "tok.work"
    ingest = work / "ingest" / "01-a"
    inventory: dict[bytes, int] = {}
    for chunk in sorted(ingest.glob("chunk-*.arrow")):
        table = read_arrow(chunk)
        for piece, count in zip(table["piece"].to_pylist(), table["count"].to_pylist()):
            inventory[piece] = inventory.get(piece, 0) + count
    return {
        "inventory": sorted(inventory.items()),
        "merges": (work / "train" / "01-a" / "merges.arrow").read_bytes(),
        "tiktoken": (config.parent / "out" / "tok.tiktoken").read_bytes(),
        "heldout": read_arrow(ingest / "heldout.arrow")["text"].to_pylist(),
    }


def manifest(config: Path) -> dict:
    return json.loads((config.parent / "out" / "tok.work" / "ingest" / "01-a" / "manifest.json").read_text())


def test_same_as_local_for_any_split_and_workers(tmp_path, corpus, monkeypatch):
    local = run(tmp_path / "local", corpus, "local")
    expected = results(local)
    counts = manifest(local)["counts"]
    cases = [(40_000, 8, 1), (7_000, 2, 1), (1 << 30, 8, 2), (20_000, 3, 2)]  # range bytes, fan-in, threads
    for k, (range_bytes, fan_in, threads) in enumerate(cases):
        monkeypatch.setattr(ray_engine, "RANGE_BYTES", range_bytes)
        monkeypatch.setattr(ray_engine, "FAN_IN", fan_in)
        config = run(tmp_path / f"ray{k}", corpus, "ray", threads=threads)
        got = results(config)
        for what in expected:
            assert got[what] == expected[what], (what, range_bytes, fan_in, threads)
        m = manifest(config)
        assert m["engine"]["name"] == "ray"
        # a.txt is cut into ranges unless the range is larger; the rest is one task per file
        assert (m["engine"]["tasks"] > 4) == (range_bytes < 300_000), m["engine"]
        for key in ("files", "documents", "bytes_read", "kept_bytes", "replaced_chars", "pieces",
                    "special_tokens_found"):
            assert m["counts"][key] == counts[key], key


def test_sample_and_heldout_same_as_local(tmp_path, corpus):
    """A sample (working_set_mb 1 < the corpus) and a held-out share: one task per file,
    chosen as the local engine chooses. The Ray run names its folder by a file:// URI."""
    settings = {"heldout_share": 0.05, "working_set_mb": 1, "seed": 3}
    expected = results(run(tmp_path / "local", corpus, "local", **settings))
    config = run(tmp_path / "ray", corpus.as_uri(), "ray", **settings)
    got = results(config)
    assert expected["heldout"], "nothing was held out: the test would prove nothing"
    assert manifest(config)["sample"]["share"] < 1
    for what in expected:
        assert got[what] == expected[what], what


def test_pyarrow_uri_sources_same_as_local(tmp_path, corpus, monkeypatch):
    """The corpus read through pyarrow.fs (``RemotePath`` of its ``file://`` URI, as an
    ``s3://`` source is read), ``a.txt`` in byte ranges, with a held-out share: the
    Ray engine's workers open, cut and count it as the local engine reads the paths."""
    settings = {"heldout_share": 0.05, "seed": 4}
    expected = results(run(tmp_path / "local", corpus, "local", **settings))
    monkeypatch.setattr(ray_engine, "RANGE_BYTES", 60_000)
    config = write_config(tmp_path / "ray", [phase("A", 300, {"path": str(corpus)})],
                          special_tokens=["<|endoftext|>"], **settings)
    cfg = load_config(config)
    far = tuple(dataclasses.replace(s, path=RemotePath(s.path.as_uri())) for s in cfg.phases[0].sources)
    cfg = dataclasses.replace(cfg, engine="ray", phases=(dataclasses.replace(cfg.phases[0], sources=far),))
    pipeline.run(cfg, progress=Progress())
    got, m = results(config), manifest(config)
    ranges = -(-(corpus / "a.txt").stat().st_size // 60_000)  # a.txt in ranges of at most 60 kB
    assert m["inputs"]["path"][0].startswith("file://") and m["engine"]["tasks"] >= 3 + ranges, m["engine"]
    for what in expected:
        assert got[what] == expected[what], what


def test_switching_engine_redoes_nothing(tmp_path, corpus):
    config = run(tmp_path / "p", corpus, "local")
    cfg = dataclasses.replace(load_config(config), engine="ray")
    again = pipeline.run(cfg, progress=Progress())
    assert all(m.get("skipped") for m in again["ingest"] + again["train"])


def ray_workers(name: bytes) -> list[int]:
    """Processes whose title names a running task (Ray sets it to ``ray::FUNCTION``)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "cmdline").read_bytes().startswith(name):
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def test_a_killed_task_is_retried_and_counted_once(tmp_path, corpus, monkeypatch):
    expected = results(run(tmp_path / "local", corpus, "local"))
    monkeypatch.setattr(ray_engine, "RANGE_BYTES", 5_000)  # ~60 tasks: time to catch one running
    killed: list[int] = []

    def kill_one() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for pid in ray_workers(b"ray::count_task"):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    killer = threading.Thread(target=kill_one)
    killer.start()
    config = run(tmp_path / "ray", corpus, "ray")
    killer.join()
    assert killed, "no running task was found to kill"
    got = results(config)
    for what in expected:
        assert got[what] == expected[what], what


def descendants(pid: int) -> dict[int, bytes]:
    """Every descendant of ``pid`` now (pid -> start time)."""
    kids: dict[int, list[tuple[int, bytes]]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                rest = (proc / "stat").read_bytes().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            kids.setdefault(int(rest[1]), []).append((int(proc.name), rest[19]))
    out, todo = {}, [pid]
    while todo:
        for child, started in kids.get(todo.pop(), []):
            out[child] = started
            todo.append(child)
    return out


def alive(seen: dict[int, bytes]) -> list[int]:
    """The recorded processes still running (same start time: not a reused pid; zombies aside)."""
    left = []
    for pid, started in seen.items():
        try:
            rest = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if rest[0] != b"Z" and rest[19] == started:
            left.append(pid)
    return left


def stuck_driver(tmp_path: Path):
    """``toktok ingest --engine ray`` on text its custom pattern never finishes: a
    subprocess with a Ray instance of its own; returns it once a task is running,
    with every process it started so far."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "slow.txt").write_text("a" * 80 + " end\n")
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})], pattern=SLOW_PATTERN,
                          pattern_timeout_s=3600, ray={"num_cpus": 1})
    proc = start("ingest", "--engine", "ray", "-c", config)
    seen: dict[int, bytes] = {}

    def running() -> bool:
        seen.update(descendants(proc.pid))
        names = []
        for pid in seen:
            try:
                names.append(Path(f"/proc/{pid}/cmdline").read_bytes())
            except OSError:
                pass
        return (any(n.startswith(b"ray::count_task") for n in names)
                and any(b"RuntimeEnvAgent" in n or b"runtime_env" in n for n in names))

    assert wait_for(running, proc, timeout=90, every=0.1), finish(proc)
    time.sleep(0.5)
    seen.update(descendants(proc.pid))
    return proc, seen


def test_kill_9_of_the_driver_leaves_no_process(tmp_path):
    proc, seen = stuck_driver(tmp_path)
    assert len(seen) >= 5, seen  # the guard, Ray's own processes, a worker
    proc.kill()
    proc.wait()
    assert wait_for(lambda: not alive(seen), None, timeout=30, every=0.2), f"left running: {alive(seen)}"


def test_ctrl_c_exits_130_and_leaves_no_process(tmp_path):
    proc, seen = stuck_driver(tmp_path)
    signal_group(proc, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    result = finish(proc, timeout=60)
    assert result.code == 130, result
    assert "Traceback" not in result.err and result.err.strip().splitlines()[-1].startswith("interrupted"), result.err
    assert wait_for(lambda: not alive(seen), None, timeout=30, every=0.2), f"left running: {alive(seen)}"


def test_a_working_set_above_the_memory_sizes_the_object_store_to_the_machine(tmp_path, corpus):
    """A command of its own (its own Ray instance): 4 TiB asked, as the docs allow,
    gives a store of a share of the memory available, said in one line."""
    config = write_config(tmp_path / "p", [phase("A", 10, {"file": str(corpus / "b.txt")})],
                          working_set_mb=4 << 20, ray={"num_cpus": 1})
    result = cli("ingest", "--engine", "ray", "-c", config)
    assert result.code == 0, result
    notes = [line for line in result.err.splitlines() if "object store" in line]
    assert len(notes) == 1 and "working_set_mb" in notes[0] and "spills" in notes[0], result.err
    assert "less than -" not in result.err


def test_bad_file_fails_with_its_name(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "ok.txt").write_text("hello world\n")
    (data / "bad.txt.gz").write_bytes(b"not gzip at all")
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})])
    cfg = dataclasses.replace(load_config(config), engine="ray")
    with pytest.raises(Exception, match="bad.txt.gz"):
        pipeline.ingest(cfg, progress=Progress())


@pytest.mark.parametrize("weight", [1, 1.5])
def test_heldout_cap_reached_as_the_local_engine_reaches_it(tmp_path, monkeypatch, weight):
    """Held-out text passes the per-phase cap (lowered to 150 kB; the driver hands it
    to the tasks) in the second of five files. Each task held out its candidates up
    to the cap on its own; the driver applies it across them in key order. With an
    integer weight the candidates past the cap are counted from their texts, with a
    fractional one (counts rounded per batch) their files are counted again: either
    way the held-out text and the training text are exactly the local engine's."""
    monkeypatch.setattr(routing, "HELDOUT_CAP_BYTES", 150_000)
    data = tmp_path / "data"
    data.mkdir()
    text = english(1_000_000)
    step = len(text) // 5
    for k in range(5):
        (data / f"{k}.txt").write_text(text[k * step: (k + 1) * step], encoding="utf-8")
    settings = {"heldout_share": 0.5, "seed": 1, "weight": weight}
    local = run(tmp_path / "local", data, "local", **settings)
    expected, counts = results(local), manifest(local)["counts"]
    config = run(tmp_path / "ray", data, "ray", **settings)
    got, m = results(config), manifest(config)
    assert counts["heldout_bytes"] == 150_000 and counts["heldout_truncated"] == 1, counts
    if weight != 1:  # counts rounded per batch: the files past the cap are counted again
        assert m["engine"]["recounted"] > 0, m["engine"]
    elif (SHARED / "english.txt.zst").is_file():
        # prose whose documents are short: every candidate past the cap is counted from its text
        assert m["engine"]["recounted"] == 0, m["engine"]
    for what in expected:
        assert got[what] == expected[what], what
    for key in SAME_COUNTS:
        assert m["counts"][key] == counts[key], key


SAME_COUNTS = ("files", "documents", "units", "units_over_bound", "heldout_documents", "heldout_bytes",
               "heldout_truncated", "sampled_out_documents", "kept_documents", "kept_bytes", "heldout_trained",
               "replaced_chars", "pieces", "special_tokens_found")


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """A 3 MB ``.txt`` (a UTF-8 byte order mark, documents larger than a unit's bound
    at working_set_mb 2, a few invalid bytes at the end) and a small one."""
    data = tmp_path_factory.mktemp("ray-big") / "data"
    data.mkdir()
    (data / "big.txt").write_bytes(b"\xef\xbb\xbf" + english(3_000_000).encode() + b"\n\nbad \xff bytes\n\nend")
    (data / "small.txt").write_text(stdlib_text(100_000), encoding="utf-8")
    return data


@pytest.mark.parametrize("settings", [{"heldout_share": 0.1, "seed": 2},
                                      {"heldout_share": 0.3, "working_set_mb": 2, "seed": 5}],
                         ids=["heldout", "sample+heldout"])
def test_ranges_with_sample_and_heldout_same_as_local(tmp_path, big, monkeypatch, settings):
    """A large ``.txt`` read as byte ranges of two sizes, 1 or 2 tasks at once, with a
    held-out share whose cap (lowered to 150 kB) is reached in the middle of the
    file, and with a sample besides: each range finds the whole file's units (their
    keys are byte offsets from the file's start, after its byte order mark), and the
    inventory, merges, ``.tiktoken``, held-out text and the counts of units are the
    local engine's."""
    monkeypatch.setattr(routing, "HELDOUT_CAP_BYTES", 150_000)
    monkeypatch.setattr(ray_engine, "MIN_RANGE_BYTES", 100_000)
    local = run(tmp_path / "local", big, "local", **settings)
    expected, counts = results(local), manifest(local)["counts"]
    assert counts["heldout_bytes"] == 150_000 and counts["kept_documents"] > 0, counts
    assert (manifest(local)["sample"]["share"] < 1) == ("working_set_mb" in settings)
    for k, (range_bytes, threads) in enumerate([(400_000, 1), (1_300_000, 2)]):
        monkeypatch.setattr(ray_engine, "RANGE_BYTES", range_bytes)
        config = run(tmp_path / f"ray{k}", big, "ray", threads=threads, **settings)
        got, m = results(config), manifest(config)
        assert m["engine"]["tasks"] >= 3_000_000 // range_bytes + 1, m["engine"]  # big.txt in ranges
        for what in expected:
            assert got[what] == expected[what], (what, range_bytes, threads)
        for key in SAME_COUNTS:
            assert m["counts"][key] == counts[key], (key, range_bytes, threads)


def test_a_phase_whose_units_are_all_held_out_trains_on_its_last(tmp_path, monkeypatch):
    """Three documents, each held out by the seed's hash (the seed found here), in
    three byte ranges: as the local engine does, the Ray engine trains on the last
    one (the held-out share never takes a phase's last training unit)."""
    words = " ".join(english(12_000).split())
    docs = [words[i * 3000: (i + 1) * 3000].strip() for i in range(3)]
    offsets = [sum(len(d.encode()) + 2 for d in docs[:i]) for i in range(3)]
    seed = next(s for s in range(1000) if all(sampling.is_heldout(s, "01-a", 0, o, 0.5) for o in offsets))
    data = tmp_path / "data"
    data.mkdir()
    (data / "one.txt").write_text("\n\n".join(docs), encoding="utf-8")
    monkeypatch.setattr(ray_engine, "RANGE_BYTES", 2_500)
    settings = {"heldout_share": 0.5, "seed": seed, "merges": 50}
    local = run(tmp_path / "local", data, "local", **settings)
    expected, counts = results(local), manifest(local)["counts"]
    assert (counts["heldout_trained"], counts["heldout_documents"], counts["kept_documents"]) == (1, 2, 1), counts
    config = run(tmp_path / "ray", data, "ray", **settings)
    got, m = results(config), manifest(config)
    assert m["engine"]["tasks"] >= 3, m["engine"]
    for what in expected:
        assert got[what] == expected[what], what
    for key in SAME_COUNTS:
        assert m["counts"][key] == counts[key], key


def test_the_instance_listens_on_loopback_only(ray_local):
    from tests.conftest import RAY_LOCAL_ENV

    assert RAY_LOCAL_ENV == ray_engine.LOCAL_ENV
    assert ray_local.get_runtime_context().gcs_address.startswith("127.0.0.1:")


def test_joining_a_running_instance(tmp_path, corpus, ray_local):
    """``ray: {address: auto}`` joins the instance ``RAY_ADDRESS`` names (here the
    session's, from another process) and starts no Ray process of its own; the
    instance keeps running after it."""
    expected = results(run(tmp_path / "local", corpus, "local"))
    config = write_config(tmp_path / "ray", [phase("A", 300, {"path": str(corpus)})],
                          special_tokens=["<|endoftext|>"], engine="ray", ray={"address": "auto"})
    env = {**os.environ, "RAY_ADDRESS": ray_local.get_runtime_context().gcs_address}
    proc = subprocess.Popen([str(TOKTOK), "run", "-c", str(config)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    names: set[bytes] = set()
    while proc.poll() is None:
        for pid in descendants(proc.pid):
            try:
                names.add(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0])
            except OSError:
                pass
        time.sleep(0.05)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert not [n for n in names if b"raylet" in n or b"gcs_server" in n], names
    got = results(config)
    for what in expected:
        assert got[what] == expected[what], what
    assert ray_local.get(ray_local.put(7)) == 7  # still running


def test_a_bad_file_skipped_as_the_local_engine_skips_it(tmp_path, corpus):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text(english(50_000), encoding="utf-8")
    (data / "bad.txt.gz").write_bytes(b"not gzip at all")
    expected = results(run(tmp_path / "local", data, "local", on_bad_file="skip"))
    config = run(tmp_path / "ray", data, "ray", on_bad_file="skip")
    got = results(config)
    for what in expected:
        assert got[what] == expected[what], what
    m = manifest(config)
    assert [b["path"] for b in m["counts"]["bad_files"]] == [str(data / "bad.txt.gz")]
    assert m["counts"]["files"] == 1


def test_a_file_failing_after_filling_a_chunk_is_dropped_whole_by_both_engines(tmp_path, monkeypatch):
    """A truncated ``.txt.zst`` whose own counts fill a chunk file before it fails (the
    chunks and the workers' groups made small, so a few MB do it): the local engine
    takes that chunk back, as Ray never counts the file, so both give one tokenizer
    and say the file's text was not kept."""
    import random

    import zstandard

    from toktoktok_stages.ingest import batching, chunking

    monkeypatch.setattr(chunking, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(batching, "GROUP_BATCHES", 1)
    monkeypatch.setattr(batching, "BATCH_TEXT_CHARS", 3_000)
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text(english(50_000), encoding="utf-8")
    rnd = random.Random(0)  # words seen once: the file's own count table passes a chunk early
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9)))
             for _ in range(400_000)]
    documents = "\n\n".join(" ".join(words[i: i + 100]) for i in range(0, len(words), 100))
    packed = zstandard.ZstdCompressor().compress(documents.encode())
    (data / "big.txt.zst").write_bytes(packed[: len(packed) * 9 // 10])  # read in blocks: fails near its end
    local = run(tmp_path / "local", data, "local", on_bad_file="skip")
    ray = run(tmp_path / "ray", data, "ray", on_bad_file="skip")
    expected, got = results(local), results(ray)
    for what in expected:
        assert got[what] == expected[what], what
    for config in (local, ray):
        bad = manifest(config)["counts"]["bad_files"]
        assert [(b["path"], b["text_read_kept"]) for b in bad] == [(str(data / "big.txt.zst"), False)]
        assert manifest(config)["counts"]["files"] == 1


def test_with_on_bad_file_skip_a_file_is_one_task(tmp_path):
    """A file that fails part way is dropped whole by the local engine: read in ranges,
    its ranges read before the failure would count (and it would be listed once per
    failed range), so with ``on_bad_file: skip`` a file is never split."""
    from toktoktok_stages.ingest.ray_units import splittable

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text(english(20_000), encoding="utf-8")
    plans = {}
    for mode in ("fail", "skip"):
        config = write_config(tmp_path / mode, [phase("A", 10, {"path": str(data)})], on_bad_file=mode)
        cfg = load_config(config)
        src = cfg.phases[0].sources[0]
        plans[mode] = splittable(cfg, src, data / "a.txt")
    assert plans == {"fail": True, "skip": False}


def test_a_capped_source_same_as_local(tmp_path, corpus, monkeypatch):
    """``max_bytes:`` on the source (and a held-out share, a sample): the Ray engine,
    with a.txt cut into byte ranges, keeps the units the local engine keeps."""
    monkeypatch.setattr(ray_engine, "RANGE_BYTES", 40_000)
    settings = {"heldout_share": 0.05, "working_set_mb": 1, "seed": 4}
    configs = {}
    for engine in ("local", "ray"):
        config = write_config(tmp_path / engine, [phase("A", 300, {"path": str(corpus), "max_bytes": 250_000})],
                              special_tokens=["<|endoftext|>"], **settings)
        pipeline.run(dataclasses.replace(load_config(config), engine=engine), progress=Progress())
        configs[engine] = config
    expected, got = results(configs["local"]), results(configs["ray"])
    local, ray = manifest(configs["local"]), manifest(configs["ray"])
    (source,) = local["sample"]["sources"]
    assert source["cap_share"] < 0.5 and expected["heldout"] and ray["engine"]["tasks"] > 4
    assert local["sample"] == ray["sample"]
    for what in expected:
        assert got[what] == expected[what], what
    for key in ("units", "kept_documents", "sampled_out_documents", "kept_bytes", "heldout_bytes"):
        assert ray["counts"][key] == local["counts"][key], key
