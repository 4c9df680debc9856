"""How the quickstart's settings were chosen: held-out MLM and SOP accuracy of `albert-hf quickstart` variants.

    python benchmarks/quickstart_sweep.py                       # every named configuration below
    python benchmarks/quickstart_sweep.py --configs default long-1200 --threads 1

Each configuration is the quickstart's command line, run by the script behind `albert-hf quickstart`
(`albert_hf.scripts.quickstart.main`) with a few options changed; the figures are those of its closing report. The figures are accuracies at a fixed number of steps, so they do
not depend on the machine's load; the CPU seconds per step (process time, all threads) are there to price a
configuration against the 5-minute budget, and the wall time is only indicative on a shared machine. Each row prints
as it finishes; `--json` keeps them.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import resource
import tempfile
import time
from unittest import mock

import torch

from albert_hf.pretraining.arguments import RECIPES
from albert_hf.scripts import quickstart

TINY = RECIPES["tiny"]["config_overrides"]
WIDE = TINY.replace("embedding_size=64,hidden_size=128", "embedding_size=128,hidden_size=256").replace(
    "intermediate_size=512", "intermediate_size=1024"
)

# The baseline the other rows are compared with: the tiny recipe for 300 steps at length 128, dupe_factor 1.
FIRST = [
    "--max_steps",
    "300",
    "--max_seq_length",
    "128",
    "--batch_size",
    "32",
    "--learning_rate",
    "5e-3",
    "--dupe_factor",
    "1",
    "--vocab_size",
    "2000",
    "--model_overrides",
    TINY,
]
# name -> quickstart options (complete, so that a row means the same whatever the current defaults are)
TWO_LAYERS = TINY.replace("num_hidden_layers=4", "num_hidden_layers=2")
L64 = FIRST + ["--max_seq_length", "64", "--max_steps", "1200", "--dupe_factor", "5"]
CONFIGS: dict[str, list[str]] = {
    "first-settings": FIRST,
    "first-settings-modules": FIRST + ["--embedded", "language-reference", "stdlib-modules"],
    "L64-1200": L64,
    "L64-1200-modules": L64 + ["--embedded", "language-reference", "stdlib-modules"],
    "L64-1200-lr1e-2": L64 + ["--learning_rate", "1e-2"],
    "L64-1200-dupe10": L64 + ["--dupe_factor", "10"],
    "L64-1200-b64": L64 + ["--batch_size", "64"],
    "L128-1200": L64 + ["--max_seq_length", "128"],
    "L64-2000-2layers": L64
    + [
        "--max_steps",
        "2000",
        "--dupe_factor",
        "10",
        "--model_overrides",
        TWO_LAYERS,
    ],
    "L64-3000-2layers": L64 + ["--max_steps", "3000", "--dupe_factor", "10", "--model_overrides", TWO_LAYERS],
    "L64-2000-2layers-docstrings": L64
    + [
        "--max_steps",
        "2000",
        "--dupe_factor",
        "10",
        "--model_overrides",
        TWO_LAYERS,
        "--embedded",
        "stdlib-docstrings",
    ],
    "L64-1200-wide": L64 + ["--model_overrides", WIDE],
}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_quickstart_script(argv: list[str]) -> dict:
    """Run the quickstart script on `argv`, its printed lines and progress bars hidden, and return what it passed
    to its closing report (`quickstart_report`'s arguments by name: trainer, stats, metrics, baselines...): the
    baselines and corpus counts are in no file of the output folder."""
    with (
        mock.patch.object(quickstart, "quickstart_report", wraps=quickstart.quickstart_report) as report,
        contextlib.redirect_stdout(io.StringIO()),
    ):
        quickstart.main([*argv, "--disable_tqdm", "true"])
    return (
        inspect.signature(quickstart.quickstart_report)
        .bind(*report.call_args.args, **report.call_args.kwargs)
        .arguments
    )


def run_config(name: str, extra: list[str], seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="quickstart_sweep_") as output_dir:
        cpu, wall = cpu_seconds(), time.time()
        result = run_quickstart_script(CONFIGS[name] + extra + ["--seed", str(seed), "--output_dir", output_dir])
        cpu, wall = cpu_seconds() - cpu, time.time() - wall
    trainer, stats, metrics, baselines = result["trainer"], result["stats"], result["metrics"], result["baselines"]
    train = next(e for e in reversed(trainer.state.log_history) if "train_runtime" in e)
    return {
        "config": name,
        "options": " ".join(CONFIGS[name] + extra),
        "seed": seed,
        "steps": trainer.state.global_step,
        "train_instances": stats.train_instances,
        "eval_instances": stats.eval_instances,
        "mlm_accuracy": metrics["eval_mlm_accuracy"],
        "mlm_baseline": baselines.mlm,
        "mlm_ratio": metrics["eval_mlm_accuracy"] / baselines.mlm,
        "sop_accuracy": metrics["eval_sop_accuracy"],
        "sop_baseline": baselines.sop,
        "train_seconds": train["train_runtime"],
        "cpu_seconds": cpu,
        "wall_seconds": wall,
        "curve": [
            (e["step"], e["eval_mlm_accuracy"], e["eval_sop_accuracy"])
            for e in trainer.state.log_history
            if "eval_mlm_accuracy" in e
        ],
    }


HEADER = (
    "| config | steps | instances (train / held-out) | MLM acc | MLM baseline | ratio | SOP acc | SOP baseline "
    "| CPU s | wall s |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def format_row(row: dict) -> str:
    return (
        f"| {row['config']} | {row['steps']} | {row['train_instances']} / {row['eval_instances']} "
        f"| {row['mlm_accuracy']:.3f} | {row['mlm_baseline']:.3f} | {row['mlm_ratio']:.2f}x "
        f"| {row['sop_accuracy']:.3f} | {row['sop_baseline']:.3f} | {row['cpu_seconds']:.0f} | {row['wall_seconds']:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[42])
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("extra", nargs="*", help="options added to every configuration (after --)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    print(HEADER, flush=True)
    for name in args.configs:
        for seed in args.seeds:
            rows.append(run_config(name, args.extra, seed))
            print(format_row(rows[-1]), flush=True)
            if args.json:
                with open(args.json, "w", encoding="utf-8") as file:
                    json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
