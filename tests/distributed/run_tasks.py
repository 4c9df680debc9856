"""Launched by tests/test_lamb_distributed.py: run a real albert_hf job several times in one launch, once per engine.

    torchrun --standalone --nproc_per_node 2 tests/distributed/run_tasks.py albert_hf.tasks.pretraining <record> \\
        --engines ddp,zero2,zero3 --deepspeed_dir <folder> -- <job arguments, with {engine} in --output_dir>

Each job runs as run_task.py runs it (same recording patches); for an engine other than ddp, `--deepspeed
<deepspeed_dir>/ds_<engine>.json` is added. One launch pays the imports and DeepSpeed's start once for all engines.
Between jobs, the accelerate state that Trainer creates (its DeepSpeed plugin) and transformers' ZeRO-3 marker are
reset; the process group stays. Each rank writes `<record>.<engine>.rank<i>.json`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from run_task import run_job


def reset_between_jobs() -> None:
    from accelerate.state import AcceleratorState, GradientState
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    unset_hf_deepspeed_config()


def main() -> None:
    module_name, record_path, *rest = sys.argv[1:]
    separator = rest.index("--")
    options, argv = dict(zip(rest[:separator:2], rest[1:separator:2])), rest[separator + 1 :]
    for engine in options["--engines"].split(","):
        job_argv = [argument.replace("{engine}", engine) for argument in argv]
        if engine != "ddp":
            job_argv += ["--deepspeed", str(Path(options["--deepspeed_dir"], f"ds_{engine}.json"))]
        record = run_job(module_name, job_argv)
        assert record["world_size"] == record["torch_world_size"] == 2, record  # the silent independent-jobs trap
        with open(f"{record_path}.{engine}.rank{record['process_index']}.json", "w") as handle:
            json.dump(record, handle)
        reset_between_jobs()
        torch.distributed.barrier()


if __name__ == "__main__":
    main()
    if torch.distributed.is_initialized():  # clean exit (see trainer_parity.py)
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
