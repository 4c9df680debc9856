"""Conversion between albert_hf checkpoints and stock transformers ALBERT (model_type "albert", no custom code).

`export_to_transformers` writes an albert_hf model as a checkpoint that `transformers.Albert*` and the Auto classes load
where albert_hf is not installed; stock ALBERT has one set of weights per layer group and no place for a block that
is unshared while the other is shared, so only sharing "all" (any number of groups) and "none" export
(`check_exportable`). `import_official_checkpoint` loads an official ALBERT checkpoint (e.g. "albert/albert-base-v2")
into an albert_hf class and, if asked, saves it as a complete albert_hf checkpoint (remote code, tokenizer, model
card: albert_hf/hub.py).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import transformers
from transformers import PreTrainedTokenizerBase

from .configuration import AlbertConfig
from .hub import CardInfo, check_tokenizer_fits, save_for_hub
from .modeling import AlbertForPreTraining, AlbertModel, AlbertPreTrainedModel

logger = logging.getLogger(__name__)

# Fields of our config that stock transformers' AlbertConfig does not have (or must not inherit).
_ALBERT_HF_ONLY_FIELDS = (
    "sharing",
    "auto_map",
    "model_type",
    "architectures",
    "transformers_version",
    "_name_or_path",
    # adaptive depth: stock ALBERT has no exits and always runs every layer
    "early_exit",
    "early_exit_shared_classifier",
    "early_exit_patience",
    "early_exit_regression_threshold",
    "num_layers_at_inference",
)


def check_exportable(config: AlbertConfig) -> None:
    """Raise unless stock ALBERT can hold these weights: sharing "all" (any number of groups) or "none"."""
    if config.shares("attention") and config.shares("ffn"):
        return
    # sharing="attention" keeps a feed-forward block per layer application, "ffn" an attention block.
    block, modules = {"attention": ("feed-forward", "unshared_ffn"), "ffn": ("attention", "unshared_attention")}[
        config.sharing
    ]
    raise ValueError(
        f"Cannot export sharing={config.sharing!r} to a stock transformers ALBERT checkpoint: it keeps one {block} "
        f"block per layer application (encoder.{modules}.*), which transformers' AlbertModel has no place for. Only "
        "sharing='all' (any num_hidden_groups) and sharing='none' export; share this model as an albert_hf "
        "checkpoint (trust_remote_code=True) instead."
    )


def to_transformers_config(config: AlbertConfig) -> transformers.AlbertConfig:
    """The stock `transformers.AlbertConfig` (model_type "albert") describing the same architecture."""
    check_exportable(config)
    fields = {key: value for key, value in config.to_dict().items() if key not in _ALBERT_HF_ONLY_FIELDS}
    return transformers.AlbertConfig(**fields)


def export_to_transformers(
    model: AlbertPreTrainedModel,
    output_dir: str | os.PathLike,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> Path:
    """Save `model` as a stock transformers ALBERT checkpoint (model_type "albert", no custom code), loadable with
    `transformers.Albert*` / Auto classes by people who never install albert_hf.

    The weights are loaded into transformers' class of the same name with `strict=True`, so a layout difference
    fails here rather than in the user's hands. A tokenizer is saved as transformers' own `AlbertTokenizer` on the
    same `spiece.model`, set to return token_type_ids (transformers 5 omits them by default, which would give
    sentence pairs all-zero segments).
    """
    output_dir = Path(output_dir)
    if model.config.early_exit or model.config.num_layers_at_inference is not None:
        raise ValueError(
            "Stock transformers ALBERT has no exits and runs every layer: export a model with early_exit=False and "
            "num_layers_at_inference=None (its last exit is the usual classifier)."
        )
    stock_config = to_transformers_config(model.config)
    stock_class = getattr(transformers, type(model).__name__)
    stock_model = stock_class(stock_config)
    stock_model.load_state_dict(model.state_dict(), strict=True)
    stock_model.eval().save_pretrained(output_dir)
    if tokenizer is not None:
        check_tokenizer_fits(model, tokenizer)
        _save_stock_tokenizer(tokenizer, output_dir)
    return output_dir


def _save_stock_tokenizer(tokenizer: PreTrainedTokenizerBase, output_dir: Path) -> None:
    vocab_file = getattr(tokenizer, "vocab_file", None)
    if not vocab_file or not os.path.isfile(vocab_file):
        raise ValueError(
            f"Cannot export {type(tokenizer).__name__}: it has no SentencePiece model file (vocab_file="
            f"{vocab_file!r}). Stock ALBERT tokenizers are built on spiece.model."
        )
    with tempfile.TemporaryDirectory() as folder:
        # transformers' AlbertTokenizer builds its fast backend from a folder holding spiece.model.
        Path(folder, "spiece.model").write_bytes(Path(vocab_file).read_bytes())
        stock = transformers.AlbertTokenizer.from_pretrained(
            folder,
            do_lower_case=getattr(tokenizer, "do_lower_case", True),
            keep_accents=getattr(tokenizer, "keep_accents", False),
            model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        )
        stock.save_pretrained(output_dir)


def import_official_checkpoint(
    source: str | os.PathLike,
    output_dir: str | os.PathLike | None = None,
    model_class: type[AlbertPreTrainedModel] = AlbertForPreTraining,
    **from_pretrained_kwargs: Any,
) -> AlbertPreTrainedModel:
    """Load an official ALBERT checkpoint (e.g. "albert/albert-base-v2", or a folder with model_type "albert") into
    an albert_hf class; with `output_dir`, also save it as a complete albert_hf checkpoint (remote code, tokenizer
    when `source` has one, model card).

    Every backbone weight must be in the checkpoint: a missing `albert.*` key raises (a head the checkpoint lacks,
    e.g. a new classifier, is initialised fresh and logged).
    """
    model, loading_info = model_class.from_pretrained(source, output_loading_info=True, **from_pretrained_kwargs)
    missing = loading_info["missing_keys"]
    # AlbertModel's own keys have no "albert." prefix: all of them are backbone keys.
    prefix = "" if model_class is AlbertModel else f"{model.base_model_prefix}."
    missing_backbone = [key for key in missing if key.startswith(prefix)]
    if missing_backbone:
        raise ValueError(
            f"{source} is missing backbone weights {missing_backbone[:5]} ({len(missing_backbone)} in "
            "all): it is not a complete ALBERT checkpoint."
        )
    if missing:
        logger.info("Newly initialised (not in %s): %s", source, ", ".join(missing))
    if output_dir is not None:
        tokenizer = _official_tokenizer(source)
        save_for_hub(model, output_dir, tokenizer=tokenizer, info=CardInfo(base_model=str(source)))
    return model


def _official_tokenizer(source: str | os.PathLike) -> PreTrainedTokenizerBase | None:
    """albert_hf's tokenizer on the checkpoint's spiece.model, or None when the folder has none."""
    from .tokenization import AlbertHFTokenizer

    if os.path.isdir(source) and not os.path.isfile(os.path.join(source, "spiece.model")):
        logger.warning("%s has no spiece.model: the imported checkpoint has no tokenizer.", source)
        return None
    return AlbertHFTokenizer.from_pretrained(source)


__all__ = [
    "check_exportable",
    "export_to_transformers",
    "import_official_checkpoint",
    "to_transformers_config",
]
