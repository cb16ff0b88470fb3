"""Training-ready output: token files for a trainer, token counts, blends and shuffles.

- :class:`MegatronWriter` tokenizes documents into Megatron-LM's ``.bin``/``.idx`` token
  files, and :func:`merge_megatron` concatenates them into shards;
- :class:`CountTokens` counts each document's tokens (a column, and counters per stage
  and per source);
- :class:`BlendReader` and :func:`blend_datasets` mix sources by weight;
- :class:`Shuffle` shuffles a whole dataset by a seeded key, on the cluster.

The sizes of every writer's files (``target_file_size``) are in
:mod:`curator_dask.io.rollover`; the Megatron format in :mod:`curator_dask.io.megatron`.
"""

from curator_dask.training.blend import BlendError, BlendReader, BlendSource, blend_datasets
from curator_dask.training.counts import CountTokens
from curator_dask.training.shuffle import Shuffle, ShuffleError, shuffle_dataset
from curator_dask.training.writers import MegatronWriter, merge_megatron

__all__ = ["BlendError", "BlendReader", "BlendSource", "CountTokens", "MegatronWriter", "Shuffle",
           "ShuffleError", "blend_datasets", "merge_megatron", "shuffle_dataset"]
