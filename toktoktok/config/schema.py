"""The configuration schema: what a valid config holds, and nothing that reads a file.

The frozen dataclasses ``load_config`` returns (``Config``, ``Phase``,
``Source``, ``WarmStart``, ``RayOptions``, ``HfSettings``), the keys each
mapping accepts, and the bounds of every numeric key (``BOUNDS``, docs/configuration.md's
table). The fields of ``Config`` and their order are part of every work
folder's keys (``config_fingerprint`` hashes them): a new field goes last,
with a default.

Bounds: far above any real run, low enough that no value makes a step take
more than linear time or memory in it (docs/configuration.md#values).

    >>> BOUNDS["threads"], BOUNDS["heldout_share"]
    ((-1, 1024), (0, 0.5))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the schema imports nothing of the library
    from toktoktok.patterns import Pattern
    from toktoktok.uris import RemotePath


@dataclass(frozen=True)
class Source:
    path: Path | RemotePath  # absolute, resolved against the config file's folder; or a pyarrow.fs URI
    is_dir: bool  # True for `path:` (directory scan), False for `file:`
    text_column: str = "text"
    weight: float = 1.0
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # how a file's text is cut into documents (DOCUMENT_RULES, or SPLIT_ON + the string);
    # None: each file's default. Left out of the fingerprint when None, so older keys hold.
    documents: str | None = field(default=None, metadata={"omit_none": True})
    # a cap on the source's training text, in bytes (a seeded sample of it: ``sampling.CAP``);
    # None: no cap. Left out of the fingerprint when None, so older keys hold.
    max_bytes: int | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True)
class Phase:
    name: str
    # new tokens this phase adds; None only between loading and ``resolve_vocab_size``
    # for the phase that leaves ``merges:`` out with a warm start (its base size is unknown)
    merges: int | None
    sources: tuple[Source, ...]
    index: int  # 1-based position in the config
    slug: str  # e.g. "01-english-general"
    gets_rest: bool = False  # left ``merges:`` out: it gets the rest of ``vocab_size``
    # the phase's own ``pattern:`` (None: the config's); left out of the fingerprint when None
    pattern: Pattern | None = field(default=None, metadata={"omit_none": True})
    # the phase's own ``max_token_words:`` (None: the config's); left out of the fingerprint when None
    max_token_words: int | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True)
class WarmStart:
    file: Path
    special_tokens: dict[str, int] | None = None


@dataclass(frozen=True)
class RayOptions:
    """Where the Ray engine runs: ``address`` None starts a local Ray instance
    with ``num_cpus`` CPUs (None: all); ``"auto"`` or ``"ray://host:port"``
    joins a running cluster (``num_cpus`` is then the cluster's business)."""

    address: str | None = None
    num_cpus: int | None = None


@dataclass(frozen=True)
class HfSettings:
    """``hf:``: the roles given (a role set to null: no token), and two settings."""

    roles: dict[str, str | None] = field(default_factory=dict)
    model_max_length: int | None = None
    chat_template: str | None = None


@dataclass(frozen=True)
class Config:
    path: Path  # the YAML file
    output: Path
    phases: tuple[Phase, ...]
    pattern: Pattern
    work_dir: Path
    working_set_mb: int = 1024
    threads: int = -1
    verbose: bool = False
    special_tokens: tuple[str, ...] = ()
    warm_start: WarmStart | None = None
    hardcoded_merges: bool = True
    seed: int = 0
    min_frequency: int = 2
    heldout_share: float = 0.005
    pad_to_multiple_of: int | None = None
    max_token_bytes: int | None = None
    export_hf: bool = False
    max_piece_bytes: int = 1 << 20
    on_bad_file: str = "fail"
    pattern_timeout_s: float = 10.0  # per MiB of a document, for a custom pattern (regex)
    vocab_size: int | None = None
    hf: HfSettings | None = None
    engine: str = "local"  # where ingest counts: "local" (this machine) or "ray"
    ray: RayOptions = field(default_factory=RayOptions)
    warnings: tuple[str, ...] = field(default=(), compare=False)
    # words a learned token may span (None: any); left out of the fingerprint when None
    max_token_words: int | None = field(default=None, metadata={"omit_none": True})

    def pattern_of(self, phase: Phase) -> Pattern:
        """The pattern ``phase`` counts its pieces with: its own, else the config's."""
        return phase.pattern if phase.pattern is not None else self.pattern

    def max_token_words_of(self, phase: Phase) -> int | None:
        """The words a token ``phase`` learns may span: its own bound, else the config's."""
        return phase.max_token_words if phase.max_token_words is not None else self.max_token_words

    @property
    def tokenizer_pattern(self) -> Pattern:
        """The finished tokenizer's pattern: its last phase's (the one tiktoken runs)."""
        return self.pattern_of(self.phases[-1])


# --------------------------------------------------------------------------
# Keys and bounds
# --------------------------------------------------------------------------

TOP_KEYS = (
    "output", "working_set_mb", "threads", "verbose", "special_tokens", "phases",
    "warm_start", "hardcoded_merges", "pattern", "seed", "work_dir",
    "min_frequency", "heldout_share", "pad_to_multiple_of", "max_token_bytes",
    "export_hf", "max_piece_bytes", "on_bad_file", "pattern_timeout_s", "vocab_size", "hf",
    "engine", "ray", "max_token_words",
)  # fmt: skip
PHASE_KEYS = ("name", "merges", "sources", "pattern", "max_token_words")
SOURCE_KEYS = ("path", "file", "text_column", "weight", "include", "exclude", "documents", "max_bytes")
DOCUMENT_RULES = ("file", "blank-line", "line")  # and {split_on: STRING}, held as SPLIT_ON + STRING
SPLIT_ON = "split-on:"
WARM_START_KEYS = ("file", "special_tokens")
RAY_KEYS = ("address", "num_cpus")
ENGINES = ("local", "ray")
HF_ROLES = ("bos_token", "eos_token", "pad_token", "unk_token")
HF_KEYS = (*HF_ROLES, "model_max_length", "chat_template")

# Where a key belongs when it is written one level off.
OUTPUT_SUFFIX = ".tiktoken"
PATTERN_ALIASES = {"cl100k_base": "cl100k", "o200k_base": "o200k",
                   "r50k_base": "gpt2", "p50k_base": "gpt2"}  # fmt: skip
MAX_MERGES = 2**31 - 1
MAX_SEED = 2**63 - 1
SLUG_MAX_CHARS = 60

# The bounds of every numeric key, checked when the config is read (exit 2).
# Each is far beyond what a real run needs, and each keeps the cost of the
# value sane: no step of a run costs more than linear time in any of them.
MAX_WORKING_SET_MB = 4 * 1024 * 1024  # 4 TiB: plan, sampling and chunk sizes scale with it
MAX_THREADS = 1024  # one worker process each
MAX_MIN_FREQUENCY = 2**63 - 1  # counts are 64-bit
MAX_HELDOUT_SHARE = 0.5
MAX_PAD_TO_MULTIPLE_OF = 65_536  # up to 65,535 reserved special tokens, each costs export time
MAX_PIECE_BYTES = 64 * 1024 * 1024  # a piece is held whole in memory
MIN_PIECE_BYTES = 1024
MAX_TOKEN_BYTES = MAX_PIECE_BYTES  # a token never outgrows a piece
MAX_TOKEN_WORDS = 1 << 20  # a bound on words a token spans (a word has a byte at least: never near)
MAX_WEIGHT = 1_000_000.0  # counts are multiplied by it
MAX_SPECIAL_ID = 2**32 - 2  # tiktoken ranks are u32, u32::MAX is its sentinel
MAX_VOCAB_SIZE = 2**31  # ids 0 to 2**31 - 1, as merges: the phases' arrays are int32
MIN_PATTERN_TIMEOUT_S, MAX_PATTERN_TIMEOUT_S = 0.01, 3600.0
MAX_RAY_CPUS = 1 << 20  # ray.num_cpus: a local instance's CPUs (Ray starts a worker process per CPU)
MAX_MODEL_MAX_LENGTH = 2**31 - 1  # hf.model_max_length: tokens of context, written into tokenizer_config.json

BOUNDS: dict[str, tuple[object, object]] = {
    "working_set_mb": (1, MAX_WORKING_SET_MB),
    "threads": (-1, MAX_THREADS),
    "phases[].merges": (0, MAX_MERGES),
    "min_frequency": (1, MAX_MIN_FREQUENCY),
    "heldout_share": (0, MAX_HELDOUT_SHARE),
    "pad_to_multiple_of": (1, MAX_PAD_TO_MULTIPLE_OF),
    "max_token_bytes": (2, MAX_TOKEN_BYTES),
    "max_token_words": (1, MAX_TOKEN_WORDS),
    "max_piece_bytes": (MIN_PIECE_BYTES, MAX_PIECE_BYTES),
    "seed": (0, MAX_SEED),
    "sources[].weight": ("> 0", MAX_WEIGHT),
    "warm_start.special_tokens ids": (0, MAX_SPECIAL_ID),
    "vocab_size": (257, MAX_VOCAB_SIZE),
    "pattern_timeout_s": (MIN_PATTERN_TIMEOUT_S, MAX_PATTERN_TIMEOUT_S),
    "hf.model_max_length": (1, MAX_MODEL_MAX_LENGTH),
}
"""Every numeric key's (lowest, highest) accepted value, as docs/configuration.md's bounds table shows them."""



def default_work_dir(output: Path) -> Path:
    """``DIR/NAME.tiktoken`` -> ``DIR/NAME.work``.

    >>> default_work_dir(Path("/out/tok.tiktoken")).as_posix()
    '/out/tok.work'
    """
    return output.with_name(output.name[: -len(OUTPUT_SUFFIX)] + ".work")


def slugify(name: str) -> str:
    """Lowercase; runs of anything but [a-z0-9] become "-"; "phase" if nothing is left.

    >>> slugify("English General"), slugify("C++ / Rust!"), slugify("日本語")
    ('english-general', 'c-rust', 'phase')
    """
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:SLUG_MAX_CHARS].rstrip("-") or "phase"
