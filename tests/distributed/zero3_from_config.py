"""One process under DeepSpeed ZeRO-3 (gloo, CPU) builds a fresh model from its config the way the fine-tuning and
pretraining jobs do (`albert_hf.job_setup.build_model` without a checkpoint), and prints one JSON line: per
parameter, its local element count, DeepSpeed's count of the whole tensor, and the gathered tensor's mean and std.

Usage: python zero3_from_config.py <output_dir> <master_port>
"""

import json
import os
import sys

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")

import deepspeed  # noqa: E402
from transformers import TrainingArguments  # noqa: E402

from albert_hf.arguments import ModelArguments
from albert_hf.configuration import AlbertConfig  # noqa: E402
from albert_hf.distributed import check_extension_build_locks  # noqa: E402
from albert_hf.job_setup import build_model  # noqa: E402
from albert_hf.modeling import AlbertForSequenceClassification  # noqa: E402

# Persistence threshold 0: ZeRO-3 partitions even the tiny model's tensors (by default it keeps small ones whole).
ZERO3 = {
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
    "train_micro_batch_size_per_gpu": "auto",
    "train_batch_size": "auto",
}
# The arguments hold the DeepSpeed config that transformers' `is_deepspeed_zero3_enabled` reads; keep them alive.
arguments = TrainingArguments(output_dir=sys.argv[1], deepspeed=ZERO3, use_cpu=True, report_to=[])
check_extension_build_locks()  # a killed build's lock says so, instead of a wait without end
deepspeed.init_distributed(dist_backend="gloo")
config = AlbertConfig(
    vocab_size=64,
    embedding_size=8,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=16,
    max_position_embeddings=16,
)
model = build_model(AlbertForSequenceClassification, ModelArguments(), config)
record = {name: {"numel": p.numel(), "ds_numel": getattr(p, "ds_numel", None)} for name, p in model.named_parameters()}
with deepspeed.zero.GatheredParameters(list(model.parameters())):
    for name, parameter in model.named_parameters():
        record[name].update(mean=parameter.float().mean().item(), std=parameter.float().std(correction=0).item())
print(json.dumps(record))
