"""A phase whose tokens cross spaces (a superword phase): how many of its new
tokens span more than one word, what share of the tokens its own text
produces do, and which are produced most.

A word is a run of bytes that are not ASCII white space, as for
``max_token_words`` (``toktoktok.merge.words_reference``). A phase's text is
what ``usage.token_usage`` counts: the inventory it trained on, segmented as
tiktoken would, and its held-out text, encoded with the final vocabulary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toktoktok.merge import words_reference

TOP_SUPERWORDS = 20


def superword_entry(new: list[tuple[bytes, int]], used: np.ndarray, by_rank: dict[int, bytes],
                    show: Any) -> dict[str, Any] | None:
    """The phase entry's ``superwords`` part, or None when none of its new tokens
    spans more than one word. ``new``: the phase's new ``(token, rank)``;
    ``used``: its entry of ``token_usage`` (a count per id); ``show``: how a
    token is written (``document.visible``).

        >>> used = np.array([5.0, 3.0, 2.0])
        >>> e = superword_entry([(b" of the", 2)], used, {0: b"a", 1: b" of", 2: b" of the"}, str)
        >>> e["new_by_words"], e["produced_share"], [t["token"] for t in e["most_produced"]]
        ({'2': 1}, 0.2, ["b' of the'"])
    """
    spans = [words_reference(token) for token, _ in new]
    if max(spans, default=0) <= 1:
        return None
    by_words: dict[str, int] = {}
    for n in sorted(s for s in spans if s > 1):
        by_words[str(n)] = by_words.get(str(n), 0) + 1
    ids = np.flatnonzero(used > 0)
    multi = np.array([i for i in ids.tolist() if words_reference(by_rank.get(i, b"")) > 1], dtype=np.int64)
    total = float(used.sum())
    top = multi[np.argsort(-used[multi], kind="stable")[:TOP_SUPERWORDS]] if len(multi) else multi
    return {
        "new_spanning_words": sum(by_words.values()),
        "new_by_words": by_words,
        "produced_share": round(float(used[multi].sum()) / total, 6) if total else None,
        "most_produced": [{"rank": int(i), "produced": int(used[i]), "words": words_reference(by_rank[int(i)]),
                           "token": show(by_rank[int(i)])} for i in top.tolist()],
    }
