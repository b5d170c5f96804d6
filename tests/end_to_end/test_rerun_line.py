"""A rerun with nothing changed says so: ``toktok run`` and ``toktok export``
print "up to date, nothing written" where a run that writes prints "wrote"
("up to date, not rewritten" when an earlier stage was redone to the same
result), and the output files are indeed left as they were (bytes and times)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import english_text, toktok, work_of, write_config


def _stamp(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir() if p.is_file()}


def test_a_rerun_with_nothing_changed_says_nothing_was_written(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text(english_text(20_000), encoding="utf-8")
    config = write_config(tmp_path / "p", [{"name": "Only", "merges": 30, "sources": [{"path": str(data)}]}],
                          threads=1, special_tokens=["<|endoftext|>"])
    out = tmp_path / "p" / "out"

    first = toktok("run", "-c", config)
    assert first.code == 0, first.err
    assert first.out.startswith(f"wrote {out / 'tok.tiktoken'}: vocabulary size "), first.out
    before = _stamp(out)

    again = toktok("run", "-c", config)
    assert again.code == 0, again.err
    assert again.out.startswith(f"up to date, nothing written: {out / 'tok.tiktoken'}: vocabulary size "), again.out
    assert "wrote" not in again.out
    export = toktok("export", "-c", config)
    assert export.code == 0, export.err
    assert export.out.startswith(f"export: up to date, nothing written: {out / 'tok.tiktoken'} ("), export.out
    assert _stamp(out) == before

    (work_of(config) / "ingest" / "01-only" / "manifest.json").unlink()  # ingest is redone, to the same counts
    redone = toktok("run", "-c", config)
    assert redone.code == 0, redone.err
    assert redone.out.startswith(f"up to date, not rewritten: {out / 'tok.tiktoken'}: "), redone.out
    assert _stamp(out) == before

    config.write_text(config.read_text().replace("merges: 30", "merges: 31"))
    changed = toktok("run", "-c", config)
    assert changed.code == 0 and changed.out.startswith("wrote "), changed.out
    assert toktok("export", "-c", config, "--force").out.startswith(f"export: {out / 'tok.tiktoken'} (")
