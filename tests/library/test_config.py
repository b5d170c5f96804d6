"""Tests for toktoktok.config: loading, defaults, paths, errors, fingerprints.

Every test writes a real YAML file (and real source folders/files) under
``tmp_path`` and goes through ``load_config``.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from toktoktok.config import (
    Config,
    ConfigError,
    Phase,
    Source,
    WarmStart,
    config_fingerprint,
    effective_settings,
    format_key_path,
    load_config,
    slugify,
)
from toktoktok.patterns import NAMED_PATTERNS

MINIMAL = """\
output: out/tok.tiktoken
phases:
  - name: English General
    merges: 100
    sources:
      - path: data
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A config folder with a source directory, a few source files and a base vocabulary."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("hello world\n")
    (tmp_path / "code").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"text": "hi"}\n')
    (tmp_path / "books.parquet").write_bytes(b"PAR1")
    (tmp_path / "notes.txt.zst").write_bytes(b"")
    (tmp_path / "base.tiktoken").write_text("IQ== 0\n")
    return tmp_path


def write(folder: Path, text: str, name: str = "config.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def load(folder: Path, text: str) -> Config:
    return load_config(write(folder, text))


def error_of(folder: Path, text: str) -> str:
    """The ConfigError message for this config (fails the test if it loads)."""
    path = write(folder, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message, "errors are one line"
    return message


def with_phase(extra_top: str = "", phase_extra: str = "", source: str = "path: data") -> str:
    """MINIMAL with extra top-level lines, extra phase keys, or another source line."""
    return (
        "output: out/tok.tiktoken\n"
        f"{extra_top}"
        "phases:\n"
        "  - name: English General\n"
        "    merges: 100\n"
        f"{phase_extra}"
        "    sources:\n"
        f"      - {source}\n"
    )


# ---------------------------------------------------------------- valid configs


def test_minimal_config_fills_every_default(project: Path) -> None:
    cfg = load(project, MINIMAL)
    assert cfg.path == (project / "config.yaml").resolve()
    assert cfg.output == (project / "out" / "tok.tiktoken").resolve()
    assert cfg.work_dir == (project / "out" / "tok.work").resolve()
    assert cfg.phases == (
        Phase(
            name="English General",
            merges=100,
            sources=(Source(path=(project / "data").resolve(), is_dir=True),),
            index=1,
            slug="01-english-general",
        ),
    )
    assert cfg.pattern == NAMED_PATTERNS["default"]
    assert (cfg.working_set_mb, cfg.threads, cfg.verbose) == (1024, -1, False)
    assert (cfg.special_tokens, cfg.warm_start, cfg.hardcoded_merges) == ((), None, True)
    assert (cfg.seed, cfg.min_frequency, cfg.heldout_share) == (0, 2, 0.005)
    assert (cfg.pad_to_multiple_of, cfg.max_token_bytes, cfg.export_hf) == (None, None, False)
    assert (cfg.max_piece_bytes, cfg.on_bad_file, cfg.warnings) == (1048576, "fail", ())
    src = cfg.phases[0].sources[0]
    assert (src.text_column, src.weight, src.include, src.exclude) == ("text", 1.0, (), ())


def test_the_original_schema_example_loads(project: Path) -> None:
    cfg = load(
        project,
        """\
        output: ./my_tokenizer.tiktoken   # required
        working_set_mb: 4096
        threads: -1
        verbose: false
        special_tokens: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        phases:
          - name: "English General"
            merges: 30000
            sources:
              - path: data
              - file: books.parquet
        """,
    )
    assert cfg.working_set_mb == 4096
    assert cfg.special_tokens == ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
    assert [s.is_dir for s in cfg.phases[0].sources] == [True, False]
    assert cfg.phases[0].sources[1].path == project / "books.parquet"


def test_full_config_with_every_key(project: Path) -> None:
    cfg = load(
        project,
        """\
        output: tok.tiktoken
        working_set_mb: 2048
        threads: 4
        verbose: true
        special_tokens: ["<|endoftext|>", "<|pad|>"]
        phases:
          - name: English General
            merges: 1000
            sources:
              - path: data
                text_column: body
                weight: 2
                include: ["**/*.txt"]
                exclude: ["tmp/*"]
              - file: corpus.jsonl
                weight: 0.5
          - name: Code!
            merges: 0
            sources:
              - {file: notes.txt.zst}
        warm_start:
          file: base.tiktoken
          special_tokens: {"<|endoftext|>": 100257}
        hardcoded_merges: false
        pattern: cl100k
        seed: 42
        work_dir: scratch
        min_frequency: 3
        heldout_share: 0
        pad_to_multiple_of: 128
        max_token_bytes: 16
        export_hf: true
        max_piece_bytes: 4096
        on_bad_file: skip
        """,
    )
    assert cfg.output == project / "tok.tiktoken"
    assert (cfg.working_set_mb, cfg.threads, cfg.verbose) == (2048, 4, True)
    assert cfg.special_tokens == ("<|endoftext|>", "<|pad|>")
    english, code = cfg.phases
    assert english.sources == (
        Source(project / "data", True, "body", 2.0, ("**/*.txt",), ("tmp/*",)),
        Source(project / "corpus.jsonl", False, "text", 0.5),
    )
    assert isinstance(english.sources[0].weight, float)
    assert (code.name, code.merges, code.index, code.slug) == ("Code!", 0, 2, "02-code")
    assert cfg.warm_start == WarmStart(project / "base.tiktoken", {"<|endoftext|>": 100257})
    assert cfg.hardcoded_merges is False
    assert cfg.pattern == NAMED_PATTERNS["cl100k"]
    assert (cfg.seed, cfg.work_dir, cfg.min_frequency) == (42, project / "scratch", 3)
    assert cfg.heldout_share == 0.0 and isinstance(cfg.heldout_share, float)
    assert (cfg.pad_to_multiple_of, cfg.max_token_bytes, cfg.export_hf) == (128, 16, True)
    assert (cfg.max_piece_bytes, cfg.on_bad_file) == (4096, "skip")
    assert cfg.warnings == ("phase 'Code!' has merges: 0: it adds no tokens",)


def test_relative_paths_resolve_against_the_config_folder_not_the_cwd(
    project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "data").mkdir()  # would be found if the cwd were used
    monkeypatch.chdir(elsewhere)
    config = write(project, MINIMAL + "work_dir: ../wd\nwarm_start: {file: base.tiktoken, special_tokens: {}}\n")
    cfg = load_config(config)
    assert cfg.phases[0].sources[0].path == (project / "data").resolve()
    assert cfg.output == (project / "out" / "tok.tiktoken").resolve()
    assert cfg.work_dir == (project.parent / "wd").resolve()
    assert cfg.warm_start is not None and cfg.warm_start.file == (project / "base.tiktoken").resolve()
    assert cfg.path.is_absolute() and cfg.output.is_absolute()


def test_relative_config_path_from_the_cwd(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = project / "configs"
    sub.mkdir()
    write(sub, MINIMAL.replace("path: data", "path: ../data"))
    monkeypatch.chdir(project)
    cfg = load_config("configs/config.yaml")
    assert cfg.phases[0].sources[0].path == (project / "data").resolve()
    assert cfg.output == (sub / "out" / "tok.tiktoken").resolve()


def test_absolute_and_home_paths(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(project))
    text = MINIMAL.replace("path: data", f"path: {project / 'data'}").replace(
        "output: out/tok.tiktoken", "output: ~/home.tiktoken"
    )
    cfg = load_config(write(project / "code", text))
    assert cfg.phases[0].sources[0].path == project / "data"
    assert cfg.output == project / "home.tiktoken"


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("English General", "01-english-general"),
        ("  C++ / Rust!  ", "01-c-rust"),
        ("日本語", "01-phase"),
        ("x" * 100, "01-" + "x" * 60),
    ],
)
def test_phase_slug(project: Path, name: str, slug: str) -> None:
    cfg = load(project, MINIMAL.replace("English General", json.dumps(name)))
    assert cfg.phases[0].slug == slug
    assert cfg.phases[0].name == name


def test_phase_index_and_slug_are_one_based(project: Path) -> None:
    text = MINIMAL + "  - {name: Code, merges: 5, sources: [{path: code}]}\n"
    cfg = load(project, text)
    assert [(p.index, p.slug) for p in cfg.phases] == [(1, "01-english-general"), (2, "02-code")]


def test_slugify_examples() -> None:
    assert slugify("English General") == "english-general"
    assert slugify("--A__b--") == "a-b"
    assert slugify("!!!") == "phase"


def test_format_key_path() -> None:
    assert format_key_path(("phases", 1, "sources", 0, "path")) == "phases[1].sources[0].path"
    assert format_key_path(("warm_start", "special_tokens", "<|x|>")) == "warm_start.special_tokens['<|x|>']"


@pytest.mark.parametrize(
    ("value", "name"),
    [("cl100k", "cl100k"), ("o200k", "o200k"), ("gpt2", "gpt2"), ("default", "default"),
     ("CL100K", "cl100k"), ("cl100k_base", "cl100k"), ("r50k_base", "gpt2"), ("null", "default")],
)  # fmt: skip
def test_pattern_names(project: Path, value: str, name: str) -> None:
    cfg = load(project, MINIMAL + f"pattern: {value}\n")
    assert cfg.pattern == NAMED_PATTERNS[name]


def test_custom_pattern(project: Path) -> None:
    cfg = load(project, MINIMAL + "pattern: '\\p{L}+|\\p{N}|\\s+|.'\n")
    assert cfg.pattern.name == "custom"
    assert cfg.pattern.tiktoken == r"\p{L}+|\p{N}|\s+|."


def test_null_means_not_set_for_optional_collections(project: Path) -> None:
    text = with_phase(
        "special_tokens:\npattern:\nwork_dir: ~\nwarm_start: null\npad_to_multiple_of:\nmax_token_bytes:\n",
        source="{path: data, include: null, exclude: null}",
    )
    cfg = load(project, text)
    assert (cfg.special_tokens, cfg.pattern.name, cfg.warm_start) == ((), "default", None)
    assert cfg.work_dir == project / "out" / "tok.work"
    assert (cfg.pad_to_multiple_of, cfg.max_token_bytes) == (None, None)


def test_yaml12_exponent_numbers_are_numbers(project: Path) -> None:
    cfg = load(project, with_phase("heldout_share: 5e-3\n", source="{path: data, weight: 1e1}"))
    assert cfg.heldout_share == 0.005
    assert cfg.phases[0].sources[0].weight == 10.0


def test_quoted_exponent_stays_a_string(project: Path) -> None:
    message = error_of(project, MINIMAL + 'heldout_share: "5e-3"\n')
    assert "heldout_share must be a number between 0 and 0.5, got '5e-3' (a string)" in message


def test_anchors_aliases_and_merge_keys(project: Path) -> None:
    cfg = load(
        project,
        """\
        output: tok.tiktoken
        phases:
          - &english {name: English, merges: 10, sources: &src [{path: data, weight: 3}]}
          - <<: *english
            name: Again
            sources: *src
        """,
    )
    first, second = cfg.phases
    assert (second.name, second.merges) == ("Again", 10)
    assert second.sources == first.sources and first.sources[0].weight == 3.0


def test_merge_key_list_earlier_mapping_wins(project: Path) -> None:
    cfg = load(
        project,
        """\
        output: tok.tiktoken
        phases:
          - &a {name: A, merges: 1, sources: [{path: data}]}
          - &b {name: B, merges: 2, sources: [{path: code}]}
          - <<: [*b, *a]
            name: C
        """,
    )
    assert (cfg.phases[2].merges, cfg.phases[2].sources) == (2, cfg.phases[1].sources)


def test_utf8_bom_is_accepted(project: Path) -> None:
    path = project / "config.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + MINIMAL.encode())
    assert load_config(path).phases[0].merges == 100


# ---------------------------------------------------------------- warnings


def test_merges_zero_is_a_warning_not_an_error(project: Path) -> None:
    cfg = load(project, MINIMAL.replace("merges: 100", "merges: 0"))
    assert cfg.phases[0].merges == 0
    assert cfg.warnings == ("phase 'English General' has merges: 0: it adds no tokens",)


def test_same_source_twice_is_a_warning(project: Path) -> None:
    cfg = load(project, MINIMAL + "      - path: ./data/\n")
    assert len(cfg.warnings) == 1 and "twice" in cfg.warnings[0] and str(project / "data") in cfg.warnings[0]


def test_warnings_do_not_change_equality(project: Path) -> None:
    a = load(project, MINIMAL)
    b = load(project, MINIMAL + "      - path: data\n")
    assert a != b  # different sources
    c = load(project, MINIMAL)
    assert a == c


# ---------------------------------------------------------------- file-level errors


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_config_path_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file_is_an_error(tmp_path: Path, text: str) -> None:
    assert "config.yaml: the config file is empty" in error_of(tmp_path, text)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"output: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "output: x.tiktoken\nphases:\n  - name: [a, b\n  - merges: 3\n")
    assert re.match(r".*config\.yaml line \d+: invalid YAML: ", message)
    assert "line 4" in message


def test_bad_indentation_names_the_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "output: x.tiktoken\nphases:\n  - name: a\n   merges: 3\n")
    assert "config.yaml line 4: invalid YAML" in message


def test_several_documents_are_refused(tmp_path: Path) -> None:
    message = error_of(tmp_path, "output: a.tiktoken\n---\noutput: b.tiktoken\n")
    assert "line 2: invalid YAML" in message and "single document" in message


@pytest.mark.parametrize(
    ("text", "got"),
    [("- a\n- b\n", "['a', 'b'] (a list)"), ("just text\n", "'just text' (a string)"), ("42\n", "42 (an integer)")],
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, got: str) -> None:
    message = error_of(tmp_path, text)
    assert "config.yaml line 1: the top level must be a mapping" in message
    assert got in message


def test_duplicate_keys_are_refused(project: Path) -> None:
    message = error_of(project, MINIMAL + "output: other.tiktoken\n")
    assert "line 7: output is given twice (lines 1 and 7)" in message


def test_python_tags_are_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"output: !!python/object/apply:os.system ['touch {marker}']\n"
    message = error_of(tmp_path, text)
    assert "line 1: output" in message and "python/object/apply" in message
    assert not marker.exists()


def test_python_tag_on_the_top_level(tmp_path: Path) -> None:
    message = error_of(tmp_path, "!!python/object:os.system {a: 1}\n")
    assert "line 1: the top level uses an unsupported YAML tag" in message


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    assert "refers to itself" in error_of(tmp_path, "output: &a [x, *a]\n")


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    message = error_of(tmp_path, "\n".join(lines) + "\n")
    assert "too large" in message


def test_non_string_key(project: Path) -> None:
    message = error_of(project, MINIMAL + "1: x\n")
    assert "config.yaml line 7: the top level has a key that is not a string: 1 (an integer)" in message


# ---------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MINIMAL + "outptu: x\n", "config.yaml line 7: outptu is not a known key (did you mean 'output'?)"),
        (
            MINIMAL.replace("merges: 100", "merges: 100\n    mergez: 3"),
            "config.yaml line 5: phases[0].mergez is not a known key (did you mean 'merges'?)",
        ),
        (
            MINIMAL + "        text_colum: body\n",
            "config.yaml line 7: phases[0].sources[0].text_colum is not a known key (did you mean 'text_column'?)",
        ),
        (
            MINIMAL + "warm_start:\n  file: base.tiktoken\n  specials: {}\n",
            "config.yaml line 9: warm_start.specials is not a known key (did you mean 'special_tokens'?)",
        ),
        (MINIMAL + "Verbose: true\n", "line 7: Verbose is not a known key (did you mean 'verbose'?)"),
    ],
)
def test_unknown_keys_suggest_the_close_one(project: Path, text: str, expected: str) -> None:
    assert expected in error_of(project, text)


def test_unknown_key_is_reported_before_the_missing_one(project: Path) -> None:
    message = error_of(project, MINIMAL.replace("merges: 100", "merge: 100"))
    assert "line 4: phases[0].merge is not a known key (did you mean 'merges'?)" in message


def test_misplaced_key_says_where_it_belongs(project: Path) -> None:
    message = error_of(project, MINIMAL.replace("merges: 100", "merges: 100\n    weight: 2"))
    assert "line 5: phases[0].weight is not a known key (it belongs in a source, under sources:)" in message


def test_unknown_key_without_a_close_match_lists_the_known_ones(project: Path) -> None:
    message = error_of(project, MINIMAL + "        zzzzzz: 1\n")
    assert "phases[0].sources[0].zzzzzz is not a known key (known keys: path, file, text_column" in message


# ---------------------------------------------------------------- required keys and phases


def test_output_is_required(project: Path) -> None:
    message = error_of(project, MINIMAL.replace("output: out/tok.tiktoken\n", ""))
    assert message.endswith("config.yaml: output is required")


def test_phases_are_required(project: Path) -> None:
    assert "config.yaml: phases is required" in error_of(project, "output: x.tiktoken\n")


@pytest.mark.parametrize("value", ["[]", "null", "{name: a}", "3"])
def test_phases_must_be_a_non_empty_list(project: Path, value: str) -> None:
    message = error_of(project, f"output: x.tiktoken\nphases: {value}\n")
    assert "config.yaml line 2: phases must be a non-empty list of phases" in message


def test_phase_must_be_a_mapping(project: Path) -> None:
    message = error_of(project, "output: x.tiktoken\nphases:\n  - English\n")
    assert "line 3: phases[0] must be a mapping with name:, merges: and sources:, got 'English'" in message


@pytest.mark.parametrize("missing", ["name", "merges", "sources"])
def test_phase_keys_are_required(project: Path, missing: str) -> None:
    lines = {"name": "name: A", "merges": "merges: 3", "sources": "sources: [{path: data}]"}
    body = ", ".join(v for k, v in lines.items() if k != missing)
    first = "{name: Z, merges: 1, sources: [{path: data}]}"
    message = error_of(project, f"output: x.tiktoken\nphases:\n  - {first}\n  - {{{body}}}\n")
    assert f"config.yaml line 4: phases[1].{missing} is required" in message


@pytest.mark.parametrize(
    ("value", "got"),
    [("abc", "'abc' (a string)"), ("-1", "-1 (an integer)"), ("true", "true (a boolean)"),
     ("3.0", "3.0 (a number)"), ("3e4", "30000.0 (a number)"), ("", "null")],
)  # fmt: skip
def test_merges_must_be_a_non_negative_integer(project: Path, value: str, got: str) -> None:
    message = error_of(project, MINIMAL.replace("merges: 100", f"merges: {value}"))
    assert f"config.yaml line 4: phases[0].merges must be an integer >= 0, got {got}" in message


def test_merges_upper_bound(project: Path) -> None:
    message = error_of(project, MINIMAL.replace("merges: 100", "merges: 4294967296"))
    assert "phases[0].merges must be an integer <= 2147483647" in message


@pytest.mark.parametrize("name", ["''", "'   '", "42", "null", "[a]"])
def test_phase_name_must_be_a_non_empty_string(project: Path, name: str) -> None:
    message = error_of(project, MINIMAL.replace("name: English General", f"name: {name}"))
    assert "config.yaml line 3: phases[0].name must be a non-empty string" in message


@pytest.mark.parametrize(
    ("first", "second"), [("English", "english"), ("C", "c++"), ("Web Text", "web-text"), ("Straße", "STRASSE")]
)
def test_phase_names_must_be_unique(project: Path, first: str, second: str) -> None:
    text = (
        "output: x.tiktoken\nphases:\n"
        f"  - {{name: '{first}', merges: 1, sources: [{{path: data}}]}}\n"
        f"  - {{name: '{second}', merges: 1, sources: [{{path: data}}]}}\n"
    )
    message = error_of(project, text)
    assert f"config.yaml line 4: phases[1].name '{second}' is too close to phases[0].name '{first}'" in message


def test_names_without_letters_collide_as_slugs(project: Path) -> None:
    text = (
        "output: x.tiktoken\nphases:\n"
        "  - {name: '***', merges: 1, sources: [{path: data}]}\n"
        "  - {name: '!!!', merges: 1, sources: [{path: data}]}\n"
    )
    assert "phases[1].name '!!!' is too close to phases[0].name '***'" in error_of(project, text)


# ---------------------------------------------------------------- sources


@pytest.mark.parametrize("value", ["[]", "null", "data"])
def test_sources_must_be_a_non_empty_list(project: Path, value: str) -> None:
    message = error_of(project, MINIMAL.replace("sources:\n      - path: data", f"sources: {value}"))
    assert "config.yaml line 5: phases[0].sources must be a non-empty list of sources" in message


def test_source_must_be_a_mapping(project: Path) -> None:
    message = error_of(project, MINIMAL.replace("- path: data", "- data"))
    assert "line 6: phases[0].sources[0] must be a mapping with `path:` (a directory) or `file:`" in message


def test_source_needs_exactly_one_of_path_and_file(project: Path) -> None:
    both = error_of(project, MINIMAL.replace("- path: data", "- {path: data, file: corpus.jsonl}"))
    assert "line 6: phases[0].sources[0] has both `path:` and `file:`" in both
    neither = error_of(project, MINIMAL.replace("- path: data", "- {weight: 2}"))
    assert "line 6: phases[0].sources[0] has neither `path:` and `file:`" in neither


def test_missing_directory_names_key_and_resolved_path(project: Path) -> None:
    message = error_of(project, MINIMAL + "      - path: missing/dir\n")
    assert f"config.yaml line 7: phases[0].sources[1].path does not exist: {project / 'missing' / 'dir'}" in message


def test_missing_file_names_key_and_resolved_path(project: Path) -> None:
    message = error_of(project, MINIMAL + "      - file: ../gone.txt\n")
    assert f"line 7: phases[0].sources[1].file does not exist: {project.parent / 'gone.txt'}" in message


def test_path_that_is_a_file(project: Path) -> None:
    message = error_of(project, MINIMAL.replace("path: data", "path: corpus.jsonl"))
    assert "phases[0].sources[0].path is a file, not a directory" in message and "use `file:`" in message


def test_file_that_is_a_directory(project: Path) -> None:
    message = error_of(project, MINIMAL.replace("path: data", "file: data"))
    assert "phases[0].sources[0].file is a directory, not a file" in message and "use `path:`" in message


@pytest.mark.parametrize("name", ["x.txt", "x.jsonl", "x.parquet", "x.txt.gz", "x.jsonl.zst", "X.TXT", "table.csv",
                                  "main.c", "README"])
def test_readable_file_kinds(project: Path, name: str) -> None:
    (project / name).write_bytes(b"")
    cfg = load(project, MINIMAL.replace("path: data", f"file: {name}"))
    assert cfg.phases[0].sources[0] == Source(project / name, is_dir=False)


@pytest.mark.parametrize("key", ["include", "exclude"])
def test_globs_only_with_a_directory(project: Path, key: str) -> None:
    message = error_of(project, MINIMAL.replace("- path: data", f"- file: corpus.jsonl\n        {key}: ['*.txt']"))
    assert f"line 7: phases[0].sources[0].{key} is only allowed with `path:`" in message


@pytest.mark.parametrize(
    ("value", "where"), [("'*.txt'", "include"), ("[ok, '']", "include[1]"), ("[3]", "include[0]")]
)
def test_globs_must_be_lists_of_strings(project: Path, value: str, where: str) -> None:
    message = error_of(project, MINIMAL.replace("- path: data", f"- path: data\n        include: {value}"))
    assert f"phases[0].sources[0].{where} must be a" in message


@pytest.mark.parametrize(
    ("value", "got"),
    [("0", "0 (an integer)"), ("-1.5", "-1.5 (a number)"), ("true", "true (a boolean)"),
     ("'2'", "'2' (a string)"), (".inf", "inf (a number)"), (".nan", "nan (a number)"), ("", "null")],
)  # fmt: skip
def test_weight_must_be_a_positive_number(project: Path, value: str, got: str) -> None:
    message = error_of(project, MINIMAL.replace("- path: data", f"- path: data\n        weight: {value}"))
    assert f"config.yaml line 7: phases[0].sources[0].weight must be a positive number at most 1,000,000, got {got}" in message


@pytest.mark.parametrize("value", ["''", "3", "null"])
def test_text_column_must_be_a_non_empty_string(project: Path, value: str) -> None:
    message = error_of(project, MINIMAL.replace("- path: data", f"- path: data\n        text_column: {value}"))
    assert "line 7: phases[0].sources[0].text_column must be a non-empty string" in message


# ---------------------------------------------------------------- output and work_dir


@pytest.mark.parametrize("value", ["tok.txt", "tok", ".tiktoken", "tok.tiktoken.bak"])
def test_output_must_end_with_tiktoken(project: Path, value: str) -> None:
    message = error_of(project, MINIMAL.replace("out/tok.tiktoken", value))
    assert "config.yaml line 1: output must be a file name ending in .tiktoken" in message


def test_output_with_trailing_slash_is_normalized(project: Path) -> None:
    cfg = load(project, MINIMAL.replace("out/tok.tiktoken", "tok.tiktoken/"))
    assert cfg.output == project / "tok.tiktoken"


@pytest.mark.parametrize("value", ["3", "''", "[a.tiktoken]", "null"])
def test_output_must_be_a_path_string(project: Path, value: str) -> None:
    message = error_of(project, MINIMAL.replace("out/tok.tiktoken", value))
    assert "config.yaml line 1: output must be a path (a non-empty string)" in message


def test_output_must_not_be_a_directory(project: Path) -> None:
    (project / "dir.tiktoken").mkdir()
    message = error_of(project, MINIMAL.replace("out/tok.tiktoken", "dir.tiktoken"))
    assert f"line 1: output is an existing directory: {project / 'dir.tiktoken'}" in message


def test_work_dir_must_not_be_a_file(project: Path) -> None:
    message = error_of(project, MINIMAL + "work_dir: corpus.jsonl\n")
    assert f"line 7: work_dir exists and is not a directory: {project / 'corpus.jsonl'}" in message


@pytest.mark.parametrize("value", [".", "data", ".."])
def test_work_dir_must_not_hold_the_users_files(project: Path, value: str) -> None:
    message = error_of(project, MINIMAL + f"work_dir: {value}\n")
    assert "config.yaml line 7: work_dir" in message and "it must be a folder of its own" in message


def test_output_must_not_overwrite_the_warm_start_file(project: Path) -> None:
    warm = "warm_start: {file: base.tiktoken, special_tokens: {}}\nwork_dir: wd\n"
    text = MINIMAL.replace("out/tok.tiktoken", "base.tiktoken") + warm
    assert "line 1: output would overwrite the warm-start file" in error_of(project, text)


# ---------------------------------------------------------------- top-level scalars


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("working_set_mb: 0", "working_set_mb must be an integer >= 1, got 0 (an integer)"),
        ("working_set_mb: '512'", "working_set_mb must be an integer >= 1, got '512' (a string)"),
        ("working_set_mb:", "working_set_mb must be an integer >= 1, got null"),
        ("threads: 0", "threads must be -1 (all cores) or an integer >= 1, got 0 (an integer)"),
        ("threads: -2", "threads must be -1 (all cores) or an integer >= 1, got -2"),
        ("threads: true", "threads must be -1 (all cores) or an integer >= 1, got true (a boolean)"),
        ("verbose: 1", "verbose must be true or false, got 1 (an integer)"),
        ("verbose: 'false'", "verbose must be true or false, got 'false' (a string)"),
        ("hardcoded_merges: 0", "hardcoded_merges must be true or false, got 0"),
        ("export_hf: 'yes'", "export_hf must be true or false, got 'yes' (a string)"),
        ("seed: -1", "seed must be an integer >= 0, got -1"),
        ("seed: 1.5", "seed must be an integer >= 0, got 1.5 (a number)"),
        ("seed: 9223372036854775808", "seed must be an integer <= 9223372036854775807"),
        ("min_frequency: 0", "min_frequency must be an integer >= 1, got 0"),
        ("heldout_share: 0.6", "heldout_share must be a number between 0 and 0.5, got 0.6 (a number)"),
        ("heldout_share: -0.1", "heldout_share must be a number between 0 and 0.5, got -0.1"),
        ("heldout_share: true", "heldout_share must be a number between 0 and 0.5, got true (a boolean)"),
        ("pad_to_multiple_of: 0", "pad_to_multiple_of must be an integer >= 1 or null, got 0"),
        ("pad_to_multiple_of: 64.0", "pad_to_multiple_of must be an integer >= 1 or null, got 64.0"),
        ("max_token_bytes: 1", "max_token_bytes must be an integer >= 2 or null, got 1"),
        ("max_piece_bytes: 1023", "max_piece_bytes must be an integer >= 1024, got 1023"),
        ("on_bad_file: ignore", "on_bad_file must be one of fail, skip, got 'ignore' (a string)"),
        ("on_bad_file: skp", "on_bad_file must be one of fail, skip, got 'skp' (a string) (did you mean 'skip'?)"),
        ("on_bad_file: false", "on_bad_file must be one of fail, skip, got false (a boolean)"),
        ("special_tokens: '<|eot|>'", "special_tokens must be a list of strings, got '<|eot|>' (a string)"),
        ("warm_start: base.tiktoken", "warm_start must be a mapping like {file: base.tiktoken}, got 'base.tiktoken'"),
        ("pattern: 3", "pattern must be a name (default, cl100k, o200k, gpt2, default-digits, cl100k-digits, o200k-digits, "
                         "gpt2-digits, superword, superword-digits) or a regex string, got 3"),
        ("pattern: ''", "pattern must be a name"),
        ("work_dir: 3", "work_dir must be a path (a non-empty string), got 3 (an integer)"),
    ],
)
def test_wrong_values_name_key_line_and_value(project: Path, line: str, expected: str) -> None:
    assert f"config.yaml line 7: {expected}" in error_of(project, MINIMAL + line + "\n")


@pytest.mark.parametrize(
    ("line", "attr", "value"),
    [
        ("threads: 1", "threads", 1),
        ("heldout_share: 0.5", "heldout_share", 0.5),
        ("max_token_bytes: 2", "max_token_bytes", 2),
        ("max_piece_bytes: 1024", "max_piece_bytes", 1024),
        ("pad_to_multiple_of: 1", "pad_to_multiple_of", 1),
        ("seed: 0", "seed", 0),
    ],
)
def test_boundary_values_are_accepted(project: Path, line: str, attr: str, value: object) -> None:
    assert getattr(load(project, MINIMAL + line + "\n"), attr) == value


# ---------------------------------------------------------------- pattern


def test_bad_regex_names_pattern(project: Path) -> None:
    message = error_of(project, MINIMAL + "pattern: '(unclosed'\n")
    assert "config.yaml line 7: pattern is not a valid regex" in message


def test_regex_tiktoken_cannot_use_is_refused(project: Path) -> None:
    message = error_of(project, MINIMAL + "pattern: '\\X+|\\s+'\n")  # `regex` knows \X, tiktoken does not
    assert "config.yaml line 7: pattern is a regex tiktoken cannot use" in message


# ---------------------------------------------------------------- special tokens


def test_special_token_empty(project: Path) -> None:
    message = error_of(project, MINIMAL + "special_tokens: ['<|a|>', '']\n")
    assert "config.yaml line 7: special_tokens[1] must be a non-empty string, got ''" in message


def test_special_token_not_a_string(project: Path) -> None:
    message = error_of(project, MINIMAL + "special_tokens:\n  - '<|a|>'\n  - 7\n")
    assert "config.yaml line 9: special_tokens[1] must be a non-empty string, got 7 (an integer)" in message


def test_special_token_repeated(project: Path) -> None:
    message = error_of(project, MINIMAL + "special_tokens:\n  - '<|a|>'\n  - '<|b|>'\n  - '<|a|>'\n")
    assert "config.yaml line 10: special_tokens[2] '<|a|>' repeats special_tokens[0]" in message


@pytest.mark.parametrize("tokens", [["<|end|>", "<|end|>x"], ["<|end|>x", "<|end|>"], ["<|a|>", "<|end|>", "end"]])
def test_special_token_inside_another_names_both(project: Path, tokens: list[str]) -> None:
    message = error_of(project, MINIMAL + f"special_tokens: {json.dumps(tokens)}\n")
    assert "config.yaml line 7: special_tokens[" in message and "overlap" in message
    overlapping = [t for t in tokens if any(t != o and (t in o or o in t) for o in tokens)]
    assert len(overlapping) == 2
    for token in overlapping:
        assert f"special_tokens[{tokens.index(token)}]" in message and repr(token) in message


# ---------------------------------------------------------------- warm start


def test_warm_start_file_must_exist(project: Path) -> None:
    message = error_of(project, MINIMAL + "warm_start:\n  file: gone.tiktoken\n")
    assert f"config.yaml line 8: warm_start.file does not exist: {project / 'gone.tiktoken'}" in message


def test_warm_start_file_is_required(project: Path) -> None:
    message = error_of(project, MINIMAL + "warm_start: {special_tokens: {'<|a|>': 1}}\n")
    assert "config.yaml line 7: warm_start.file is required" in message


def test_warm_start_accepts_a_tokenizer_json(project: Path) -> None:
    (project / "tokenizer.json").write_text("{}")
    cfg = load(project, MINIMAL + "warm_start: {file: tokenizer.json}\n")
    assert cfg.warm_start == WarmStart(project / "tokenizer.json", None)


@pytest.mark.parametrize(
    ("specials", "expected"),
    [
        ("{'<|a|>': -1}", "warm_start.special_tokens['<|a|>'] must be an integer >= 0, got -1"),
        ("{'<|a|>': '5'}", "warm_start.special_tokens['<|a|>'] must be an integer >= 0, got '5' (a string)"),
        ("{'<|a|>': true}", "warm_start.special_tokens['<|a|>'] must be an integer >= 0, got true"),
        ("{'<|a|>': 5, '<|b|>': 5}", "warm_start.special_tokens['<|b|>'] has id 5, already used by '<|a|>'"),
        ("{'': 5}", "warm_start.special_tokens[''] is an empty special token"),
        ("[a]", "warm_start.special_tokens must be a mapping of token: id, got ['a']"),
    ],
)
def test_warm_start_special_tokens(project: Path, specials: str, expected: str) -> None:
    message = error_of(project, MINIMAL + f"warm_start:\n  file: base.tiktoken\n  special_tokens: {specials}\n")
    assert f"config.yaml line 9: {expected}" in message


def test_warm_start_specials_share_names_with_top_level_but_must_not_nest(project: Path) -> None:
    warm = "warm_start: {file: base.tiktoken, special_tokens: {'<|endoftext|>': 9}}\n"
    shared = "special_tokens: ['<|endoftext|>']\n" + warm
    assert load(project, MINIMAL + shared).special_tokens == ("<|endoftext|>",)
    nested = "special_tokens: ['<|end']\n" + warm
    message = error_of(project, MINIMAL + nested)
    assert "warm_start.special_tokens['<|endoftext|>']" in message and "special_tokens[0] '<|end'" in message


# ---------------------------------------------------------------- fingerprint


@pytest.mark.parametrize(
    "change",
    [
        "working_set_mb: 2048",
        "seed: 1",
        "pattern: gpt2",
        "min_frequency: 3",
        "heldout_share: 0",
        "pad_to_multiple_of: 64",
        "max_token_bytes: 8",
        "export_hf: true",
        "max_piece_bytes: 2048",
        "on_bad_file: skip",
        "hardcoded_merges: false",
        "special_tokens: ['<|x|>']",
        "work_dir: elsewhere",
        "warm_start: {file: base.tiktoken, special_tokens: {}}",
    ],
)
def test_fingerprint_changes_with_a_setting(project: Path, change: str) -> None:
    base = config_fingerprint(load(project, MINIMAL))
    assert config_fingerprint(load(project, MINIMAL + change + "\n")) != base


@pytest.mark.parametrize(
    ("old", "new"),
    [("merges: 100", "merges: 101"), ("English General", "English"), ("path: data", "path: code"),
     ("- path: data", "- {path: data, weight: 2}"), ("- path: data", "- {path: data, include: ['*.txt']}"),
     ("out/tok.tiktoken", "out/tok2.tiktoken")],
)  # fmt: skip
def test_fingerprint_changes_with_a_phase_or_source(project: Path, old: str, new: str) -> None:
    assert config_fingerprint(load(project, MINIMAL.replace(old, new))) != config_fingerprint(load(project, MINIMAL))


def test_fingerprint_ignores_verbose_threads_and_the_config_location(project: Path) -> None:
    base = config_fingerprint(load(project, MINIMAL))
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert config_fingerprint(load(project, MINIMAL + "verbose: true\nthreads: 3\n")) == base
    moved = project / "configs"
    moved.mkdir()
    text = MINIMAL.replace("out/tok", "../out/tok").replace("path: data", "path: ../data")
    assert config_fingerprint(load_config(write(moved, text, "other.yaml"))) == base


def test_fingerprint_ignores_warnings_and_is_stable(project: Path) -> None:
    zero = MINIMAL.replace("merges: 100", "merges: 0")
    first, second = load(project, zero), load(project, zero)
    assert first.warnings and config_fingerprint(first) == config_fingerprint(second)


def test_effective_settings(project: Path) -> None:
    cfg = load(project, MINIMAL + "verbose: true\nwarm_start: {file: base.tiktoken, special_tokens: {'<|e|>': 7}}\n")
    settings = effective_settings(cfg)
    assert json.loads(json.dumps(settings)) == settings  # plain JSON values only
    not_settings = {"path", "verbose", "threads", "warnings", "engine", "ray"}  # how a run goes, not what it makes
    assert not not_settings & settings.keys()
    omitted = {f.name for f in Config.__dataclass_fields__.values() if f.metadata.get("omit_none")}  # None here
    expected_keys = {f for f in Config.__dataclass_fields__} - not_settings - omitted
    assert settings.keys() == expected_keys
    assert settings["output"] == str(project / "out" / "tok.tiktoken")
    assert settings["pattern"]["name"] == "default"
    assert settings["warm_start"] == {"file": str(project / "base.tiktoken"), "special_tokens": {"<|e|>": 7}}
    assert settings["phases"][0]["sources"][0] == {
        "path": str(project / "data"), "is_dir": True, "text_column": "text",
        "weight": 1.0, "include": [], "exclude": [],
    }  # fmt: skip
    assert settings["phases"][0]["slug"] == "01-english-general"


def test_engine_and_ray_options(project: Path) -> None:
    """engine: local | ray; ray: {address, num_cpus}; neither changes the fingerprint."""
    plain = load(project, MINIMAL)
    assert plain.engine == "local" and plain.ray.address is None and plain.ray.num_cpus is None
    cfg = load(project, MINIMAL + "engine: ray\nray: {address: auto, num_cpus: 4}\n")
    assert (cfg.engine, cfg.ray.address, cfg.ray.num_cpus) == ("ray", "auto", 4)
    assert config_fingerprint(cfg) == config_fingerprint(plain)
    assert load(project, MINIMAL + "ray: {address: 'ray://head:10001'}\n").ray.address == "ray://head:10001"
    for bad, words in (("engine: spark", "engine must be one of local, ray"),
                       ("ray: {adress: auto}", "did you mean 'address'"),
                       ("ray: {address: 'http://x'}", "must be auto or ray://host:port"),
                       ("ray: {num_cpus: 0}", "num_cpus must be an integer >= 1"),
                       ("ray: 4", "ray must be a mapping")):
        with pytest.raises(ConfigError, match=re.escape(words)):
            load(project, MINIMAL + bad + "\n")


def test_file_uris_are_absolute_and_checked(project: Path) -> None:
    """A file:// URI names a file wherever the config is; it must exist like a path.
    Other schemes are read through pyarrow.fs, for sources only (tests/library/test_uris.py)."""
    target = project / "data" / "with space é.txt"
    target.write_text("hello\n", encoding="utf-8")
    uri = target.as_uri()
    assert "%20" in uri
    cfg = load(project, MINIMAL.replace("- path: data", f"- file: '{uri}'"))
    assert cfg.phases[0].sources[0].path == target
    for bad, words in ((uri.replace("with", "without"), "does not exist"),
                       ("file://relative/x.txt", "names the host 'relative': a file:// URI is a file on this machine"),
                       ("s3:///x.txt", "is a s3:// URI without a bucket or host")):
        with pytest.raises(ConfigError, match=re.escape(words)):
            load(project, MINIMAL.replace("- path: data", f"- file: '{bad}'"))
    with pytest.raises(ConfigError, match=re.escape("is a s3:// URI: only sources are read through pyarrow.fs")):
        load(project, MINIMAL + "work_dir: 's3://bucket/work'\n")


# ------------------------------------------------------------ documents:


@pytest.mark.parametrize("raw, held", [("file", "file"), ("blank-line", "blank-line"), ("line", "line"),
                                       ("{split_on: '<|doc|>'}", "split-on:<|doc|>"), ("null", None)])
def test_documents_rules(project: Path, raw: str, held: str | None) -> None:
    cfg = load(project, MINIMAL.replace("- path: data", f"- path: data\n        documents: {raw}"))
    assert cfg.phases[0].sources[0].documents == held


@pytest.mark.parametrize("raw, wanted", [
    ("paragraph", "phases[0].sources[0].documents must be file, blank-line, line or a mapping {split_on: STRING}, "
                  "got 'paragraph'"),
    ("5", "phases[0].sources[0].documents must be file, blank-line, line"),
    ("{split_on: ''}", "phases[0].sources[0].documents.split_on must be a non-empty string"),
    ("{split_on: 7}", "phases[0].sources[0].documents.split_on must be a non-empty string, got 7 (an integer)"),
    ("{split: x}", "phases[0].sources[0].documents.split is not a known key (did you mean 'split_on'?)"),
    ("{}", "phases[0].sources[0].documents.split_on is required"),
])
def test_documents_errors_name_the_key_and_line(project: Path, raw: str, wanted: str) -> None:
    message = error_of(project, MINIMAL.replace("- path: data", f"- path: data\n        documents: {raw}"))
    assert message.count("line 7: ") == 1 and wanted in message


def test_documents_left_out_keeps_the_fingerprint(project: Path) -> None:
    """A config that does not use documents: has the settings (and so the keys) it always had."""
    cfg = load(project, MINIMAL)
    assert "documents" not in effective_settings(cfg)["phases"][0]["sources"][0]
    given = load(project, MINIMAL.replace("- path: data", "- path: data\n        documents: line"))
    assert effective_settings(given)["phases"][0]["sources"][0]["documents"] == "line"
    assert config_fingerprint(given) != config_fingerprint(cfg)


@pytest.mark.parametrize("source", ["file: corpus.jsonl", "path: rows"])
def test_documents_that_cut_text_refuse_files_of_rows(project: Path, source: str) -> None:
    from toktoktok.config.preflight import preflight

    (project / "rows").mkdir()
    (project / "rows" / "a.txt").write_text("text\n")
    (project / "rows" / "b.jsonl").write_text('{"text": "a row"}\n')
    cfg = load(project, MINIMAL.replace("- path: data", f"- {source}\n        documents: line"))
    with pytest.raises(ConfigError) as info:
        preflight(cfg)
    message = str(info.value)
    assert "line 7: phases[0].sources[0].documents is line, which cuts text files only" in message
    assert ".jsonl (a file of rows" in message and "\n" not in message and info.value.exit_code == 2
    as_rows = load(project, MINIMAL.replace("- path: data", f"- {source}\n        documents: file"))
    assert preflight(as_rows)[0] is as_rows


# ------------------------------------------------------------ max_bytes:


def test_max_bytes_is_read_and_left_out_of_the_fingerprint_when_absent(project: Path) -> None:
    from toktoktok.config import config_fingerprint

    cfg = load(project, MINIMAL.replace("- path: data", "- path: data\n        max_bytes: 5000000"))
    assert cfg.phases[0].sources[0].max_bytes == 5_000_000
    plain = load(project, MINIMAL)
    assert plain.phases[0].sources[0].max_bytes is None
    assert "max_bytes" not in effective_settings(plain)["phases"][0]["sources"][0]
    assert effective_settings(cfg)["phases"][0]["sources"][0]["max_bytes"] == 5_000_000
    assert config_fingerprint(plain) != config_fingerprint(cfg)


@pytest.mark.parametrize("raw, wanted", [
    ("0", "phases[0].sources[0].max_bytes must be an integer >= 1, got 0"),
    ("-5", "phases[0].sources[0].max_bytes must be an integer >= 1, got -5"),
    ("1.5", "phases[0].sources[0].max_bytes must be an integer >= 1, got 1.5"),
    ("500MB", "phases[0].sources[0].max_bytes must be an integer >= 1, got '500MB'"),
    ("true", "phases[0].sources[0].max_bytes must be an integer >= 1, got true (a boolean)"),
])
def test_max_bytes_errors_name_the_key_and_line(project: Path, raw: str, wanted: str) -> None:
    message = error_of(project, MINIMAL.replace("- path: data", f"- path: data\n        max_bytes: {raw}"))
    assert message.count("line 7: ") == 1 and wanted in message, message
