"""The paper's fine-tuning protocol, measured on real GLUE dev sets with a small ALBERT on a CPU: how far one run lands
from the median of five, what best-dev selection adds over the last step's model, and RTE started from another
pair-classification task's fine-tuned model against RTE from the pretrained one.

    nice -n 10 python benchmarks/finetuning_protocol.py --output_dir runs/protocol

Every run is the real command line (`albert-hf quickstart`, `albert-hf glue`), printed before it runs:

1. Pretraining, once: `albert-hf quickstart --corpus ../shared/data/corpus` (the corpus folder's English text files:
   the Gutenberg books, WikiText-2 validation, Botchan), the quickstart's defaults otherwise (a 2,000-piece
   vocabulary, a 2-layer ALBERT of width 128, 2,000 LAMB steps). `--pretrained_dir` skips it.
2. Each task (RTE, MRPC, CoLA, STS-B): `albert-hf glue --preset <task> --seeds 0,1,2,3,4` from that model. The
   preset's best-dev selection stays (the dev set scored with the task's metric at every `--eval_steps`, the best
   checkpoint kept); its step budget and learning rate, the paper's for ALBERT-base and larger, are replaced by a
   budget this model trains in minutes: `--max_steps 300 --eval_steps 30 --learning_rate 3e-4 --warmup_steps 30
   --global_batch_size 32 --max_seq_length 128`.
3. RTE again, from the median MRPC model (`--init_from_task_model <mrpc>/seed-<median>`), with the same options:
   MNLI, which the paper started RTE from, is not available offline; MRPC is the other sentence-pair classification
   task here.

Each set of seeds is the runner's own (`albert_hf/seed_runs.py`), so a rerun skips what is finished. The tables are
read from the sets' `seeds_summary.json` (the last-step figures from each seed's logged evaluation at step 300) and
printed; `<output_dir>/table.md` holds them, `<output_dir>/commands.txt` the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPOSITORY.parent / "shared" / "data"))
TASKS = {"rte": "RTE", "mrpc": "MRPC", "cola": "CoLA", "stsb": "STS-B"}
SHOWN_METRIC = {"accuracy": "accuracy", "matthews_correlation": "MCC", "pearson": "Pearson"}


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--output_dir", type=Path, default=Path("runs/protocol"))
    parser.add_argument("--pretrained_dir", type=Path, help="fine-tune this model instead of pretraining one")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--max_steps", type=int, default=300)
    parser.add_argument("--eval_steps", type=int, default=30)
    parser.add_argument("--learning_rate", type=float, default=3e-4)
    parser.add_argument("--warmup_steps", type=int, default=30)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--no_transfer", action="store_true", help="leave out RTE from MRPC's model")
    return parser.parse_args(argv)


def run(command: list[str], log: Path, commands: Path) -> float:
    """Run `albert-hf <command>` (its output into `log`), after printing and recording it; its wall time."""
    shown = "albert-hf " + " ".join(shlex.quote(part) for part in command)
    print(f"$ {shown}", flush=True)
    with commands.open("a", encoding="utf-8") as handle:
        handle.write(shown + "\n")
    started = time.time()
    with log.open("a", encoding="utf-8") as output:
        status = subprocess.call([sys.executable, "-m", "albert_hf.cli", *command], stdout=output, stderr=output)
    if status:
        raise SystemExit(f"exit status {status}: see {log}")
    return time.time() - started


def finetune(args, task: str, start: list[str], name: str) -> dict:
    """One set of seeds of `task` into `<output_dir>/<name>`; its summary."""
    folder = args.output_dir / name
    command = [
        *("glue", "--task_name", task, "--data_dir", str(args.data_dir / "glue" / TASKS[task]), *start),
        *("--preset", task, "--do_train", "--do_eval", "--seeds", args.seeds, "--output_dir", str(folder)),
        *("--max_steps", str(args.max_steps), "--eval_steps", str(args.eval_steps)),
        *("--learning_rate", str(args.learning_rate), "--warmup_steps", str(args.warmup_steps)),
        *("--global_batch_size", "32", "--max_seq_length", str(args.max_seq_length)),
        *("--per_device_eval_batch_size", "128", "--report_to", "none", "--disable_tqdm", "true"),
    ]
    seconds = run(command, args.output_dir / f"{name}.log", args.output_dir / "commands.txt")
    print(f"  {name}: {seconds / 60:.1f} min", flush=True)
    return json.loads((folder / "seeds_summary.json").read_text())


def majority_baseline(data_dir: Path, task: str) -> float | None:
    """The dev accuracy of always answering the most frequent dev label (None for CoLA's MCC and STS-B's Pearson,
    whose constant-prediction value is 0 or undefined)."""
    from albert_hf.data.glue_files import GLUE_TASKS, load_glue_tsv

    if task not in ("rte", "mrpc"):
        return None
    labels = load_glue_tsv(str(data_dir / "glue" / TASKS[task]), GLUE_TASKS[task], ["validation"])["validation"]
    counts = [labels["label"].count(label) for label in set(labels["label"])]
    return max(counts) / sum(counts)


def per_seed(summary: dict, key: str | None = None) -> list[float]:
    metric = summary["metric"]
    return [run[key] if key else run["metrics"][metric] for run in summary["runs"]]


def x100(value: float) -> str:
    return f"{100 * value:.1f}"


def tables(args, summaries: dict[str, dict]) -> str:
    lines = [
        "**One run against the median of five** (dev set, the best-dev model of each seed; metric x 100):",
        "",
        "| task | metric | median of 5 | mean ± std | min – max | farthest run from the median | per seed (0-4) | "
        "majority class |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for task in args.tasks:
        summary = summaries[task]
        stats, values = summary["statistics"][summary["metric"]], per_seed(summary)
        farthest = max(abs(value - stats["median"]) for value in values)
        baseline = majority_baseline(args.data_dir, task)
        lines.append(
            f"| {TASKS[task]} | {SHOWN_METRIC[summary['metric']]} | {x100(stats['median'])} | "
            f"{x100(stats['mean'])} ± {x100(stats['std'])} | {x100(stats['min'])} – {x100(stats['max'])} | "
            f"{x100(farthest)} | {', '.join(x100(value) for value in values)} | "
            f"{x100(baseline) if baseline is not None else '0 (constant)'} |"
        )
    lines += [
        "",
        f"**Best-dev selection against the last step** (dev set, metric x 100; evaluations every {args.eval_steps} "
        f"steps of {args.max_steps}):",
        "",
        "| task | median, best-dev | median, last step | mean of (best-dev - last step) | seeds where the kept step "
        "is not the last | kept steps |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for task in args.tasks:
        summary = summaries[task]
        metric = summary["metric"]
        best, last = per_seed(summary), per_seed(summary, f"last_step_{metric}")
        kept = [run.get("best_step") for run in summary["runs"]]
        differences = [b - a for b, a in zip(best, last)]
        lines.append(
            f"| {TASKS[task]} | {x100(summary['statistics'][metric]['median'])} | "
            f"{x100(summary['statistics'][f'last_step_{metric}']['median'])} | "
            f"{100 * sum(differences) / len(differences):+.1f} | "
            f"{sum(step != args.max_steps for step in kept)} of {len(kept)} | {', '.join(map(str, kept))} |"
        )
    if "rte_from_mrpc" in summaries:
        lines += [
            "",
            "**RTE started from MRPC's fine-tuned model against from the pretrained model** (dev accuracy x 100; "
            "the best-dev model of each seed, and the last step's):",
            "",
            "| RTE started from | median of 5 | mean ± std | min – max | per seed (0-4) | last step: median | "
            "last step: mean ± std |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for name, label in (("rte", "the pretrained model"), ("rte_from_mrpc", "MRPC's median model")):
            summary = summaries[name]
            stats, values = summary["statistics"]["accuracy"], per_seed(summary)
            last = summary["statistics"]["last_step_accuracy"]
            lines.append(
                f"| {label} | {x100(stats['median'])} | {x100(stats['mean'])} ± {x100(stats['std'])} | "
                f"{x100(stats['min'])} – {x100(stats['max'])} | {', '.join(x100(value) for value in values)} | "
                f"{x100(last['median'])} | {x100(last['mean'])} ± {x100(last['std'])} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    pretrained = args.pretrained_dir
    if pretrained is None:
        pretrained = args.output_dir / "pretrained"
        if not (pretrained / "config.json").is_file():
            command = ["quickstart", "--corpus", str(args.data_dir / "corpus"), "--output_dir", str(pretrained)]
            seconds = run(command, args.output_dir / "pretrained.log", args.output_dir / "commands.txt")
            print(f"  pretraining: {seconds / 60:.1f} min", flush=True)
    summaries = {task: finetune(args, task, ["--model_name_or_path", str(pretrained)], task) for task in args.tasks}
    if not args.no_transfer and "rte" in args.tasks and "mrpc" in args.tasks:
        source = args.output_dir / "mrpc" / summaries["mrpc"]["median_folder"]
        summaries["rte_from_mrpc"] = finetune(args, "rte", ["--init_from_task_model", str(source)], "rte_from_mrpc")
    table = tables(args, summaries)
    (args.output_dir / "table.md").write_text(table, encoding="utf-8")
    print(f"\n{table}\nWall time: {(time.time() - started) / 60:.1f} min (runs skipped as finished not counted)")


if __name__ == "__main__":
    main()
