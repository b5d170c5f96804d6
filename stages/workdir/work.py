"""``Work``: a config's work folder, the one object a command hands its stages.

It gives the stage folder objects (``ingest(phase)``, ``train(phase)``,
``export``: ``folders``), each made once; the starting vocabulary (a warm
start is read once); the vocabulary after phase k, built from the one after
phase k - 1 and phase k's merges; the checks before work (``check_ready``);
and the places of the run (the output set, the publish journal, the lock).

The orchestrator makes one ``Work`` a command, so that within one ``toktok
run`` every key is computed, and every manifest read and checked, once; a
stage run alone makes its own. What a ``Work`` remembers stays true because
every stage folder is emptied and written through its object: beginning one
anew drops the keys and vocabulary derived from it (``forget_after``).

    >>> from toktoktok.config import load_config
    >>> import tempfile, textwrap
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "t.txt").write_text("some text")
    >>> _ = (folder / "c.yaml").write_text(textwrap.dedent('''
    ...     output: out/t.tiktoken
    ...     phases: [{name: English, merges: 10, sources: [{file: t.txt}]}]'''))
    >>> work = Work(load_config(folder / "c.yaml"))
    >>> english = work.cfg.phases[0]
    >>> work.train(english) is work.train(english), len(work.vocab_after(0)), work.finished_stages()
    (True, 1417, [])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toktoktok.config import Config, Phase, Source, preflight
from toktoktok.vocab import Vocab
from toktoktok.warm_start import Base, load_base

from . import keys, layout, ready
from .folders import ExportFolder, IngestFolder, TrainFolder, extend_vocab


class Work:
    """The work folder of ``cfg``: its stage folders and what they share."""

    def __init__(self, cfg: Config, *, base: Base | None = None) -> None:
        self.cfg = cfg
        self._base = base  # the warm start, once read (None: not read yet, or none)
        self.listed: dict[Source, list[Path]] = {}  # each source's files as ``check_ready`` listed them
        self._ingest: dict[int, IngestFolder] = {}
        self._train: dict[int, TrainFolder] = {}
        self._export: ExportFolder | None = None
        self._base_vocab: Vocab | None = None
        self._base_description: dict[str, Any] | None = None
        self._vocab: tuple[int, Vocab] | None = None  # (k, the vocabulary after phases 1..k), the last built

    # ------------------------------------------------------------ the stage folders

    def ingest(self, phase: Phase) -> IngestFolder:
        """``WORK/ingest/NN-slug`` of ``phase`` (this config's phase of that index)."""
        if phase.index not in self._ingest:
            self._ingest[phase.index] = IngestFolder(self, self.cfg.phases[phase.index - 1])
        return self._ingest[phase.index]

    def train(self, phase: Phase) -> TrainFolder:
        """``WORK/train/NN-slug`` of ``phase`` (this config's phase of that index)."""
        if phase.index not in self._train:
            self._train[phase.index] = TrainFolder(self, self.cfg.phases[phase.index - 1])
        return self._train[phase.index]

    @property
    def export(self) -> ExportFolder:
        """``WORK/export``."""
        if self._export is None:
            self._export = ExportFolder(self)
        return self._export

    def phases(self, name: str | None = None) -> list[Phase]:
        """All phases, or the one called ``name`` (case-insensitive; ``ConfigError`` if none)."""
        return layout.select_phases(self.cfg, name)

    def forget_after(self, first: int, *, vocab_from: int | None = None) -> None:
        """A stage folder begins anew: forget the keys of phases ``first``.. and of
        the export, and the vocabulary after phase ``vocab_from`` or later."""
        for index, folder in self._train.items():
            if index >= first:
                folder.forget_key()
        if self._export is not None:
            self._export.forget_key()
        if vocab_from is not None and self._vocab is not None and self._vocab[0] >= vocab_from:
            self._vocab = None

    # ------------------------------------------------------------ the vocabulary

    @property
    def base(self) -> Base | None:
        """The warm start's vocabulary and special tokens, read once (None: no warm start)."""
        if self._base is None and self.cfg.warm_start is not None:
            self._base = load_base(self.cfg.warm_start.file, special_tokens=self.cfg.warm_start.special_tokens)
        return self._base

    def base_vocab(self) -> Vocab:
        """The vocabulary before the first phase: the warm start's, or the bytes and
        (if on) the hardcoded merges."""
        if self._base_vocab is None:
            base = self.base
            self._base_vocab = base.vocab if base is not None else Vocab.initial(hardcoded=self.cfg.hardcoded_merges)
        return self._base_vocab

    def base_special_tokens(self) -> dict[str, int]:
        """The warm start's special tokens with their ids (none without a warm start)."""
        base = self.base
        return dict(base.special_tokens) if base is not None else {}

    def base_description(self) -> dict[str, Any]:
        """What the starting vocabulary depends on, for the keys (``keys.base_description``)."""
        if self._base_description is None:
            self._base_description = keys.base_description(self.cfg, self.base_special_tokens())
        return self._base_description

    def vocab_after(self, last: int) -> Vocab:
        """The vocabulary after phases 1..``last``: the last one built, if not
        beyond ``last``, or the base, extended by the merges files after it."""
        done, vocab = self._vocab if self._vocab is not None and self._vocab[0] <= last else (0, self.base_vocab())
        for phase in self.cfg.phases[done:last]:
            vocab = extend_vocab(vocab, self.train(phase).merges())
        self._vocab = (last, vocab)
        return vocab

    # ------------------------------------------------------------ before and around the work

    def check_ready(self) -> tuple[Work, list[str]]:
        """Everything that can be checked before work starts (``ready``); returns
        the ``Work`` of the config with every phase's merges known, and warnings.

        Raises ConfigError naming the key (and its YAML line) for a warm start
        that is not a usable vocabulary, a source with no readable file (with
        ``on_bad_file: fail``: any listed file that cannot be opened, or a
        broken symbolic link), and an output or work folder that cannot be
        written. With a warm start, ``vocab_size`` is fitted here, where the
        base is read, so that ``--help`` and a typo never wait for it: its
        size is its highest id + 1, gaps and special tokens included. A ``hf:``
        role naming one of the base's own special tokens is checked here too.
        """
        listed: dict[Source, list[Path]] = {}
        cfg, warnings = preflight(self.cfg, listed)
        ready.check_writable(cfg)
        work = Work(cfg)
        work.listed = listed
        return work, warnings

    def output_set(self) -> list[Path]:
        """Every file an export writes beside ``output:`` (``layout.output_set``)."""
        return layout.output_set(self.cfg)

    @property
    def publish_journal(self) -> Path:
        """``WORK/export/publish.json``: the record of a publish under way."""
        return layout.publish_journal(self.cfg)

    @property
    def lock(self) -> Path:
        """``WORK/.lock``: locked by the run using the work folder."""
        return layout.lock_path(self.cfg)

    @property
    def output_lock(self) -> Path:
        """``DIR/.NAME.lock``: locked by the export publishing to ``output:`` (any config's)."""
        return layout.output_lock(self.cfg)

    def finished_stages(self) -> list[str]:
        """The stages with a manifest in the work folder now (their artifacts are complete)."""
        done = [f"ingest {p.name!r}" for p in self.cfg.phases if self.ingest(p).finished()]
        done += [f"train {p.name!r}" for p in self.cfg.phases if self.train(p).finished()]
        return done + (["export"] if self.export.finished() else [])
