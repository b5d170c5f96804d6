"""What each stage's output depends on: its settings, and its key.

A key is ``artifacts.key_of`` of a stage's settings (recorded in its
manifest as ``settings``) and of what it reads: ingest, its files'
fingerprints; train, the digest of its phase's chunk files (``pieces``) and
of every earlier phase's merges (``before``); export, the digest of every
phase's merges (``trained``). Upstream digests are ``artifacts.outputs_key``
of upstream manifests, which the stage folder objects (``folders``) read and
check; these functions only put the parts together. A change to what goes
into a key makes every user's work folder redo that stage once, so it is
made only with the reason said in docs/outputs.md.

    >>> settings = {"stage": "train", "merges": 5}
    >>> train_key(settings, pieces="p", before=[]) == key_of({**settings, "pieces": "p", "before": []})
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toktoktok import sampling
from toktoktok.config import Config, Phase, config_fingerprint

from .artifacts import file_digest, key_of

if TYPE_CHECKING:
    from .layout import Fingerprints


def base_description(cfg: Config, base_specials: dict[str, int]) -> dict[str, Any]:
    """What the starting vocabulary depends on, for the stages' keys.

    A warm start's special tokens are the ones it resolves to
    (``base_specials``: config, companion, or a published base's own), not
    only the config's: where they sit decides where new merges start, so a
    work folder trained when they were read otherwise (before cl100k_base was
    recognised, or with another companion) is never taken as current.
    """
    if cfg.warm_start is None:
        return {"hardcoded_merges": cfg.hardcoded_merges}
    return {"warm_start": file_digest(cfg.warm_start.file), "warm_start_special_tokens": base_specials}


def ingest_settings(cfg: Config, phase: Phase, share: float = 1.0, caps: tuple[float, ...] = ()) -> dict[str, Any]:
    """The settings a phase's ingest depends on (recorded in its manifest); ``caps``:
    each source's cap share (``layout.source_caps``), recorded with its ``max_bytes``
    only when a source sets one, so other configs keep the keys they had."""
    capped = {"source_caps": [{"max_bytes": src.max_bytes, "share": cap} for src, cap in zip(phase.sources, caps)]}
    return {
        **(capped if caps else {}),
        "sample_share": share,
        "choice_rule": sampling.RULE,  # of the sample and of the held-out documents
        "stage": "ingest",
        "phase": phase.slug,
        "pattern": cfg.pattern_of(phase).python,
        "cut_at_safe_places": cfg.pattern_of(phase).cut_at_safe_places,
        "cut_at_spaces": cfg.pattern_of(phase).cut_at_spaces,
        "special_tokens": list(cfg.special_tokens),
        "seed": cfg.seed,
        "heldout_share": cfg.heldout_share,
        "max_piece_bytes": cfg.max_piece_bytes,
        "on_bad_file": cfg.on_bad_file,
    }


def ingest_key(cfg: Config, phase: Phase, fingerprints: Fingerprints, share: float = 1.0,
               caps: tuple[float, ...] = ()) -> str:
    """What the ingest of a phase depends on: settings, file fingerprints (a list
    a field), the sample's and the caps' shares."""
    return key_of({**ingest_settings(cfg, phase, share, caps), "files": fingerprints.columns})


def known_merges(phase: Phase) -> int:
    """A phase's merges; RuntimeError for a caller that skipped ``check_ready``, which fits ``vocab_size``."""
    if phase.merges is None:
        raise RuntimeError(f"phase '{phase.name}': its merges (the rest of vocab_size) are not known yet")
    return phase.merges


def train_settings(cfg: Config, phase: Phase, base: dict[str, Any]) -> dict[str, Any]:
    """The settings a phase's training depends on (recorded in its manifest);
    ``base``: ``base_description``."""
    return {
        "stage": "train",
        "phase": phase.slug,
        "base": base,
        "merges": known_merges(phase),
        "min_frequency": cfg.min_frequency,
        "max_token_bytes": cfg.max_token_bytes,
        # only when set: the keys of phases without it stay as they were
        **({"max_token_words": words} if (words := cfg.max_token_words_of(phase)) is not None else {}),
    }


def train_key(settings: dict[str, Any], *, pieces: str, before: list[str]) -> str:
    """What a phase's merges depend on: ``train_settings``, its pieces, the earlier phases' merges."""
    return key_of({**settings, "pieces": pieces, "before": before})


def export_settings(cfg: Config, base: dict[str, Any]) -> dict[str, Any]:
    """The settings export depends on (recorded in its manifest); ``base``: ``base_description``."""
    return {
        "stage": "export",
        "report": "toktoktok-report/1",
        "export_hf": cfg.export_hf,
        "base": base,
        "special_tokens": list(cfg.special_tokens),
        "pad_to_multiple_of": cfg.pad_to_multiple_of,
        "pattern": cfg.tokenizer_pattern.tiktoken,
        "output": str(cfg.output),
        "fingerprint": config_fingerprint(cfg),
    }


def export_key(settings: dict[str, Any], trained: list[str]) -> str:
    """What export depends on: ``export_settings`` and every phase's merges, each current."""
    return key_of({**settings, "trained": trained})
