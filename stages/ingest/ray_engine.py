"""Ingest on Ray (``engine: ray``): the phase's files counted by Ray tasks, their
count tables summed in a tree of tasks, the stage then writing its chunk files
and manifest as the local engine does (docs/ray.md; why it is
built so: docs/decisions.md).

Work units (``plan_units``): one task per file, or per byte range of a large
plain ``.txt`` file (``RANGE_BYTES``, cut where a document starts:
``ray_units.plan_spans``) when reading it in ranges gives the same counts
(``ray_units.splittable``). Each task runs ``ray_units.count_unit``: the local
engine's own reading, cutting and counting of one file or range, returning
its count table, tally and held-out units with their keys. Tasks write
nothing, so a task Ray retries after its worker died is counted once. The
tables go up a tree of reduce tasks (``FAN_IN`` each, ``counts.sum_tables``),
so no task holds every table; the driver gets the root.

Sample and held-out share: every unit's choice is a hash of its key (file,
byte offset: ``sampling.RULE``), so a task decides its units as the local
engine does. Only the per-phase held-out cap spans tasks: ``Capper`` applies
it across them in key order, and ``count_all`` keeps the extra work to the
units in flight when the cap is reached.

Where Ray runs: ``Session``. ``threads`` is the number of scanner threads in
each task, and each task asks Ray for that many CPUs: ``num_cpus / threads``
tasks run at once (``threads: -1``, the default, means 1 under Ray).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from toktoktok import counts, sampling
from toktoktok.config import Config, ConfigError, Phase, Source
from toktoktok.sources import TEXT, document_rule, file_format

from ..workdir.progress import Progress
from . import ray_guard, routing
from .batching import has_scanner
from .chunking import Chunker
from .ray_units import UnitResult, add_found, combine_tallies, count_training_texts, count_unit, plan_spans, splittable
from .routing import Tally

RANGE_BYTES = 64 << 20  # a .txt file larger than this is read by several tasks
MIN_RANGE_BYTES = 4 << 20  # a file is cut for idle CPUs only into ranges at least this large
FAN_IN = 8  # tables summed by one reduce task
LONG_TEXT = 1 << 20  # PartCutter's part_chars: a unit's text longer than this may be cut by force where it was fed
STORE_SHARE = 0.3  # a local instance's object store: at most this share of the memory available (Ray's default)
MIN_STORE_MB = 256  # and at least this much, when the share leaves room for it
LOCAL_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # a single-node instance: listen and connect on 127.0.0.1 only
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage statistics sent or announced
    "RAY_AUTH_MODE": "disabled",  # no token written to ~/.ray
}


def import_ray(cfg: Config) -> Any:
    """Ray, or a configuration error saying how to install it (exit 2). Without
    ``ray.address`` the settings of a local instance are set first: Ray reads
    them when it is imported (``toktok plan`` imports it too, to check it is there)."""
    for key, value in LOCAL_ENV.items() if cfg.ray.address is None else ():
        os.environ.setdefault(key, value)
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"engine: ray needs Ray, which cannot be imported ({exc}): "
                          "pip install 'toktoktok[ray]' (or use engine: local)") from None
    return ray


def available_mb() -> int:
    """The memory available now, as Ray measures it (its limits in a container), in MiB."""
    try:
        from ray._private.utils import estimate_available_memory

        return int(estimate_available_memory()) >> 20
    except (ImportError, AttributeError, OSError):  # Ray's private helper moved: the kernel's own count
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20


def object_store_mb(working_set_mb: int, available: int) -> tuple[int, str | None]:
    """A local instance's object store in MiB: what the run needs (``working_set_mb``,
    at least ``MIN_STORE_MB``), but at most ``STORE_SHARE`` of the memory ``available``
    (MiB), so that Ray keeps the rest for its processes (past the store it spills
    to disk); with the line that says so when the share is the limit.

        >>> object_store_mb(2048, 24000)
        (2048, None)
        >>> object_store_mb(4 << 20, 24000)[0]
        7200
    """
    wanted = max(MIN_STORE_MB, working_set_mb)
    cap = max(75, int(available * STORE_SHARE))  # 75 MiB: the smallest store Ray accepts
    if wanted <= cap:
        return wanted, None
    return cap, (f"note: Ray's object store is {cap} MiB ({STORE_SHARE:.0%} of the {available} MiB of memory "
                 f"available), less than the {wanted} MiB working_set_mb asks for: Ray spills the rest to disk")


class Session:
    """Ray for one ingest: started, joined or found already running; ``close``
    stops only what it started.

    Without ``ray.address``, a local instance with ``num_cpus`` CPUs (all when
    left out), bound to 127.0.0.1, its object store ``object_store_mb``, its
    temporary files in a short folder of its own, guarded so that no process
    it starts outlives this one (``ray_guard``); ``address: auto`` or
    ``ray://host:port`` joins a running cluster as it is (nothing sized),
    whose workers must have toktoktok installed and the sources at the same
    paths. An instance already initialised in this process (a test session, a
    notebook) is used as it is and left running.

    The local instance's settings are the prototype's (docs/decisions.md): even
    so Ray takes seconds to start and runs processes of its own besides the
    workers, which no setting removes.
    """

    def __init__(self, cfg: Config) -> None:
        self.owned = False
        self.guard = None
        self.temp: str | None = None
        self.note: str | None = None  # the line saying the object store was made smaller than asked
        ray = self.ray = import_ray(cfg)
        if ray.is_initialized():
            return
        if cfg.ray.address is None:
            store_mb, self.note = object_store_mb(cfg.working_set_mb, available_mb())
            self.temp = tempfile.mkdtemp(prefix="tt-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
            self.guard = ray_guard.start(self.temp)
            ray.init(address="local", num_cpus=cfg.ray.num_cpus, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, object_store_memory=store_mb << 20,
                     _temp_dir=self.temp)  # a short path: Ray's sockets live there (107 bytes at most)
        else:
            ray.init(address=cfg.ray.address, log_to_driver=False, configure_logging=False)
        self.owned = True

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()
            self.owned = False
        ray_guard.stop(self.guard)
        self.guard = None
        if self.temp:
            shutil.rmtree(self.temp, ignore_errors=True)
            self.temp = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Unit:
    """A task's input: file ``index`` of the phase, whole or its bytes ``span``."""

    index: int
    src: Source
    path: Path
    span: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        if self.span is not None:
            return self.span[1] - self.span[0]
        try:
            return self.path.stat().st_size
        except OSError:
            return 0


def plan_units(cfg: Config, files: list[tuple[Source, Path]], cpus: int = 1) -> list[Unit]:
    """The tasks of a phase, in file order (ranges of a file in byte order).

    A splittable file is cut into ranges of equal size, at most ``RANGE_BYTES``
    each, and into more when the phase has fewer files than ``cpus`` (ranges of
    ``MIN_RANGE_BYTES`` at least): 100 MB in one file on 2 CPUs is 2 tasks of 50 MB.
    """
    units = []
    spare = max(1, cpus // max(len(files), 1))
    for index, (src, path) in enumerate(files):
        try:
            size = path.stat().st_size
            parts = max(-(-size // RANGE_BYTES), min(spare, size // MIN_RANGE_BYTES))
            split = parts > 1 and splittable(cfg, src, path)
        except OSError:
            split = False  # the task reports it as the local engine does
        if split:
            units += [Unit(index, src, path, span) for span in plan_spans(path, size, -(-size // parts))]
        else:
            units.append(Unit(index, src, path))
    return units


def count_task(cfg: Config, phase: Phase, unit: Unit, share: float, heldout_before: int, threads: int,
               heldout_cap: int) -> tuple[pa.Table, UnitResult]:
    """What a Ray task runs: the unit's table (to the reduce tree) and the rest (to the driver).

    ``heldout_cap``: the driver's ``routing.HELDOUT_CAP_BYTES``, set in this worker
    process too (a test lowers it in the driver: a worker would not see that).
    """
    from .batching import load_ingest_kernels

    routing.HELDOUT_CAP_BYTES = heldout_cap
    load_ingest_kernels(cfg)  # numba's code, once per worker process (timed apart from the unit)
    result = count_unit(cfg, phase, unit.index, unit.src, unit.path, share, span=unit.span,
                        heldout_before=heldout_before, threads=threads)
    table, result.table = result.table, counts.SCHEMA.empty_table()
    return table, result


def texts_task(cfg: Config, texts: list[str], weight: float, index: int) -> tuple[pa.Table, UnitResult]:
    """What a Ray task counting texts runs (``ray_units.count_training_texts``): the table and the rest."""
    from .batching import load_ingest_kernels

    load_ingest_kernels(cfg)
    result = count_training_texts(cfg, texts, weight, index)
    table, result.table = result.table, counts.SCHEMA.empty_table()
    return table, result


def sum_task(*tables: pa.Table) -> pa.Table:
    """What a reduce task runs: ``counts.sum_tables`` (numba, linear in the rows)."""
    return counts.sum_tables(list(tables))


@dataclass
class Gathered:
    """What the stage reads off the local engine's batcher, from the tasks."""

    forced_cuts: int = 0
    specials_found: dict[str, int] = field(default_factory=dict)
    worker_peaks_kb: dict[int, int] = field(default_factory=dict)
    tasks: int = 0
    recounted: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def read_all(cfg: Config, phase: Phase, files: list[tuple[Source, Path]], chunker: Chunker, tally: Tally,
             heldout: list[str], progress: Progress, share: float) -> Gathered:
    """The Ray engine's ``read_all`` (as ``local.read_all``): every file counted by tasks, the sum fed to
    ``chunker``, ``tally`` and ``heldout`` filled as the local engine fills them."""
    started = time.perf_counter()
    with Session(cfg) as session:
        ray = session.ray
        if session.note:
            progress.note(session.note)
        ready = time.perf_counter()
        threads = cfg.threads if cfg.threads > 0 else 1
        counter = ray.remote(count_task).options(num_returns=2, num_cpus=threads, max_retries=3)
        texter = ray.remote(texts_task).options(num_returns=2, num_cpus=1, max_retries=3)
        summer = ray.remote(sum_task).options(num_cpus=1, max_retries=3)
        cpus = int(ray.cluster_resources().get("CPU", 1)) // threads
        units = plan_units(cfg, files, cpus)
        cap = routing.HELDOUT_CAP_BYTES

        def count(i: int, before: int) -> tuple[Any, Any]:
            return counter.remote(cfg, phase, units[i], share, before, threads, cap)

        capper = Capper(cfg, phase, units, share)
        submitted, results = count_all(ray, count, capper, units, max(2 * cpus, 4), progress)
        extra = [texter.remote(cfg, texts, units[i].src.weight, units[i].index) for i, texts in capper.extra]
        again = unwrap(ray, lambda: ray.get([submitted[i][1] for i, _ in capper.recount]))
        for (i, _), result in zip(capper.recount, again):
            results[i] = result
        last = last_held(results) if sum(r.tally.kept_documents for r in results) == 0 else None
        if last is not None:  # the held-out share never takes a phase's last training unit
            text = train_held(results[last])
            extra.append(texter.remote(cfg, [text], units[last].src.weight, units[last].index))
        extras = unwrap(ray, lambda: ray.get([meta for _, meta in extra]))
        counted = time.perf_counter()
        root = tree(summer, [table for table, _ in submitted] + [table for table, _ in extra])
        table = unwrap(ray, lambda: ray.get(root)) if root is not None else counts.SCHEMA.empty_table()
        summed = time.perf_counter()
    gathered = Gathered(tasks=len(units) + len(capper.recount) + len(extra), recounted=len(capper.recount))
    first_of_file = set()
    parts = []
    for unit, result in zip(units, results):
        part = result.tally
        gathered.forced_cuts += part.forced_cuts
        part.forced_cuts = 0
        part.files = 1 if unit.index not in first_of_file and not part.bad_files else 0
        first_of_file.add(unit.index)
        parts.append(part)
        heldout += result.heldout
        add_found(gathered.specials_found, result.specials_found)
    for result in extras:
        gathered.forced_cuts += result.tally.forced_cuts
        add_found(gathered.specials_found, result.specials_found)
    gathered.specials_found = {tok: gathered.specials_found.get(tok, 0) for tok in cfg.special_tokens}
    total = combine_tallies([tally, *parts])
    for f in dataclasses.fields(Tally):
        setattr(tally, f.name, getattr(total, f.name))
    for bad in total.bad_files:
        progress.note(f"skipped bad file {bad['path']}: {bad['error']}")
    write_chunks(chunker, table)
    gathered.seconds = {"ray_start": round(ready - started, 3), "count": round(counted - ready, 3),
                        "tasks_sum": round(sum(r.seconds for r in results + extras), 3),
                        "tasks_max": round(max((r.seconds for r in results), default=0), 3),
                        "sum": round(summed - counted, 3), "ray_stop": round(time.perf_counter() - summed, 3)}
    gathered.worker_peaks_kb = {}  # task processes are Ray's, reused between tasks: their peaks are not ours
    return gathered


def count_all(ray: Any, count: Any, capper: Capper, units: list[Unit], window: int,
              progress: Progress) -> tuple[list[tuple[Any, Any]], list[UnitResult]]:
    """Every unit counted (``count(i, heldout_before)`` submits unit ``i``), at most
    ``window`` at once, their results settled in unit order as they come
    (``capper``); the tasks' refs (the last for a unit counted again) and results.

    Once the units settled so far hold the cap, every unit submitted after is
    told so (``heldout_before`` = the cap): it holds nothing out, so nothing of
    it is counted twice. Only the units already running when the cap is reached
    return candidates past it, and the driver holds the held-out text of at
    most ``window`` units at a time.
    """
    results: list[UnitResult | None] = [None] * len(units)
    submitted: list[tuple[Any, Any]] = []
    position: dict[Any, int] = {}
    pending: list[Any] = []
    settled = 0
    while settled < len(units):
        while len(submitted) < len(units) and len(pending) < window:
            refs = count(len(submitted), capper.cap if capper.full else 0)
            position[refs[1]] = len(submitted)
            pending.append(refs[1])
            submitted.append(refs)
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            i = position.pop(ref)
            results[i] = unwrap(ray, lambda ref=ref: ray.get(ref))
            progress.update(units[i].size)
        while settled < len(units) and results[settled] is not None:
            redo = capper.step(settled, results[settled])
            if redo is not None:
                submitted[settled] = count(settled, redo)
            settled += 1
    return submitted, results  # type: ignore[return-value]


class Capper:
    """Applies the per-phase held-out cap in key order (unit order: files in order,
    a file's ranges in byte order) as the local engine applies it as it reads,
    one unit's result at a time (``step``).

    Each task counted its unit knowing only whether the cap was reached before
    it, so it held out its candidates while its own held-out bytes were below
    the cap (``sampling.unit_fates``: the one that crosses it cut there). With
    ``before`` bytes held out by the units before it, the phase holds out the
    candidates while ``before`` plus theirs is below the cap: a prefix of the
    unit's. The rest go back to what the sample says (``chosen_at`` of their
    keys): left out, or trained on. Their texts are here, so training on them
    needs no reread when a break in the stream around a unit changes no piece
    (``separable``): they are listed in ``extra``. Otherwise, or when the text
    of one was cut at the unit's own cap, or when one is longer than
    ``LONG_TEXT`` (a unit with no safe place in a grid step, whose forced cuts
    fall where the text was fed), the unit is to be counted again knowing
    ``before`` (``recount``). Every unit's held-out bytes are known here, so
    the units after one counted again need not wait for it.
    """

    def __init__(self, cfg: Config, phase: Phase, units: list[Unit], share: float) -> None:
        self.cfg, self.phase, self.units, self.share = cfg, phase, units, share
        self.cap = routing.HELDOUT_CAP_BYTES
        self.before = 0  # held-out bytes of the units settled so far
        self.recount: list[tuple[int, int]] = []  # (unit, held-out bytes before it)
        self.extra: list[tuple[int, list[str]]] = []  # (unit, texts to train on)

    @property
    def full(self) -> bool:
        """Whether the units settled so far hold the cap: later units hold nothing out."""
        return self.before >= self.cap

    def step(self, i: int, result: UnitResult) -> int | None:
        """Settle unit ``i`` (``result`` changed in place: held-out texts, keys,
        tally); the held-out bytes before it if it must be counted again."""
        tally, texts = result.tally, result.heldout
        if not texts:
            return None
        if self.before == 0:
            self.before = tally.heldout_bytes
            return None
        before = self.before
        last = len(texts) - 1 if tally.heldout_truncated else -1  # a text cut at the unit's own cap
        held, held_bytes, cut, back, short = [], 0, 0, [], False
        for j, text in enumerate(texts):
            data = text.encode("utf-8", "surrogatepass")
            room = self.cap - before - held_bytes
            if room <= 0:
                back.append(j)
            elif len(data) > room or j == last:
                short |= len(data) < room  # the unit's own cut kept less than the phase's room
                held.append(data[:room].decode("utf-8", "ignore"))
                held_bytes, cut = held_bytes + room, 1
            else:
                held.append(text)
                held_bytes += len(data)
        self.before += held_bytes
        unit, keys = self.units[i], result.heldout_keys
        shares = list(zip(sampling.shares_of(self.share, unit.index), (sampling.SAMPLE, sampling.CAP)))  # Router.keep
        train = [j for j in back if all(sampling.chosen(self.cfg.seed, self.phase.slug, unit.index, keys[j][0], share,
                                                        salt=salt, row=keys[j][1]) for share, salt in shares)]
        if (short or last in train or (train and not separable(self.cfg, unit))
                or any(len(texts[j]) > LONG_TEXT for j in train)):
            self.recount.append((i, before))
            return before
        if train:
            self.extra.append((i, [texts[j] for j in train]))
        tally.kept_documents += len(train)
        kept = sum(len(texts[j].encode("utf-8", "surrogatepass")) for j in train)
        tally.kept_bytes += kept
        tally.kept_by_file[unit.index] = tally.kept_by_file.get(unit.index, 0) + kept
        tally.sampled_out_documents += len(back) - len(train)
        tally.heldout_documents, tally.heldout_bytes, tally.heldout_truncated = len(held), held_bytes, cut
        result.heldout, result.heldout_keys = held, keys[: len(held)]
        return None


def separable(cfg: Config, unit: Unit) -> bool:
    """Whether a unit's text counted on its own gives the pieces and counts it gives
    in its file's stream: a row's units are streams of their own; a ``.txt`` unit
    ends at a line-break safe place of the pattern (and no special token
    holds a line break); and the weight is an integer (a fractional weight
    rounds per batch)."""
    if not float(unit.src.weight).is_integer():
        return False
    kind = file_format(unit.path)[0]
    if kind not in ("txt", TEXT) or document_rule(kind, unit.src.documents) not in ("blank-line", "file"):
        return True  # rows, and documents cut by line or split-on: each a stream of its own
    return (has_scanner(cfg.pattern) and cfg.pattern.cut_at_breaks
            and not any("\r" in t or "\n" in t for t in cfg.special_tokens))


def last_held(results: list[UnitResult]) -> int | None:
    """The unit holding the phase's last held-out unit in key order, if any."""
    return next((i for i in range(len(results) - 1, -1, -1) if results[i].heldout), None)


def train_held(result: UnitResult) -> str:
    """Take the unit's last held-out text to train on instead, as
    ``local.train_last_held`` does (its accounting in the unit's tally)."""
    text = result.heldout.pop()
    result.heldout_keys = result.heldout_keys[: len(result.heldout)]
    tally = result.tally
    size = len(text.encode("utf-8", "surrogatepass"))
    tally.heldout_documents -= 1
    tally.heldout_bytes -= size
    tally.kept_documents += 1
    tally.kept_bytes += size
    tally.heldout_trained = 1
    return text


def tree(summer: Any, refs: list) -> Any:
    """The root of a tree of sums over ``refs`` (``FAN_IN`` at a time), all submitted
    at once: Ray starts each sum as soon as its inputs exist. None for no refs.

        >>> class Add:
        ...     def remote(self, *xs): return sum(xs)
        >>> tree(Add(), list(range(20)))
        190
    """
    level = list(refs)
    if not level:
        return None
    while len(level) > 1:
        level = [summer.remote(*level[i: i + FAN_IN]) if len(level[i: i + FAN_IN]) > 1 else level[i]
                 for i in range(0, len(level), FAN_IN)]
    return level[0]


def write_chunks(chunker: Chunker, table: pa.Table) -> None:
    """The summed table as chunk files of about the local engine's chunk size."""
    if not len(table):
        return
    rows = max(1, int(len(table) * chunker.limit / max(counts.table_bytes(table), 1)))
    for start in range(0, len(table), rows):
        chunker.add(table.slice(start, rows), file_index=0)
        chunker.file_done()
        chunker.flush()


def unwrap(ray: Any, get: Any) -> Any:
    """``get()``, a task's own exception raised as itself (a bad file's
    ``SourceError``, a too slow pattern) rather than wrapped by Ray."""
    try:
        return get()
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise
