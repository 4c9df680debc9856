"""Launched by tests/test_job_arguments.py: the pretraining job's arguments under two processes and a `--deepspeed`
config of "auto" values; writes what DeepSpeed will use once the job has started (`start_job`)."""

from __future__ import annotations

import json
import os
import sys

import torch

from albert_hf.job_setup import start_job
from albert_hf.pretraining.arguments import parse_pretraining_args

KEYS = ("gradient_accumulation_steps", "train_micro_batch_size_per_gpu", "train_batch_size")

if __name__ == "__main__":
    output, argv = sys.argv[1], sys.argv[2:]
    training_args = parse_pretraining_args(argv)[-1]
    start_job(training_args)
    if int(os.environ["RANK"]) == 0:
        config = training_args.hf_deepspeed_config.config
        with open(output, "w", encoding="utf-8") as handle:
            json.dump({key: config[key] for key in KEYS}, handle)
    # Clean exit, both ranks together: a rank that leaves while the other still sets up or writes sometimes aborts at
    # interpreter shutdown ("terminate called without an active exception") and torchrun fails the job.
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
