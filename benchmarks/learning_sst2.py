"""Learning check: a small ALBERT trained from scratch on SST-2 reaches a dev accuracy well above the majority class.

Runs the real GLUE job (`albert_hf.tasks.glue.main`) on the local tsv files, with the real 30k SentencePiece
vocabulary and a small randomly initialised ALBERT, on CPU, then prints a table. Meant to finish within 15 minutes on 2
CPU cores:

    PYTHONPATH=. python benchmarks/learning_sst2.py [--data ../shared/data] [--max_train_samples 30000] [--epochs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from albert_hf.data.glue import GLUE_TASKS, load_glue_tsv
from albert_hf.tasks.glue import main as run_glue

DEFAULT_DATA = os.environ.get(
    "ALBERT_HF_SHARED_DATA", str(Path(__file__).resolve().parents[1].parent / "shared" / "data")
)
# Small enough for a CPU, large enough to learn word sentiment and some composition.
SMALL_ALBERT = "embedding_size=64,hidden_size=64,num_attention_heads=2,intermediate_size=256,num_hidden_layers=2"


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA, help="the shared data folder (glue/SST-2, spiece/)")
    parser.add_argument("--max_train_samples", type=int, default=30000)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--config_overrides", default=SMALL_ALBERT)
    parser.add_argument("--output_dir", default=None, help="default: a temporary folder")
    return parser.parse_args()


def main() -> None:
    args = parse_arguments()
    data_dir = os.path.join(args.data, "glue", "SST-2")
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="learning_sst2_")
    argv = [
        "--task_name",
        "sst2",
        "--data_dir",
        data_dir,
        "--tokenizer_name_or_path",
        os.path.join(args.data, "spiece", "albert-30k-clean.model"),
        "--config_overrides",
        args.config_overrides,
        "--do_train",
        "--do_eval",
        "--max_train_samples",
        str(args.max_train_samples),
        "--num_train_epochs",
        str(args.epochs),
        "--learning_rate",
        str(args.learning_rate),
        "--warmup_steps",
        "0.1",
        "--per_device_train_batch_size",
        str(args.batch_size),
        "--per_device_eval_batch_size",
        "128",
        "--max_seq_length",
        "128",
        "--train_sampling_strategy",
        "group_by_length",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--logging_steps",
        "100",
        "--disable_tqdm",
        "true",
        "--output_dir",
        output_dir,
        "--seed",
        "0",
    ]
    start = time.perf_counter()
    run_glue(argv)
    elapsed = time.perf_counter() - start

    results = json.loads(Path(output_dir, "eval_results.json").read_text())
    dev = load_glue_tsv(data_dir, GLUE_TASKS["sst2"], ["validation"])["validation"]
    majority = Counter(dev["label"]).most_common(1)[0][1] / len(dev)
    rows = [
        ("train examples", f"{args.max_train_samples}"),
        ("epochs", f"{args.epochs:g}"),
        ("model", args.config_overrides),
        ("wall time (train + eval)", f"{elapsed / 60:.1f} min"),
        ("dev examples", f"{len(dev)}"),
        ("majority-class dev accuracy", f"{majority:.4f}"),
        ("dev accuracy", f"{results['eval_accuracy']:.4f}"),
    ]
    width = max(len(name) for name, _ in rows)
    print("\n| SST-2 learning check" + " " * (width - 20) + " | value |")
    print("|" + "-" * (width + 2) + "|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


if __name__ == "__main__":
    main()
