"""A Trainer's model written to and read from a run's folders with public functions only.

Two places need more than Trainer's public `save_model` and `train()`:

* [`save_full_model`]: under FSDP, the full weights gathered from the shards (`accelerator.get_state_dict`) are
  written with what Trainer's own final save writes beside them (config, tokenizer, training arguments), through
  `save_pretrained` of the unwrapped model.
* [`load_checkpoint_weights`]: a finished run relaunched has no step left to train, and Trainer loads a checkpoint's
  weights only inside `train()`; the job must still save the trained model, not its fresh one.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import Trainer
from transformers.trainer import TRAINING_ARGS_NAME
from transformers.trainer_utils import load_sharded_checkpoint
from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME

from .checkpoints import ADAPTER_FILE_NAMES

logger = logging.getLogger(__name__)

SHARD_INDEXES = (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME)


def save_full_model(trainer: Trainer, output_dir: str, state_dict: dict[str, Any]) -> None:
    """What Trainer's final save writes, for the full weights `state_dict` gathered from a sharded model: weights and
    config (`save_pretrained` of the unwrapped model), the tokenizer (`processing_class`, else the data collator's)
    and the training arguments. Only the process that saves writes; the gather before it is the collective."""
    if not trainer.args.should_save:
        return
    os.makedirs(output_dir, exist_ok=True)
    model = trainer.accelerator.unwrap_model(trainer.model, keep_torch_compile=False)
    model.save_pretrained(output_dir, state_dict=state_dict)
    tokenizer = trainer.processing_class or getattr(trainer.data_collator, "tokenizer", None)
    if tokenizer is not None:
        tokenizer.save_pretrained(output_dir)
    torch.save(trainer.args, os.path.join(output_dir, TRAINING_ARGS_NAME))


def load_checkpoint_weights(trainer: Trainer, checkpoint: str) -> None:
    """The weights of a Trainer checkpoint (one process, neither FSDP nor DeepSpeed) into the trainer's model, as
    Trainer's resume loads them: a PEFT model's adapter, or the model's weights file (safetensors first), whole or sharded.

    Tensors the file leaves out because they are tied to one it has (the MLM decoder to the word embeddings) are
    loaded with it; any other missing or unexpected tensor is logged, as Trainer does.
    """
    model = trainer.model
    if _is_peft_model(model) and any(os.path.isfile(os.path.join(checkpoint, name)) for name in ADAPTER_FILE_NAMES):
        model.load_adapter(checkpoint, model.active_adapter, is_trainable=True)
        return
    if os.path.isfile(os.path.join(checkpoint, SAFE_WEIGHTS_NAME)):
        result = model.load_state_dict(
            load_file(os.path.join(checkpoint, SAFE_WEIGHTS_NAME), device="cpu"), strict=False
        )
    elif os.path.isfile(os.path.join(checkpoint, WEIGHTS_NAME)):
        weights = torch.load(os.path.join(checkpoint, WEIGHTS_NAME), map_location="cpu", weights_only=True)
        result = model.load_state_dict(weights, strict=False)
    elif any(os.path.isfile(os.path.join(checkpoint, name)) for name in SHARD_INDEXES):
        result = load_sharded_checkpoint(model, checkpoint, strict=False)
    else:
        raise ValueError(f"{checkpoint} has no weights file ({SAFE_WEIGHTS_NAME}, {WEIGHTS_NAME} or a shard index).")
    missing = _untied(model, result.missing_keys)
    if missing:
        logger.warning("%s has no weights for %s: they keep their initial values.", checkpoint, ", ".join(missing))
    if result.unexpected_keys:
        logger.warning("%s has weights the model lacks, ignored: %s.", checkpoint, ", ".join(result.unexpected_keys))


def _untied(model: torch.nn.Module, missing: list[str]) -> list[str]:
    """The names of `missing` that share no storage with a tensor that was loaded."""
    tensors = model.state_dict()
    loaded = {tensors[name].data_ptr() for name in tensors if name not in missing}
    return [name for name in missing if tensors[name].data_ptr() not in loaded]


def _is_peft_model(model: torch.nn.Module) -> bool:
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)
