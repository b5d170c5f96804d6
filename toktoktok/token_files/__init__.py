"""Token files that language-model trainers read: what ``toktok encode`` writes
and ``toktok decode`` reads. One module a layout, its writer beside its reader;
all hold little-endian integer ids, each layout described field by field in
docs/outputs.md (Token shards):

- ``npy``: shards of exactly ``shard_tokens`` ids, a ``.npy`` array each
  (``ShardWriter``; ``np.load`` reads them, ``read_npy`` checks them);
- ``flat``: a flat file of ids with no header, nanoGPT's ``train.bin`` and
  ``val.bin`` (``FlatWriter``, ``read_flat``; ``bin_dtype`` refuses a dtype
  too small for the ids; ``nanogpt_meta``, its ``meta.pkl``);
- ``megatron``: Megatron-LM's indexed dataset, a flat data file and its
  ``.idx`` (``megatron_index``, ``read_megatron_index``; ``read_megatron``
  checks one against the other).

Every writer takes the tokens as they come, ``write(tokens, ends)`` (``ends``:
the offsets just after each document's last token), writes under a
temporary name and renames the complete file into place in ``finish``
(``abort`` drops it), so a trainer never maps a half-written file. Which
files a run writes, and its ``index.json``, are ``toktok encode``'s
(``toktoktok_stages.commands.encode``).
"""

from toktoktok.token_files.flat import BIN_DTYPES, FlatWriter, bin_dtype, nanogpt_meta, read_flat
from toktoktok.token_files.megatron import (
    MEGATRON_CODES,
    MEGATRON_MAGIC,
    MEGATRON_UINT16_BELOW,
    MEGATRON_VERSION,
    MegatronIndex,
    megatron_dtype,
    megatron_index,
    read_megatron,
    read_megatron_index,
)
from toktoktok.token_files.npy import HEADER_BYTES, ShardWriter, npy_header, read_npy, shard_dtype

__all__ = [
    "BIN_DTYPES", "FlatWriter", "bin_dtype", "nanogpt_meta", "read_flat",
    "MEGATRON_CODES", "MEGATRON_MAGIC", "MEGATRON_UINT16_BELOW", "MEGATRON_VERSION", "MegatronIndex",
    "megatron_dtype", "megatron_index", "read_megatron", "read_megatron_index",
    "HEADER_BYTES", "ShardWriter", "npy_header", "read_npy", "shard_dtype",
]
