"""The tiny models of the tests.

`TINY_CONFIG` is the tiny ALBERT of the model-level tests: one shared layer group applied 4 times, an embedding size E
below the hidden size H (so the E -> H projection is exercised), H split over several heads, and odd sizes
(vocabulary 99, feed-forward 37) so that no two dimensions can be confused. Files that need other fields override them
by name (`tiny_config(vocab_size=100)`).

The `--config_overrides` of the job tests sit on top of a real preset, so that a whole job runs in seconds on a CPU:
one layer for the fine-tuning jobs (GLUE, NER, SQuAD, multiple choice); two layer applications for pretraining and the
crash/resume tests, which add their own dropout settings.
"""

from __future__ import annotations

TINY_CONFIG = dict(
    vocab_size=99,
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
)

TINY_ONE_LAYER_OVERRIDES = (
    "hidden_size=32,num_attention_heads=2,intermediate_size=64,num_hidden_layers=1,embedding_size=16"
)
TINY_TWO_LAYER_OVERRIDES = (
    "embedding_size=16,hidden_size=32,num_attention_heads=2,intermediate_size=64,num_hidden_layers=2,"
    "max_position_embeddings=64"
)


def tiny_config(**overrides):
    """`AlbertConfig` of [`TINY_CONFIG`] with `overrides`."""
    from albert_hf import AlbertConfig

    return AlbertConfig(**{**TINY_CONFIG, **overrides})
