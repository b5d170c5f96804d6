"""A stage run alone checks everything it depends on (docs/cli.md).

``toktok train`` and ``toktok export`` compare the key each upstream
artifact was made with against the key the config gives now: a change to
anything ingest's key covers (pattern, a source's path, seed, heldout_share,
special_tokens, max_piece_bytes, on_bad_file), or two phases' ingest folders
swapped (manifests included), makes both exit 1 naming the phase, the stage
and the command that redoes it, and nothing is published. A change to what
training covers makes export (and a later phase's training) name the
training command. ``toktok run`` redoes what is stale and succeeds (one case:
each run costs a training and an export).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SPECIALS, english_text, output_of, toktok, work_of, write_config


def _phases(data: Path, b_file: str = "b.txt") -> list[dict]:
    return [{"name": "A", "merges": 60, "sources": [{"file": str(data / "a.txt")}]},
            {"name": "B", "merges": 40, "sources": [{"file": str(data / b_file)}]}]


BASE = {"threads": 1, "special_tokens": SPECIALS, "heldout_share": 0.05}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """Two phases, run once; the data has a third file for a changed source path."""
    root = tmp_path_factory.mktemp("stale")
    data = root / "data"
    data.mkdir()
    (data / "a.txt").write_text(english_text(60_000))
    (data / "b.txt").write_text(english_text(40_000, offset=70_000))
    (data / "c.txt").write_text("def f(x):\n    return [y ** 2 for y in range(x)]\n" * 800)
    config = write_config(root / "p", _phases(data), **BASE)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    return root / "p", data


def _copy(project: tuple[Path, Path], dst: Path, b_file: str = "b.txt", **settings) -> Path:
    """A copy of the project run once, its config rewritten with ``settings``."""
    folder, data = project
    subprocess.run(["cp", "-a", str(folder), str(dst)], check=True)
    return write_config(dst, _phases(data, b_file), **{**BASE, **settings})


INGEST_CHANGES = {
    "pattern": ({"pattern": "gpt2"}, "A"),
    "source path": ({"b_file": "c.txt"}, "B"),
    "seed": ({"seed": 5}, "A"),
    "heldout_share": ({"heldout_share": 0.2}, "A"),
    "special_tokens": ({"special_tokens": [*SPECIALS, "the"]}, "A"),
    "max_piece_bytes": ({"max_piece_bytes": 2048}, "A"),
    "on_bad_file": ({"on_bad_file": "skip"}, "A"),
}


def _refused(r, phase: str, stage: str, config: Path) -> None:
    assert r.code == 1, (r.code, r.out, r.err)
    line = r.err.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert f"phase '{phase}'" in line and stage in line, line
    assert f"toktok {stage} -c {config} --phase '{phase}'" in line, line


@pytest.mark.parametrize("case", list(INGEST_CHANGES))
def test_train_and_export_alone_refuse_a_stale_ingest(tmp_path, project, case):
    settings, phase = INGEST_CHANGES[case]
    config = _copy(project, tmp_path / "p", **settings)
    published = output_of(config).read_bytes()
    merges = (work_of(config) / "train" / "01-a" / "merges.arrow").read_bytes()
    _refused(toktok("train", "-c", config), phase, "ingest", config)
    _refused(toktok("export", "-c", config), phase, "ingest", config)
    assert output_of(config).read_bytes() == published, "nothing is published"
    assert (work_of(config) / "train" / "01-a" / "merges.arrow").read_bytes() == merges


def test_swapped_ingest_folders_are_refused(tmp_path, project):
    config = _copy(project, tmp_path / "p")
    ingest = work_of(config) / "ingest"
    (ingest / "01-a").rename(ingest / "swap")
    (ingest / "02-b").rename(ingest / "01-a")
    (ingest / "swap").rename(ingest / "02-b")
    _refused(toktok("train", "-c", config), "A", "ingest", config)
    # B trains on A's vocabulary: the first stale artifact it depends on is A's ingest
    _refused(toktok("train", "-c", config, "--phase", "B"), "A", "ingest", config)
    _refused(toktok("export", "-c", config), "A", "ingest", config)
    assert toktok("run", "-c", config).code == 0
    assert output_of(config).read_bytes() == output_of(project[0] / "config.yaml").read_bytes()


def test_a_stale_earlier_training_is_refused(tmp_path, project):
    """Phase A's training settings change: training B alone, or exporting, names A's training."""
    config = _copy(project, tmp_path / "p")
    config.write_text(config.read_text().replace("merges: 60", "merges: 70"))
    _refused(toktok("train", "-c", config, "--phase", "B"), "A", "train", config)
    _refused(toktok("export", "-c", config), "A", "train", config)


def test_another_phases_ingest_folder_in_its_place_is_refused(tmp_path, project):
    """Phase B's folder replaced by phase A's (manifest included); A is current."""
    config = _copy(project, tmp_path / "p")
    ingest = work_of(config) / "ingest"
    shutil.rmtree(ingest / "02-b")
    shutil.copytree(ingest / "01-a", ingest / "02-b")
    _refused(toktok("train", "-c", config, "--phase", "B"), "B", "ingest", config)
