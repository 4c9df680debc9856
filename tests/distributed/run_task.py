"""Launched by tests/test_distributed.py: run a real albert_hf job (`main(argv)`) and record what each rank trained on.

    torchrun --standalone --nproc_per_node 2 tests/distributed/run_task.py albert_hf.tasks.glue <record.json> \\
        -- --task_name mrpc ... --use_cpu

The job runs unchanged; this wrapper only wraps `Trainer.training_step` to note the unpadded input rows of every
step and the world size Trainer ran with, and writes them to `<record>.rank<i>.json`. For pretraining it also keys
the on-the-fly masks of `DataCollatorForSOP` by the row's content, so that a 2-process run and the single-process
reference (which see the same rows in different batches) mask identically.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import zlib

import numpy as np
import torch
from transformers import Trainer


def record_training_steps(record: dict) -> None:
    original_step = Trainer.training_step

    def training_step(self, model, inputs, num_items_in_batch=None):
        masks = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"]))
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(inputs["input_ids"], masks)]
        record["rows_per_step"].append(rows)
        record["world_size"] = self.args.world_size
        record["process_index"] = self.args.process_index
        return original_step(self, model, inputs, num_items_in_batch)

    Trainer.training_step = training_step


def mask_by_row_content() -> None:
    from albert_hf.data.collator import DataCollatorForSOP

    original_mask_tokens = DataCollatorForSOP.mask_tokens

    def mask_tokens(self, input_ids: np.ndarray, rng: np.random.Generator):
        row_rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(input_ids, dtype=np.int64).tobytes()))
        return original_mask_tokens(self, input_ids, row_rng)

    DataCollatorForSOP.mask_tokens = mask_tokens


def main() -> None:
    module_name, record_path, separator, *argv = sys.argv[1:]
    if separator != "--":
        raise SystemExit("usage: run_task.py <module> <record.json> -- <job arguments>")
    record = {"rows_per_step": [], "world_size": None, "process_index": None}
    record_training_steps(record)
    if module_name.endswith("pretraining"):
        mask_by_row_content()
    exit_code = importlib.import_module(module_name).main(argv)
    assert not exit_code, f"{module_name}.main returned {exit_code}"
    record["torch_world_size"] = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    assert record["world_size"] == record["torch_world_size"] == 2, record  # the silent independent-jobs trap
    with open(f"{record_path}.rank{record['process_index']}.json", "w") as handle:
        json.dump(record, handle)


if __name__ == "__main__":
    main()
    if torch.distributed.is_initialized():  # clean exit (see trainer_parity.py)
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
