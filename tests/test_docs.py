"""What the README and the docs pages promise a reader, checked: the README
stays short and names every page, its links and anchors lead somewhere, its
first config loads and plans, and the docs' recipe for loading a
``.tiktoken`` with plain tiktoken gives toktoktok's tokenizer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import cli_encoding, english_text, mixed_texts, toktok, write_corpus
from tests.helpers import ROOT
from toktoktok.config import load_config

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300
# the pages the README names, each with one line: every docs page is one of them
PAGES = ["README.md", "configuration.md", "vocabulary.md", "pretokenization.md", "training.md", "outputs.md",
         "cli.md", "token-files.md", "ray.md", "coming-from.md", "performance.md", "guarantees.md",
         "architecture.md", "decisions.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def marked_block(path: Path, marker: str, language: str) -> str:
    """The first fenced block of ``language`` after the HTML comment holding ``marker``."""
    text = path.read_text(encoding="utf-8")
    start = text.index(marker)
    match = re.compile(rf"^```{language}\n(.*?)^```", re.M | re.S).search(text, start)
    assert match, f"{path.name}: no ```{language} block after {marker!r}"
    return match.group(1)


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped, spaces as '-')."""
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_readme_is_short_and_names_every_docs_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    named = {m.split("#")[0].removeprefix("docs/") for m in LINK.findall(text) if m.startswith("docs/")}
    assert set(PAGES) <= named, f"the README does not name {sorted(set(PAGES) - named)}"
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(PAGES), "a docs page the README does not list"
    assert "make test" in text and "make demo" in text  # .ci/run runs make test, as the README says


def test_every_relative_link_leads_to_a_file_and_heading():
    """Links in the README and the docs pages, anchors included: a section moved
    to another page leaves no link to where it was."""
    broken = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_anchor_rule_reads_headings_as_github_does(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A\n## `NAME.meta.json`\n## Ranks 0-255: the bytes\n```\n# not a heading\n```\n## A\n")
    assert anchors(page) == {"a", "namemetajson", "ranks-0-255-the-bytes", "a-1"}


def test_readme_first_config_loads_and_plans(tmp_path):
    """The README's first config, beside the folders it names, loads with the
    config loader and plans to exactly its vocab_size, the last phase getting the rest."""
    config = tmp_path / "my.yaml"
    config.write_text(marked_block(README, "the first config", "yaml"), encoding="utf-8")
    data = tmp_path / "data"
    (data / "english").mkdir(parents=True)
    (data / "english" / "a.txt").write_text(english_text(4_000), encoding="utf-8")
    (data / "code" / "pkg").mkdir(parents=True)
    (data / "code" / "pkg" / "m.py").write_text(mixed_texts()["python.txt"], encoding="utf-8")
    (data / "code" / "notes.md").write_text("# Notes\n\nSee `m.py`.\n", encoding="utf-8")
    pq.write_table(pa.table({"text": ["Grüße aus Köln.", "Zwölf Boxkämpfer jagen Viktor."]}),
                   data / "german.parquet")

    cfg = load_config(config)
    assert [p.name for p in cfg.phases] == ["English", "Code", "German"]
    assert cfg.vocab_size == 32768 and cfg.export_hf

    r = toktok("plan", "-c", config, "--json")
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    assert plan["vocab_size"] == 32768
    blocks = {b["name"]: b["count"] for b in plan["ids"]}
    assert blocks["phase German"] == 32768 - 256 - 1161 - 16000 - 8000 - 4
    assert blocks["special tokens"] == 4
    assert [len(p["files"]) for p in plan["phases"]] == [1, 2, 1]


def test_plain_tiktoken_recipe_gives_toktoktoks_tokenizer(tmp_path):
    """docs/token-files.md's recipe, run where ``import toktoktok`` fails, loads an
    exported .tiktoken as toktoktok.load does: ranks, pattern, special tokens, ids."""
    import toktoktok

    corpus = write_corpus(tmp_path / "corpus")
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    expected = cli_encoding(tmp_path / "run", [{"name": "English", "merges": 300,
                                                "sources": [{"path": str(corpus["english"])}]},
                                               {"name": "Mixed", "merges": 200,
                                                "sources": [{"path": str(corpus["mixed"])}]}],
                            special_tokens=specials, heldout_share=0)
    path = tmp_path / "run" / "out" / "tok.tiktoken"
    assert expected.n_vocab == 256 + 1161 + 500 + 3

    recipe = marked_block(DOCS / "token-files.md", "plain-tiktoken recipe", "python")
    assert recipe.count('"out/demo/demo.tiktoken"') == 1
    texts = [*mixed_texts().values(), "hello world<|endoftext|><|im_start|>user\n12345<|im_end|>"]
    script = "\n".join([
        "import sys",
        "sys.modules['toktoktok'] = None  # the recipe must not need toktoktok",
        recipe.replace('"out/demo/demo.tiktoken"', repr(str(path))),
        "import json",
        f"texts = json.loads({json.dumps(json.dumps(texts))})",
        "print(json.dumps({'n_vocab': enc.n_vocab, 'pattern': enc._pat_str, 'special': enc._special_tokens,",
        "                  'ids': [enc.encode(t, allowed_special='all') for t in texts]}))",
    ])
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["n_vocab"] == expected.n_vocab
    assert got["pattern"] == expected._pat_str
    assert got["special"] == expected._special_tokens == {t: 1917 + i for i, t in enumerate(specials)}
    assert got["ids"] == [expected.encode(t, allowed_special="all") for t in texts]
    assert got["ids"] == [toktoktok.load(path).encode(t, allowed_special="all") for t in texts]
