"""Conversion between albert_hf checkpoints and stock transformers ALBERT (model_type "albert", no custom code).

Every save is stock by default (`AlbertConfig.stock_albert_problems`, `albert_hf.formats`): `save_pretrained` of a
model that transformers' ALBERT describes writes transformers' folder. This module holds the explicit conversions:

- [`export_to_transformers`] writes a model through transformers' own class, loaded with `strict=True`, so a layout
  difference fails here rather than in a user's hands; models stock ALBERT cannot hold (another sharing, exits) are
  refused ([`check_exportable`]);
- [`import_official_checkpoint`] loads an official ALBERT checkpoint (e.g. "albert/albert-base-v2") into an albert_hf
  class and, if asked, saves it as a complete folder (tokenizer and model card: albert_hf/hub.py);
- [`add_sentence_transformers_layout`] and [`export_sentence_transformer`] add sentence-transformers' files to a
  stock folder, so that `SentenceTransformer(folder)` embeds with the model's mean pooling (`albert-hf export
  --format sentence-transformers`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import PreTrainedTokenizerBase

from .configuration import AlbertConfig
from .errors import UserError
from .formats import load_tokenizer, stock_tokenizer_problem, tokenizer_kind
from .hub import CardInfo, check_tokenizer_fits, save_for_hub, write_model_card
from .modeling import AlbertForPreTraining, AlbertModel, AlbertPreTrainedModel

logger = logging.getLogger(__name__)


def check_exportable(config: AlbertConfig) -> None:
    """Raise unless transformers' own ALBERT describes this config (`AlbertConfig.stock_albert_problems`): sharing
    "all" (any number of groups) or "none", no exits, no fixed depth at inference."""
    problems = config.stock_albert_problems([])
    if problems:
        raise UserError(
            f"Cannot export to a stock transformers ALBERT checkpoint: {'; '.join(problems)}. Only sharing='all' "
            "(any num_hidden_groups) and sharing='none' export, without exits; share this model as an albert_hf "
            "checkpoint (trust_remote_code=True) instead."
        )


def to_transformers_config(config: AlbertConfig) -> transformers.AlbertConfig:
    """The stock `transformers.AlbertConfig` (model_type "albert") of the same weights (`AlbertConfig.to_stock_albert`:
    albert_hf's own fields left out, exits included, which stock ALBERT does not have)."""
    return config.to_stock_albert()


def export_to_transformers(
    model: AlbertPreTrainedModel,
    output_dir: str | os.PathLike,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> Path:
    """Save `model` as a stock transformers ALBERT checkpoint (model_type "albert", no custom code), loadable with
    `transformers.Albert*` / Auto classes by people who never install albert_hf.

    The weights are loaded into transformers' class of the same name with `strict=True`, so a layout difference
    fails here rather than in the user's hands. A tokenizer is saved in transformers' tokenizer format (an
    `AlbertHFTokenizer` as its stock files: `tokenizer.json`, with `spiece.model` beside; a `BertTokenizer` as it
    is); one that format cannot express is refused.
    """
    output_dir = Path(output_dir)
    check_exportable(model.config)
    if tokenizer is not None:
        check_tokenizer_fits(model, tokenizer)
        problem = stock_tokenizer_problem(tokenizer)
        if problem is not None:
            raise UserError(f"Cannot export the tokenizer to transformers' tokenizer format: {problem}.")
    stock_config = to_transformers_config(model.config)
    stock_class = getattr(transformers, type(model).__name__)
    stock_model = stock_class(stock_config)
    stock_model.load_state_dict(model.state_dict(), strict=True)
    stock_model.eval().save_pretrained(output_dir)
    if tokenizer is not None:
        tokenizer.save_pretrained(output_dir)  # beside a stock config.json: transformers' format
    return output_dir


def import_official_checkpoint(
    source: str | os.PathLike,
    output_dir: str | os.PathLike | None = None,
    model_class: type[AlbertPreTrainedModel] = AlbertForPreTraining,
    **from_pretrained_kwargs: Any,
) -> AlbertPreTrainedModel:
    """Load an official ALBERT checkpoint (e.g. "albert/albert-base-v2", or a folder with model_type "albert") into
    an albert_hf class; with `output_dir`, also save it as a complete folder (weights, tokenizer when `source` has
    one, model card), in transformers' own format where stock ALBERT describes the model, as every save is.

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
    """The checkpoint's tokenizer (`albert_hf.formats.load_tokenizer`: albert_hf's on spiece.model, BERT's on a
    WordPiece vocabulary), or None when the folder holds none."""
    try:
        tokenizer_kind(source)
    except FileNotFoundError:  # MissingFileError: no tokenizer files
        logger.warning("%s has no tokenizer (spiece.model, vocab.txt): the imported checkpoint has none.", source)
        return None
    return load_tokenizer(source)


# --------------------------------------------------------------------------------------------------------------------
# sentence-transformers
# --------------------------------------------------------------------------------------------------------------------

# How sentence-transformers pools the token embeddings into one vector, by `pooling` name: the key of
# `1_Pooling/config.json` that turns it on.
POOLING_MODES = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens"}
# The files `add_sentence_transformers_layout` writes.
SENTENCE_TRANSFORMERS_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
    "2_Normalize",
)
# The version of sentence-transformers whose layout is written: the layout of its Hub models (paraphrase-albert-small-v2,
# SetFit bodies), which every release since reads, and `similarity_fn_name`, which 3.0 introduced.
SENTENCE_TRANSFORMERS_LAYOUT_VERSION = "3.0.0"


def add_sentence_transformers_layout(
    folder: str | os.PathLike,
    pooling: str = "mean",
    normalize: bool = False,
    max_seq_length: int | None = None,
) -> list[str]:
    """Add sentence-transformers' files to a stock ALBERT folder (model_type "albert", with its tokenizer), so that
    `SentenceTransformer(folder)` loads it, with no code of albert_hf, as a transformer followed by a pooling module:
    mean of the token embeddings under the attention mask (`pooling="mean"`, sentence-transformers' ALBERT models'),
    the [CLS] embedding ("cls"), or the maximum ("max"), then unit length if `normalize`. `max_seq_length` (default:
    the model's `max_position_embeddings`) is where sentence-transformers truncates. Returns the files written.

    A folder whose model needs albert_hf's code is refused: sentence-transformers would need `trust_remote_code`.
    """
    folder = Path(folder)
    if pooling not in POOLING_MODES:
        raise UserError(f"pooling must be one of {sorted(POOLING_MODES)}, got {pooling!r}.")
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"{folder}: no readable config.json ({error}); save the model there first.") from None
    if config.get("model_type") != "albert":
        raise UserError(
            f"{folder} holds a model of type {config.get('model_type')!r}, not transformers' own ALBERT: "
            "sentence-transformers would need its code (trust_remote_code). Only a stock folder gets the layout."
        )
    tokenizer_kind(folder)  # a tokenizer must be there: sentence-transformers loads it with the model
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    pooling_config = {
        "word_embedding_dimension": config["hidden_size"],
        **{mode: name == pooling for name, mode in POOLING_MODES.items()},
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False,
        "include_prompt": True,
    }
    files = {
        "modules.json": modules,
        "sentence_bert_config.json": {
            "max_seq_length": max_seq_length or config.get("max_position_embeddings", 512),
            # The tokenizer lower-cases itself where its model was trained so (its own do_lower_case).
            "do_lower_case": False,
        },
        "config_sentence_transformers.json": {
            "__version__": {
                "sentence_transformers": SENTENCE_TRANSFORMERS_LAYOUT_VERSION,
                "transformers": transformers.__version__,
                "pytorch": torch.__version__,
            },
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        "1_Pooling/config.json": pooling_config,
    }
    written = []
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        written.append(name)
    if normalize:
        (folder / "2_Normalize").mkdir(exist_ok=True)
    return written


def export_sentence_transformer(
    model_name_or_path: str | os.PathLike,
    output_dir: str | os.PathLike,
    pooling: str = "mean",
    normalize: bool = False,
    max_seq_length: int | None = None,
) -> Path:
    """Write a sentence-transformers model of a saved albert_hf (or transformers ALBERT) folder into `output_dir`:
    its backbone (`AlbertModel`, heads left out) and tokenizer in transformers' own format, sentence-transformers'
    files ([`add_sentence_transformers_layout`]) and a model card. The files are staged and moved in when all are
    written. A model that stock ALBERT cannot describe (another sharing, exits) is refused before anything is written.
    """
    source, output_dir = Path(model_name_or_path), Path(output_dir)
    config = AlbertConfig.from_pretrained(source)
    check_exportable(config)
    tokenizer = load_tokenizer(source)
    model = AlbertModel.from_pretrained(source).eval()
    output_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="_export-", dir=output_dir))
    try:
        export_to_transformers(model, staging, tokenizer=tokenizer)
        add_sentence_transformers_layout(staging, pooling, normalize, max_seq_length)
        description = (
            f"The ALBERT backbone of `{source.name}` as a sentence-transformers model: token embeddings "
            f"{'averaged under the attention mask' if pooling == 'mean' else f'pooled by {pooling}'}"
            f'{", normalized to unit length" if normalize else ""}. `SentenceTransformer("{output_dir.name}")` loads '
            "it without albert_hf."
        )
        info = CardInfo(description=description, tags=["sentence-transformers", "sentence-similarity"])
        write_model_card(staging, model, info=info, tokenizer=tokenizer)
        for path in sorted(staging.iterdir()):
            target = output_dir / path.name
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(path, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir


__all__ = [
    "add_sentence_transformers_layout",
    "check_exportable",
    "export_sentence_transformer",
    "export_to_transformers",
    "import_official_checkpoint",
    "to_transformers_config",
]
