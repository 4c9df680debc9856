"""Launched by tests/test_lamb_distributed.py: run a real albert_hf job several times in one launch, once per engine.

    torchrun --standalone --nproc_per_node 2 tests/distributed/run_tasks.py albert_hf.scripts.pretrain <record> \\
        --engines ddp,zero2,zero3,fsdp2 --engine_arguments <folder> -- <job arguments, {engine} in --output_dir>

Each job runs as run_task.py runs it (same recording patches), with the arguments listed in
`<engine_arguments>/<engine>.json` added (`--deepspeed ...`, `--fsdp ...`). One launch pays the imports and
DeepSpeed's start once for all engines. Between jobs, the accelerate state that Trainer creates (its DeepSpeed
plugin, its environment flag) and transformers' ZeRO-3 marker are reset; the process group stays. A job with
`--fsdp` runs on the CPU process state labelled multi-GPU, as killed_job.py's FSDP_ON_CPU does (accelerate enables
FSDP only for GPU-like devices); as the label stays, such a job comes last. Each rank writes
`<record>.<engine>.rank<i>.json`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from killed_job import label_cpu_state_multi_gpu
from run_task import run_job


def reset_between_jobs() -> None:
    from accelerate.state import AcceleratorState, GradientState
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    unset_hf_deepspeed_config()
    os.environ.pop("ACCELERATE_USE_DEEPSPEED", None)  # set by TrainingArguments under --deepspeed


def main() -> None:
    module_name, record_path, *rest = sys.argv[1:]
    separator = rest.index("--")
    options, argv = dict(zip(rest[:separator:2], rest[1:separator:2])), rest[separator + 1 :]
    for engine in options["--engines"].split(","):
        job_argv = [argument.replace("{engine}", engine) for argument in argv]
        job_argv += json.loads(Path(options["--engine_arguments"], f"{engine}.json").read_text())
        if "--fsdp" in job_argv:
            label_cpu_state_multi_gpu()
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
