"""Print the computed memory per GPU to pretrain each released ALBERT size under DDP and DeepSpeed ZeRO.

    PYTHONPATH=. python benchmarks/distributed_memory.py --num_gpus 8 --seq_len 512

Figures come from `albert_hf.distributed.estimate_memory_per_gpu` (bf16 mixed precision, Adam/LAMB states), not from
a measurement; add about 1 GiB per GPU for the CUDA context and allocator slack.
"""

from __future__ import annotations

import argparse

from albert_hf.configuration import AlbertConfig
from albert_hf.distributed import GIB, count_parameters, estimate_memory_per_gpu

MICRO_BATCH = {"base": 32, "large": 16, "xlarge": 8, "xxlarge": 4}
ENGINES = (
    ("DDP", 0, {}),
    ("ZeRO-2", 2, {}),
    ("ZeRO-3", 3, {}),
    ("ZeRO-3 + CPU offload", 3, {"offload_optimizer": True, "offload_parameters": True}),
    ("ZeRO-3 + grad. checkpointing", 3, {"gradient_checkpointing": True}),
    ("DDP + masked positions only", 0, {"mlm_positions": 20}),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_gpus", type=int, default=8)
    parser.add_argument("--seq_len", type=int, default=512)
    args = parser.parse_args()
    print("| size | parameters | engine | micro-batch | weights | gradients | optimizer | activations | total GiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, micro_batch in MICRO_BATCH.items():
        config = AlbertConfig.preset(size)
        for name, stage, options in ENGINES:
            memory = estimate_memory_per_gpu(config, args.num_gpus, stage, micro_batch, args.seq_len, **options)
            cells = [memory.parameters, memory.gradients, memory.optimizer_states, memory.activations, memory.total]
            print(
                f"| {size} | {count_parameters(config) / 1e6:.1f}M | {name} | {micro_batch} | "
                + " | ".join(f"{value / GIB:.2f}" for value in cells)
                + " |"
            )


if __name__ == "__main__":
    main()
