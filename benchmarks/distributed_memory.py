"""Memory per GPU to pretrain each released ALBERT size under DDP, ZeRO and FSDP2: computed; LAMB's states measured.

    PYTHONPATH=. python benchmarks/distributed_memory.py --num_gpus 8 --seq_len 512
    PYTHONPATH=. python benchmarks/distributed_memory.py --measure   # + LAMB's states per rank, 2 CPU processes

The tables come from `albert_hf.distributed.estimate_memory_per_gpu` (bf16 mixed precision, Adam/LAMB states: 2 + 2
+ 12 bytes per parameter, partitioned as in the ZeRO paper), not from a measurement; add about 1 GiB per GPU for the
CUDA context and allocator slack. `--measure` checks the partitioning arithmetic where it can be run without GPUs: it
launches tests/distributed/lamb_engines.py (a tiny AlbertForPreTraining, LAMB, fp32) on 2 processes with gloo under
each engine and prints the bytes of LAMB's moments that each rank held, next to the arithmetic.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from albert_hf.configuration import AlbertConfig
from albert_hf.distributed import GIB, estimate_memory_per_gpu, pretraining_parameter_count

REPO_ROOT = Path(__file__).resolve().parents[1]
MIB = 1024**2
MICRO_BATCH = {"base": 32, "large": 16, "xlarge": 8, "xxlarge": 4}
ENGINES = (
    ("DDP", 0, {}),
    ("ZeRO-1", 1, {}),
    ("ZeRO-2", 2, {}),
    ("ZeRO-3", 3, {}),
    ("ZeRO-3 + CPU offload", 3, {"offload_optimizer": True, "offload_parameters": True}),
    ("ZeRO-3 + grad. checkpointing", 3, {"gradient_checkpointing": True}),
    ("DDP + masked positions only", 0, {"mlm_positions": 20}),
)
# Model states only (weights, gradients, optimizer): what a ZeRO stage can partition. FSDP2 shards like ZeRO-3.
STATE_ENGINES = (("DDP", 0, {}), ("ZeRO-1", 1, {}), ("ZeRO-2", 2, {}), ("ZeRO-3 / FSDP2", 3, {}))


def memory_table(num_gpus: int, seq_len: int) -> None:
    print("| size | parameters | engine | micro-batch | weights | gradients | optimizer | activations | total GiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, micro_batch in MICRO_BATCH.items():
        config = AlbertConfig.preset(size)
        for name, stage, options in ENGINES:
            memory = estimate_memory_per_gpu(config, num_gpus, stage, micro_batch, seq_len, **options)
            cells = [memory.parameters, memory.gradients, memory.optimizer_states, memory.activations, memory.total]
            print(
                f"| {size} | {pretraining_parameter_count(config) / 1e6:.1f}M | {name} | {micro_batch} | "
                + " | ".join(f"{value / GIB:.2f}" for value in cells)
                + " |"
            )


def model_state_table(num_gpus: int, seq_len: int) -> None:
    """MiB of weights + gradients + optimizer states per GPU, and what each engine saves against DDP."""
    names = [name for name, _, _ in STATE_ENGINES]
    print(f"| size | parameters | activations (MiB) | {' | '.join(names)} | ZeRO-3's saving vs DDP |")
    print("| --- | --- | --- |" + " --- |" * len(names) + " --- |")
    for size, micro_batch in MICRO_BATCH.items():
        config = AlbertConfig.preset(size)
        memories = [
            estimate_memory_per_gpu(config, num_gpus, stage, micro_batch, seq_len, **options)
            for _, stage, options in STATE_ENGINES
        ]
        states = [memory.parameters + memory.gradients + memory.optimizer_states for memory in memories]
        saving = states[0] - states[-1]
        print(
            f"| {size} | {pretraining_parameter_count(config) / 1e6:.1f}M | {memories[0].activations / MIB:,.0f} | "
            + " | ".join(f"{value / MIB:,.0f}" for value in states)
            + f" | {saving / MIB:,.0f} MiB ({saving / memories[0].total:.0%} of DDP's total) |"
        )


def measure(output_dir: Path) -> None:
    """Launch tests/distributed/lamb_engines.py on 2 CPU processes; print LAMB's moment bytes per rank per engine."""
    import torch

    sys.path.insert(0, str(REPO_ROOT / "tests" / "distributed"))
    import lamb_engines

    from albert_hf.modeling import AlbertForPreTraining

    config = AlbertConfig(
        vocab_size=100, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=64, classifier_dropout_prob=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = AlbertForPreTraining(config)
    model.save_pretrained(output_dir / "checkpoint")
    rows, length = lamb_engines.GLOBAL_BATCH * lamb_engines.STEPS, 12
    input_ids = torch.randint(5, 100, (rows, length))
    labels = torch.where(torch.rand(rows, length) < 0.3, input_ids, torch.full_like(input_ids, -100))
    batches = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels)
    batches.update(token_type_ids=torch.zeros_like(input_ids), sentence_order_label=torch.randint(0, 2, (rows,)))
    torch.save(batches, output_dir / "batches.pt")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += [str(REPO_ROOT / "tests" / "distributed" / "lamb_engines.py"), "--output_dir", str(output_dir)]
    command += ["--checkpoint", str(output_dir / "checkpoint"), "--batches", str(output_dir / "batches.pt")]
    subprocess.run(command, env=env, check=True, capture_output=True)

    parameters = sum(parameter.numel() for parameter in model.parameters())
    whole = 2 * 4 * parameters  # two fp32 moments
    print(f"LAMB's moments (exp_avg, exp_avg_sq), fp32, tiny AlbertForPreTraining of {parameters:,} parameters:")
    print("| engine | rank 0 bytes | rank 1 bytes | arithmetic per rank |")
    print("| --- | --- | --- | --- |")
    for engine in lamb_engines.ENGINES:
        held = [json.loads((output_dir / f"{engine}.rank{rank}.json").read_text()) for rank in (0, 1)]
        expected = whole if engine in ("ddp", "zero0") else whole / 2
        print(f"| {engine} | {held[0]['lamb_state_bytes']:,} | {held[1]['lamb_state_bytes']:,} | {expected:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_gpus", type=int, default=8)
    parser.add_argument("--seq_len", type=int, default=512)
    parser.add_argument("--measure", action="store_true", help="also measure LAMB's states per rank on 2 CPUs")
    args = parser.parse_args()
    memory_table(args.num_gpus, args.seq_len)
    print()
    model_state_table(args.num_gpus, args.seq_len)
    if args.measure:
        print()
        with tempfile.TemporaryDirectory() as folder:
            measure(Path(folder))


if __name__ == "__main__":
    main()
