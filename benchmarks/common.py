"""What the benchmark scripts share: side-by-side models with identical weights, synthetic pretraining batches, the
FLOP counts that MFU and the GPU benchmark's planning use, and the pretraining run of `albert-hf pretrain` built
without training it.

Imported by sibling scripts as `from common import ...`: a script run as `python benchmarks/<name>.py` has this folder
first on its import path, so nothing here edits `sys.path`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from datasets import Dataset

import albert_hf
from albert_hf import AlbertConfig
from albert_hf.configuration import SIZE_FIELDS
from albert_hf.job_setup import load_tokenizer
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.arguments import PretrainingJob
from albert_hf.pretraining.corpus import CorpusStats, prepare_datasets
from albert_hf.pretraining.run import (
    build_pretraining_model,
    build_trainer,
    check_first_instances,
    run_fingerprint,
    start_pretraining_job,
)
from albert_hf.pretraining.trainer import AlbertPretrainingTrainer

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO.parent / "shared" / "data"))

# The AlbertConfig fields transformers' AlbertConfig shares: what `paired` builds both models from.
SHARED_CONFIG_FIELDS = (
    *SIZE_FIELDS,
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "layer_norm_eps",
)


def config_kwargs(config: AlbertConfig) -> dict:
    """The fields of `config` that transformers' AlbertConfig understands, as keyword arguments."""
    return {name: getattr(config, name) for name in SHARED_CONFIG_FIELDS}


def paired(class_name: str, kwargs: dict, seed: int = 0):
    """(transformers model, albert_hf model) of the same class with identical weights, both on sdpa."""
    torch.manual_seed(seed)
    reference = getattr(transformers, class_name)(transformers.AlbertConfig(**kwargs, attn_implementation="sdpa"))
    ours = getattr(albert_hf, class_name)(AlbertConfig(**kwargs, attn_implementation="sdpa"))
    ours.load_state_dict(reference.state_dict(), strict=True)
    return reference, ours


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def encoder_flops_per_token(config: AlbertConfig, seq_len: int) -> float:
    """Forward FLOPs per token of the encoder (matmuls only): projection, then per layer application
    4 H x H projections, the two FFN matmuls, and attention scores + weighted sum (2 x 2 T H)."""
    H, F, E = config.hidden_size, config.intermediate_size, config.embedding_size
    per_layer = 2 * (4 * H * H + 2 * H * F) + 4 * seq_len * H
    return 2 * E * H + config.num_layer_applications * per_layer


def mlm_head_flops(config: AlbertConfig) -> float:
    """Forward FLOPs of the MLM head at one position: H -> E projection and the E -> vocabulary decoder."""
    return 2 * (config.hidden_size * config.embedding_size + config.embedding_size * config.vocab_size)


def pretraining_flops_per_token(config: AlbertConfig, seq_len: int, masked_fraction: float) -> float:
    """Training FLOPs (forward + backward = 3 x forward) per input token of a pretraining step whose MLM head runs
    on the masked positions only (`masked_positions_only=True`, a `masked_fraction` of the tokens)."""
    return 3 * (encoder_flops_per_token(config, seq_len) + masked_fraction * mlm_head_flops(config))


def masked_batch(config: AlbertConfig, batch_size: int, seq_len: int, seed: int = 0) -> dict:
    """A pretraining batch: [CLS] A [SEP] B [SEP] segments, 15% of tokens masked (80/10/10), SOP labels."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), generator=generator)
    input_ids[:, 0], input_ids[:, seq_len // 2], input_ids[:, -1] = 2, 3, 3
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, seq_len // 2 + 1 :] = 1
    maskable = input_ids > 4
    masked = (torch.rand(input_ids.shape, generator=generator) < 0.15) & maskable
    labels = torch.where(masked, input_ids, -100)
    input_ids = torch.where(masked, 4, input_ids)
    return dict(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        token_type_ids=token_type_ids,
        labels=labels,
        sentence_order_label=torch.randint(0, 2, (batch_size,), generator=generator),
    )


@dataclass
class PretrainingRun:
    """A pretraining run ready to train: what [`pretraining_run`] made of a `PretrainingJob`."""

    job: PretrainingJob
    tokenizer: object
    train_dataset: object  # a Dataset of instances, or a ResumableInstanceStream with --streaming
    eval_dataset: Dataset | None
    model: AlbertForPreTraining
    trainer: AlbertPretrainingTrainer
    stats: CorpusStats


def pretraining_run(
    job: PretrainingJob, tokenizer=None, documents: tuple[Dataset, Dataset | None] | None = None
) -> PretrainingRun:
    """Steps 2 to 5 of albert_hf/scripts/pretrain.py, in its order and with its library calls: start the job, make
    the tokenizer (`tokenizer`, else --tokenizer_name_or_path or the checkpoint's), the instances (of `documents`,
    (training, held-out or None), else of the files of the arguments), the model and the Trainer, and check the
    first instances. The benchmarks then train (or time) the Trainer their own way."""
    start_pretraining_job(job)
    transformers.set_seed(job.training.seed)
    tokenizer = load_tokenizer(job.model) if tokenizer is None else tokenizer
    train_dataset, eval_dataset, stats = prepare_datasets(job.data, tokenizer, job.training.seed, documents=documents)
    logger.info("Pretraining data: %s", stats.describe())
    model = build_pretraining_model(job.model, tokenizer, job.data.max_seq_length, job.training.sanity_checks)
    trainer = build_trainer(model, tokenizer, job.data, job.training, train_dataset, eval_dataset, run_fingerprint(job))
    check_first_instances(trainer, job.data, stats.word_boundaries)
    return PretrainingRun(job, tokenizer, train_dataset, eval_dataset, model, trainer, stats)
