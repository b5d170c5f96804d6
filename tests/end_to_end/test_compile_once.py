"""numba compiles once, and says so: one compile serves every configuration.

numba compiles a kernel once per argument-type signature and caches each
one. These tests run in subprocesses on a numba cache of their own (a
temporary ``NUMBA_CACHE_DIR``, so the other tests' cache is untouched): with
it empty, ``toktok compile`` fills it; the demo's shape of config, then every
other kind of configuration (no special tokens, a warm start, each source
kind, parquet ``string`` and ``large_string``, a folder, a custom pattern, a
size cap, documents longer than the cutter's part, sampled and whole,
``toktoktok.train`` on strings and on Arrow tables) must write no new cache
entry. A run whose cache lacks a kernel says it compiles; a warm
one does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.processes import TOKTOK

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
COLD = "compiling kernels, once"

# Run in a fresh process: every configuration but the demo's, in process, on tiny files.
SCENARIOS = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    import pyarrow as pa, pyarrow.feather as feather, pyarrow.parquet as pq, zstandard
    import toktoktok
    from toktoktok_stages.pipeline import train_config

    def main(root, warm_base):
        docs = [f"Row {i}: naïve façade, 東京 {i * 91}; it's <b>{'xy' * (i % 5)}</b>\\tend." for i in range(60)]
        text = "\\n\\n".join(docs) + "\\n"
        rows = "".join(json.dumps({"text": d}) + "\\n" for d in docs)
        (root / "t.txt").write_text(text)
        (root / "t.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
        (root / "t.jsonl").write_text(rows)
        pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), root / "s.parquet")
        pq.write_table(pa.table({"text": pa.array(docs, pa.large_string())}), root / "l.parquet")
        feather.write_feather(pa.table({"text": pa.array(docs)}), root / "t.arrow")
        (root / "dir").mkdir()
        (root / "dir" / "a.txt").write_text(text)
        (root / "dir" / "b.jsonl").write_text(rows)
        # a document longer than a unit's bound and the cutter's part (1 MiB): cut where a short one is not
        long_doc = " ".join(docs) * 400
        (root / "long").mkdir()
        (root / "long" / "a.c").write_text(long_doc)
        (root / "long.txt").write_text(long_doc)
        (root / "long.jsonl").write_text(json.dumps({"text": long_doc}) + "\\n")
        pq.write_table(pa.table({"text": pa.array([long_doc, *docs], pa.string())}), root / "long.parquet")
        longs = ("file: long.txt\\n      - file: long.jsonl\\n      - file: long.parquet\\n"
                 "      - path: long\\n        include: ['*.c']\\n        documents: file")
        cases = {
            "no_specials": ("file: t.txt", ""),
            "warm_start": ("file: t.txt", f"warm_start:\\n  file: {json.dumps(warm_base)}\\n"),
            "zst": ("file: t.txt.zst", ""), "jsonl": ("file: t.jsonl", ""),
            "parquet_string": ("file: s.parquet", ""), "parquet_large_string": ("file: l.parquet", ""),
            "arrow": ("file: t.arrow", ""), "folder": ("path: dir", ""),
            "custom_pattern": ("file: t.txt", "pattern: '\\\\w+| ?[^\\\\w\\\\s]+|\\\\s+'\\n"),
            "max_bytes": ("file: t.txt\\n        max_bytes: 500", 'special_tokens: ["<|x|>"]\\n'),
            "long_sampled": (longs, ""), "long_whole": (longs, "heldout_share: 0\\n"),
        }
        for name, (source, extra) in cases.items():
            config = root / f"{name}.yaml"
            config.write_text(f"output: out/{name}.tiktoken\\n{extra}"
                              f"phases:\\n  - name: p\\n    merges: 30\\n    sources:\\n      - {source}\\n")
            train_config(config)
        toktoktok.train(docs, merges=30, special_tokens=["<|endoftext|>"])
        toktoktok.train(pa.table({"text": pa.array(docs, pa.string())}), merges=30)
        toktoktok.train(pa.table({"text": pa.array(docs, pa.large_string())}), merges=30, threads=1)

    if __name__ == "__main__":
        main(Path(sys.argv[1]), sys.argv[2])
''')


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return {**env, "NUMBA_CACHE_DIR": str(cache)}


def _run(argv: list[str], cache: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(cache), cwd=cwd, timeout=1800)
    assert done.returncode == 0, done.stderr
    return done


def _entries(cache: Path) -> set[str]:
    """The compiled kernels in a numba cache: one ``.nbc`` file a signature."""
    return {str(p.relative_to(cache)) for p in cache.rglob("*.nbc")}


def _demo_shaped(folder: Path) -> Path:
    """``configs/demo.yaml`` as it is, its sources swapped for tiny ones of the same kinds."""
    english, code = folder / "english", folder / "code"
    english.mkdir(parents=True)
    code.mkdir()
    (english / "a.txt").write_text("".join(f"Paragraph {i} of plain English text.\n\n" for i in range(80)))
    (english / "b.jsonl").write_text("".join(f'{{"text": "help topic {i}: see also"}}\n' for i in range(80)))
    (code / "c.txt").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(80)))
    config = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    config["output"] = str(folder / "out" / "demo.tiktoken")
    config["phases"][0]["sources"] = [{"path": str(english)}]
    config["phases"][1]["sources"] = [{"path": str(code)}]
    for phase in config["phases"]:
        phase["merges"] = 50
    path = folder / "demo.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A numba cache filled from empty by two ``toktok compile`` started at once (as two
    first runs would); its folder and what each printed, the one that compiled first."""
    cache = tmp_path_factory.mktemp("numba-cache")
    both = [subprocess.Popen([str(TOKTOK), "compile"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=_env(cache)) for _ in range(2)]
    outs = []
    for proc in both:
        out, err = proc.communicate(timeout=1800)
        assert proc.returncode == 0, err
        outs.append(out)
    return cache, sorted(outs, key=lambda out: -int(out.split()[1]))


def test_compile_fills_an_empty_cache(compiled):
    """Every signature compiled is in the cache, by one of two compiles started together
    (the other waits for the cache's lock, then loads them all); run again, it compiles nothing."""
    cache, (out, waited) = compiled
    assert out.startswith("compiled ") and "loaded 0 from numba's cache" in out, out
    entries = _entries(cache)
    assert int(out.split()[1]) == len(entries) > 0
    assert waited.startswith("compiled 0 kernel signatures"), waited
    again = _run([str(TOKTOK), "compile"], cache)
    assert again.stdout.startswith("compiled 0 kernel signatures"), again.stdout
    assert _entries(cache) == entries


def test_every_configuration_reuses_the_first_compile(compiled, tmp_path):
    cache, _ = compiled
    before = _entries(cache)
    demo = _run([str(TOKTOK), "run", "-c", str(_demo_shaped(tmp_path / "demo"))], cache)
    assert COLD not in demo.stderr
    assert _entries(cache) == before
    script = tmp_path / "scenarios.py"
    script.write_text(SCENARIOS)
    (tmp_path / "cases").mkdir()
    _run([sys.executable, str(script), str(tmp_path / "cases"), str(tmp_path / "demo" / "out" / "demo.tiktoken")],
         cache, cwd=ROOT)
    assert len(list((tmp_path / "cases" / "out").glob("*.tiktoken"))) == 12
    assert sorted(_entries(cache) - before) == []


def test_a_cold_run_says_it_compiles_and_a_warm_one_does_not(compiled, tmp_path):
    """A cache without one entry kernel (``jit_cache.ENTRY_KERNELS``) is cold: the run
    says so and compiles ahead in a child; the next run is silent about it."""
    cache = tmp_path / "cache"
    shutil.copytree(compiled[0], cache)
    removed = [p for p in cache.rglob("documents.doc_ends-*") if p.suffix in (".nbi", ".nbc")]
    assert removed
    for path in removed:
        path.unlink()
    config = _demo_shaped(tmp_path / "demo")
    cold = _run([str(TOKTOK), "run", "-c", str(config)], cache)
    assert COLD in cold.stderr and "compiled kernels in" in cold.stderr, cold.stderr
    assert all(path.exists() for path in removed)
    warm = _run([str(TOKTOK), "run", "-c", str(config), "--force"], cache)
    assert COLD not in warm.stderr and "compiled kernels" not in warm.stderr, warm.stderr
