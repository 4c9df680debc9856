"""ALBERT fast at inference: adaptive depth (early exit), ONNX Runtime and int8, side by side on SST-2.

A 12-layer ALBERT (the base depth, width 128 so that it trains on 2 CPU cores) is fine-tuned FROM SCRATCH on SST-2
with exit classifiers (`albert-hf glue --early_exit`): no pretrained ALBERT is reachable offline, so the accuracies
are those of a small model trained from random weights, not of ALBERT-base. Two variants are trained, one classifier
per exit and one classifier shared by every exit, and the better on dev is measured. Then, in one run, SST-2 dev
accuracy and latency at batch 1 and batch 32 (median over the dev set's batches; threads stated) for:

    transformers' AlbertForSequenceClassification fp32 (the same weights, through albert_hf.convert)
    albert_hf full depth, patience 1..6, fixed depths  (PyTorch fp32, ONNX Runtime fp32, ONNX Runtime int8)
    transformers' DistilBERT (6 layers) and BERT (12 layers) at the same width, random weights: speed only

    PYTHONPATH=. python benchmarks/inference.py [--json out.json] [--plot docs/inference_tradeoff.png]
    PYTHONPATH=. python benchmarks/inference.py --smoke      # every row at tiny size, seconds

`--stage train` only trains (into --work_dir), `--stage measure` measures models trained there earlier.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO.parent / "shared" / "data"))

FULL = dict(
    width="embedding_size=128,hidden_size=128,num_attention_heads=2,intermediate_size=512,num_hidden_layers=12",
    max_train_samples=30000,
    max_eval_samples=None,
    max_seq_length=64,
    epochs=1.0,
    learning_rate=5e-4,
    patiences=(1, 2, 3, 4, 5, 6),
    depths=(2, 3, 4, 6, 8),
)
SMOKE = dict(
    width="embedding_size=16,hidden_size=16,num_attention_heads=2,intermediate_size=32,num_hidden_layers=12",
    max_train_samples=64,
    max_eval_samples=40,
    max_seq_length=32,
    epochs=1.0,
    learning_rate=1e-3,
    patiences=(1, 2, 3, 4, 5, 6),
    depths=(2, 4),
)
VARIANTS = {"per_exit": [], "shared": ["--early_exit_shared_classifier"]}


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="every row at tiny size (seconds)")
    parser.add_argument("--stage", choices=("all", "train", "measure"), default="all")
    parser.add_argument("--variant", choices=sorted(VARIANTS), help="--stage train: only this variant")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="the shared data folder (glue/SST-2, spiece/)")
    parser.add_argument("--work_dir", default=None, help="trained models (default: a temporary folder)")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (default: torch's)")
    parser.add_argument("--json", default=None, help="write the table's figures here")
    parser.add_argument("--plot", default=None, help="save the accuracy-vs-latency plot here (png)")
    return parser.parse_args(argv)


def train(variant: str, settings: dict, data: str, output_dir: Path) -> None:
    """`albert-hf glue --early_exit` on SST-2 from scratch (the real job)."""
    from albert_hf.tasks.glue import main

    argv = [
        "--task_name", "sst2",
        "--data_dir", os.path.join(data, "glue", "SST-2"),
        "--tokenizer_name_or_path", os.path.join(data, "spiece", "albert-30k-clean.model"),
        "--config_overrides", settings["width"],
        "--early_exit", *VARIANTS[variant],
        "--do_train", "--do_eval",
        "--max_train_samples", str(settings["max_train_samples"]),
        "--num_train_epochs", str(settings["epochs"]),
        "--learning_rate", str(settings["learning_rate"]),
        "--warmup_steps", "0.1",
        "--per_device_train_batch_size", "32",
        "--per_device_eval_batch_size", "128",
        "--max_seq_length", str(settings["max_seq_length"]),
        "--train_sampling_strategy", "group_by_length",
        "--save_strategy", "no",
        "--report_to", "none",
        "--logging_steps", "100",
        "--disable_tqdm", "true",
        "--output_dir", str(output_dir),
        "--overwrite_output_dir",
        "--seed", "0",
    ]  # fmt: skip
    if settings["max_eval_samples"]:
        argv += ["--max_eval_samples", str(settings["max_eval_samples"])]
    main(argv)


def main(argv=None) -> dict:
    args = parse_arguments(argv)
    settings = SMOKE if args.smoke else FULL
    if args.threads:
        torch.set_num_threads(args.threads)
    work_dir = Path(args.work_dir or __import__("tempfile").mkdtemp(prefix="inference_bench_"))
    if args.stage in ("all", "train"):
        for variant in [args.variant] if args.variant else VARIANTS:
            start = time.perf_counter()
            train(variant, settings, args.data, work_dir / variant)
            minutes = (time.perf_counter() - start) / 60
            (work_dir / variant / "train_minutes.txt").write_text(f"{minutes:.1f}\n")
    if args.stage == "train":
        return {}
    return measure(args, settings, work_dir)


if __name__ == "__main__":
    main()
def measure(*a): return {}
