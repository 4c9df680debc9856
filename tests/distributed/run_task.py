"""Launched by tests/test_distributed.py: run a real albert_hf job (`main(argv)`) and record what each rank trained on.

    torchrun --standalone --nproc_per_node 2 tests/distributed/run_task.py albert_hf.scripts.glue <record> \\
        -- --task_name mrpc ... --use_cpu

The job runs unchanged; this wrapper only patches, for the duration of the job:
  * `Trainer.training_step`, to note the unpadded input rows of every step, the world size Trainer ran with and
    whether the parameters it trained were FSDP2's DTensors;
  * `AlbertPreTrainedModel.from_pretrained`, to note whether the loaded model came out partitioned (every tensor
    split over the ranks, as `zero.Init` under ZeRO-3 with persistence threshold 0 does);
  * for pretraining, `DataCollatorForSOP.mask_tokens`, to key the on-the-fly masks by the row's content, so that a
    2-process run and the single-process reference (which see the same rows in different batches) mask identically.
Each rank writes its record to `<record>.rank<i>.json`. The tests call `run_job` directly for the single-process
reference runs.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import zlib
from unittest import mock

import numpy as np
import torch
from transformers import Trainer

from albert_hf.data.collator import DataCollatorForSOP
from albert_hf.modeling import AlbertPreTrainedModel


def recording_training_step(record: dict):
    original_step = Trainer.training_step

    def training_step(self, model, inputs, num_items_in_batch=None):
        masks = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"]))
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(inputs["input_ids"], masks)]
        record["rows_per_step"].append(rows)
        record["world_size"] = self.args.world_size
        record["process_index"] = self.args.process_index
        record["dtensor_parameters"] = all(type(p).__name__ == "DTensor" for p in model.parameters())  # FSDP2
        return original_step(self, model, inputs, num_items_in_batch)

    return training_step


def recording_from_pretrained(record: dict):
    original = AlbertPreTrainedModel.__dict__["from_pretrained"].__func__

    def from_pretrained(cls, *args, **kwargs):
        loaded = original(cls, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # output_loading_info=True
        record["partitioned_after_from_pretrained"] = all(
            getattr(parameter, "ds_numel", 0) > parameter.numel() for parameter in model.parameters()
        )
        return loaded

    return classmethod(from_pretrained)


def masks_keyed_by_row_content():
    original_mask_tokens = DataCollatorForSOP.mask_tokens

    def mask_tokens(self, input_ids: np.ndarray, rng: np.random.Generator, word_starts: np.ndarray | None = None):
        row_rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(input_ids, dtype=np.int64).tobytes()))
        return original_mask_tokens(self, input_ids, row_rng, word_starts)

    return mask_tokens


def run_job(module_name: str, argv: list[str]) -> dict:
    """Run `<module_name>.main(argv)` with the recording patches (removed afterwards); returns this process's record."""
    record = {"rows_per_step": [], "world_size": None, "process_index": None, "partitioned_after_from_pretrained": None}
    with contextlib.ExitStack() as patches:
        patches.enter_context(mock.patch.object(Trainer, "training_step", recording_training_step(record)))
        patches.enter_context(
            mock.patch.object(AlbertPreTrainedModel, "from_pretrained", recording_from_pretrained(record))
        )
        if module_name.startswith(("albert_hf.pretraining", "albert_hf.scripts.pretrain")):
            patches.enter_context(mock.patch.object(DataCollatorForSOP, "mask_tokens", masks_keyed_by_row_content()))
        exit_code = importlib.import_module(module_name).main(argv)
    assert not exit_code, f"{module_name}.main returned {exit_code}"
    record["torch_world_size"] = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    return record


def main() -> None:
    module_name, record_path, separator, *argv = sys.argv[1:]
    if separator != "--":
        raise SystemExit("usage: run_task.py <module> <record> -- <job arguments>")
    record = run_job(module_name, argv)
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
