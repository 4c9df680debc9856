"""Launched by tests/test_guard_distributed.py: AlbertPretrainingTrainer with its divergence guard under one engine,
twice in the same processes: a run whose loss turns NaN on rank 0 only at step BAD_STEP, and the same run on the
data without the two batches the guard skips (its reference).

    torchrun --standalone --nproc_per_node 2 tests/distributed/guard_worker.py <checkpoint> <batches.pt> <output> \\
        -- <the engine's flags: --deepspeed <json>, or --fsdp full_shard --fsdp_config <json> ...>

The NaN is planted in the loss the model returns (not the data) on one process, as an fp16 overflow on one GPU would
show: its
backward puts NaN into the gradients, so the optimizer step the engine then takes turns weights and optimizer moments
NaN on every process. Each run saves its final full weights (gathered over the processes) to `<output>/<run>.pt`;
each rank writes `<output>/rank<i>.json` with its world size, the guard's rollbacks and the final step.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from transformers import default_data_collator

from albert_hf.distributed import init_distributed
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.trainer import AlbertPretrainingTrainer, PretrainingArguments, pretraining_callbacks
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.divergence import divergence_guard_of

GLOBAL_BATCH, PER_DEVICE_BATCH, STEPS = 8, 4, 6
BAD_STEP = 4  # 1-based: the optimizer step whose loss is NaN on rank 0
SKIPPED_STEPS = (BAD_STEP - 1, BAD_STEP)  # snapshot every step, committed once the next step is judged good


class PoisonedTrainer(AlbertPretrainingTrainer):
    """The loss its model returns is NaN on process 0 at step `poison_step` (1-based), once: a forward hook on the
    model, registered before the guard's own (which reads the loss the model returns), as a NaN from inside the
    model's forward would show."""

    poison_step = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.model.register_forward_hook(self._poison)

    def _poison(self, module, args, output):
        if module.training and self.state.global_step + 1 == self.poison_step and self.args.process_index == 0:
            self.poison_step = 0
            output["loss"] = output["loss"] * float("nan")
        return output


def engine_options(flags: list[str]) -> dict:
    """`--name value` pairs (tests/helpers/distributed.py, engine_arguments) as TrainingArguments keywords; a JSON
    object value as a dict."""
    names, values = flags[0::2], flags[1::2]
    return {
        name.removeprefix("--"): json.loads(value) if value.startswith("{") else value
        for name, value in zip(names, values)
    }


def train(name: str, checkpoint: str, rows: list[dict], output: Path, flags: list[str], poison_step: int) -> dict:
    args = PretrainingArguments(
        **engine_options(flags),
        output_dir=str(output / name),
        use_cpu=True,
        per_device_train_batch_size=PER_DEVICE_BATCH,
        max_steps=STEPS,
        optimizer="adamw",
        lr_schedule="trainer",
        lr_scheduler_type="linear",
        learning_rate=1e-2,
        seed=0,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        train_sampling_strategy="sequential",
        divergence_snapshot_steps=1,
    )
    init_distributed(args)
    model = AlbertForPreTraining.from_pretrained(checkpoint)  # under ZeRO-3 inside zero.Init: partitioned
    trainer = PoisonedTrainer(model=model, args=args, train_dataset=rows, data_collator=default_data_collator)
    trainer.poison_step = poison_step
    attach_reliability(trainer, callbacks=pretraining_callbacks(trainer))  # the divergence guard of the arguments
    trainer.train()
    persistent = [getattr(parameter, "ds_persist", None) for parameter in trainer.model.parameters()]
    weights = trainer.accelerator.get_state_dict(trainer.model_wrapped)  # gathered whole on process 0
    if args.process_index == 0:
        torch.save({key: value.detach().cpu().clone() for key, value in weights.items()}, output / f"{name}.pt")
    return {
        "world_size": args.world_size,
        "torch_world_size": torch.distributed.get_world_size(),
        "process_index": args.process_index,
        "events": divergence_guard_of(trainer).events,
        "global_step": trainer.state.global_step,
        "zero3_persistent": sum(flag is True for flag in persistent),
        "zero3_partitioned": sum(flag is False for flag in persistent),
    }


def main() -> None:
    checkpoint, batches_path, output, separator, *flags = sys.argv[1:]
    assert separator == "--", "usage: guard_worker.py <checkpoint> <batches.pt> <output> -- <flags>"
    output = Path(output)
    batches = torch.load(batches_path)
    rows = [{key: value[i] for key, value in batches.items()} for i in range(batches["input_ids"].shape[0])]
    assert len(rows) == GLOBAL_BATCH * (STEPS + len(SKIPPED_STEPS))
    # The reference reads the same rows in the same order, less the global batches the rollback skips.
    kept = [row for i, row in enumerate(rows) if i // GLOBAL_BATCH + 1 not in SKIPPED_STEPS]
    record = {
        "poisoned": train("poisoned", checkpoint, rows, output, flags, BAD_STEP),
        "skipped": train("skipped", checkpoint, kept, output, flags, 0),
    }
    (output / f"rank{record['poisoned']['process_index']}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    if os.environ.get("FSDP_ON_CPU"):
        from killed_job import label_cpu_state_multi_gpu

        label_cpu_state_multi_gpu()
    main()
    if torch.distributed.is_initialized():  # clean exit (see trainer_parity.py)
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
