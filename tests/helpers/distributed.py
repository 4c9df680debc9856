"""What the multi-process tests share (tests/test_distributed.py, tests/test_lamb_distributed.py,
tests/test_resume_distributed.py): `torchrun` with two processes on CPU, the tiny model and batches of the parity
runs, the arguments of the real pretraining job and of each engine (DeepSpeed ZeRO, FSDP2), and the comparison of
weights against the 1e-6 tolerance.

The launched worker scripts live in tests/distributed/ and double as libraries for the single-process references
(`run_task.run_job`, `trainer_parity.deepspeed_config`), so that folder goes on `sys.path` here.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections import Counter
from pathlib import Path

import torch
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKERS = REPO_ROOT / "tests" / "distributed"
sys.path.insert(0, str(WORKERS))  # the launched worker scripts double as libraries for the single-process runs
from run_task import run_job  # noqa: E402
from trainer_parity import deepspeed_config  # noqa: E402

from . import processes  # noqa: E402
from .tiny import tiny_config as _tiny_config  # noqa: E402

CONFIGS = REPO_ROOT / "examples" / "accelerate_configs"
TOLERANCE = 1e-6
GLOBAL_BATCH, STEPS, SEQ_LEN = 8, 2, 12


# One shared layer group applied three times: cross-layer sharing is exercised by every test.
tiny_config = functools.partial(_tiny_config, vocab_size=100, num_hidden_layers=3, classifier_dropout_prob=0.0)


def run_torchrun(script: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 420):
    """`torchrun --standalone --nproc_per_node 2 <script> <args>` on 1 thread per process, with `env` added; the
    finished process (output captured), whatever its exit status."""
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        **(env or {}),
    }
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU"):
        environment.pop(name, None)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)]
    return processes.run([*command, *args], env=environment, capture_output=True, text=True, timeout=timeout)


def torchrun(script: Path, *args: str, timeout: int = 420) -> None:
    result = run_torchrun(script, *args, timeout=timeout)
    assert result.returncode == 0, f"{script.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[name].float() - b[name].float()).abs().max().item() for name in a)


def assert_ranks_split_the_global_batches(records: list[dict], reference_steps: list[list[list[int]]]) -> None:
    """Both ranks ran with world size 2, trained on different rows, and together on exactly the reference's rows."""
    assert sorted(record["process_index"] for record in records) == [0, 1]
    for record in records:
        assert record["world_size"] == record["torch_world_size"] == 2
        assert len(record["rows_per_step"]) == len(reference_steps)
    for step, reference_rows in enumerate(reference_steps):
        rank0, rank1 = (Counter(map(tuple, record["rows_per_step"][step])) for record in records)
        assert not rank0 & rank1, f"step {step}: both ranks trained on the same rows"
        assert rank0 + rank1 == Counter(map(tuple, reference_rows)), f"step {step}: not the reference's global batch"


def load_saved_weights(model_class, folder: Path) -> dict[str, torch.Tensor]:
    """The weights from_pretrained loads from what a run saved; the checkpoint must be complete (under ZeRO-3: the
    consolidated safetensors file gathered on save, not the empty partitioned placeholders)."""
    model, loading = model_class.from_pretrained(folder, output_loading_info=True)
    assert not loading["missing_keys"] and not loading["unexpected_keys"] and not loading["mismatched_keys"], loading
    return model.state_dict()


def deepspeed_arguments(engine: str, workdir: Path) -> list[str]:
    """`--deepspeed <json>` for a job under zero2/zero3 (nothing for ddp): the shipped config, for ZeRO-3 with
    persistence threshold 0 (see trainer_parity.deepspeed_config)."""
    config = deepspeed_config(engine)
    if config is None:
        return []
    path = workdir / f"ds_{engine}.json"
    path.write_text(json.dumps(config))
    return ["--deepspeed", str(path)]


def run_job_on_two_processes(module_name: str, argv: list[str], record: Path) -> list[dict]:
    """The same job under torchrun with 2 processes; the records of rank 0 and rank 1."""
    torchrun(WORKERS / "run_task.py", module_name, str(record), "--", *argv)
    return [json.loads(Path(f"{record}.rank{rank}.json").read_text()) for rank in (0, 1)]


def job_reference(
    module_name: str, argv: list[str], model_class, checkpoint: Path, output_dir: Path, min_change: float
) -> dict:
    """Run a job in this process from `checkpoint`; its final weights and rows. The comparison with the
    multi-process run only means something if training moved the weights far more than the tolerance."""
    record = run_job(module_name, argv)  # recorded as run_task.py records each rank
    weights = load_saved_weights(model_class, output_dir)
    assert max_difference(weights, model_class.from_pretrained(checkpoint).state_dict()) > min_change
    return {"weights": weights, "rows_per_step": record["rows_per_step"]}


def save_random_pretraining_batches(path: Path, rows: int, seq_len: int, seed: int) -> Path:
    """`rows` distinct rows of padding, a varying number of masked tokens per row and sentence-order labels."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 100, (rows, seq_len), generator=generator)
    lengths = torch.randint(6, seq_len + 1, (rows,), generator=generator)
    attention_mask = (torch.arange(seq_len)[None] < lengths[:, None]).long()
    input_ids = input_ids * attention_mask
    labels = torch.full_like(input_ids, -100)
    masked = (torch.rand(input_ids.shape, generator=generator) < 0.3) & attention_mask.bool()
    labels[masked] = input_ids[masked]
    torch.save(
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": torch.zeros_like(input_ids),
            "labels": labels,
            "sentence_order_label": torch.randint(0, 2, (rows,), generator=generator),
        },
        path,
    )
    return path


def pretraining_arguments(
    corpus: Path, spiece_model: Path, checkpoint: Path, output_dir: Path, batch: int
) -> list[str]:
    # --global_batch_size makes the job derive gradient accumulation from the world size: 1 in both set-ups (8 = 8 x 1
    # = 4 x 2); a world size seen wrongly gives 2 micro-batches per step, which the row check catches. SGD without
    # clipping and the constant schedule of Trainer (not LAMB, not ALBERT's decay) so that a wrong scale shows.
    return [
        "--train_files",
        str(corpus),
        "--lines_are_paragraphs",
        "--max_seq_length",
        "64",
        "--model_name_or_path",
        str(checkpoint),
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--global_batch_size",
        str(GLOBAL_BATCH),
        "--per_device_train_batch_size",
        str(batch),
        "--max_steps",
        str(STEPS),
        "--optimizer",
        "adamw",
        "--optim",
        "sgd",
        "--lr_schedule",
        "trainer",
        "--lr_scheduler_type",
        "constant",
        "--learning_rate",
        "0.5",
        "--max_grad_norm",
        "0",
        "--weight_decay",
        "0",
        "--use_cpu",
        "--seed",
        "0",
        "--report_to",
        "none",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        "--cache_dir",
        str(corpus.parent / "datasets_cache"),
        "--output_dir",
        str(output_dir),
    ]


def engine_arguments(engine: str, folder: Path) -> list[str]:
    """DeepSpeed's shipped JSON for zero2/zero3; for fsdp2 the `fsdp_config` of the shipped accelerate config
    (examples/accelerate_configs/fsdp2.yaml: the encoder one unit, sharded state dict)."""
    if engine != "fsdp2":
        return deepspeed_arguments(engine, folder)
    fsdp_config = yaml.safe_load((REPO_ROOT / "examples" / "accelerate_configs" / "fsdp2.yaml").read_text())
    path = folder / "fsdp2.json"
    path.write_text(json.dumps(fsdp_config["fsdp_config"]))
    return [
        "--fsdp",
        "full_shard",
        "--fsdp_config",
        str(path),
        "--accelerator_config",
        '{"use_configured_state": true}',
    ]
