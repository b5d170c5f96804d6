"""The work folder: where every stage's artifacts live, what each depends on, and
their checked reading. ``WORK`` is the config's ``work_dir`` (default
``DIR/NAME.work`` beside ``output: DIR/NAME.tiktoken``)::

    WORK/ingest/NN-slug/chunk-00000.arrow ...   piece: binary, count: uint64
    WORK/ingest/NN-slug/heldout.arrow           text: large_string
    WORK/train/NN-slug/merges.arrow             rank, left, right: uint32, bytes, count: uint64
    WORK/train/NN-slug/usage.arrow              id: uint32, count: uint64
    WORK/export/                                the export's manifest (and its staged outputs)
    each stage folder: manifest.json            written last

The stages never import each other: they meet here. ``work.Work`` is a
config's work folder, handed to every stage; ``folders`` its stage folder
objects; ``keys`` what each key is made of; ``layout`` the places and a
phase's inputs; ``ready`` the checks before work; ``locks`` the lock files
(the work folder's, the output set's); ``artifacts`` the files and
manifests; ``peak`` the stages' memory measurement; ``progress`` the
progress line. The outputs beside ``output:`` (``layout.output_set``) are the
``.tiktoken``, its ``.meta.json``, the report files and ``NAME.hf/``.

Importing this package loads numpy, pyarrow and the source readers.
"""

from __future__ import annotations

from .folders import ExportFolder, IngestFolder, StageFolder, TrainFolder, is_damage, new_token_rows, sum_chunks
from .layout import fingerprint, hf_dir, ingest_dir, train_dir
from .work import Work

__all__ = ["ExportFolder", "IngestFolder", "StageFolder", "TrainFolder", "Work", "fingerprint", "hf_dir",
           "ingest_dir", "is_damage", "new_token_rows", "sum_chunks", "train_dir"]
