"""Learning check: a small ALBERT trained from scratch learns a fine-tuning task, well above a trivial baseline.

    --task sst2: the real GLUE job (`albert_hf.scripts.glue.main`) on the local SST-2 tsv files; the dev accuracy is
                 compared with the majority class.
    --task conll: the real NER job (`albert_hf.scripts.ner.main`) on the local CoNLL-2003 files; the word-level scores on
                  the validation file (overall and per entity type) are compared with zero.
    --task classify: `albert-hf classify` (`albert_hf.scripts.classify.main`) on the same SST-2 sentences written as a
                  user's own table (train: parquet, dev: jsonl, labels as the names "negative"/"positive"): the labels
                  are inferred from the table; the dev accuracy and macro-F1 are compared with the majority class.

Each runs with the real 30k SentencePiece vocabulary and a small randomly initialised ALBERT, on CPU, then prints a
table. Meant to finish within 15 minutes on 2 CPU cores:

    PYTHONPATH=. python benchmarks/learning.py --task sst2 [--data ../shared/data] [--max_train_samples 30000] \
        [--epochs 1]
    PYTHONPATH=. python benchmarks/learning.py --task conll [--data ../shared/data] [--max_train_samples 14041] \
        [--epochs 2]
    PYTHONPATH=. python benchmarks/learning.py --task classify [--max_train_samples 30000] [--epochs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

DEFAULT_DATA = os.environ.get(
    "ALBERT_HF_SHARED_DATA", str(Path(__file__).resolve().parents[1].parent / "shared" / "data")
)
# Small enough for a CPU, large enough to learn word sentiment and some composition, or entity names.
SMALL_ALBERT = "embedding_size=64,hidden_size=64,num_attention_heads=2,intermediate_size=256,num_hidden_layers=2"

# What differs between the tasks: the job's data flags, the defaults, and the figures reported.
TASKS = {
    "sst2": dict(title="SST-2", max_train_samples=30000, epochs=1.0, max_seq_length=128, unit="examples"),
    "conll": dict(title="CoNLL-2003", max_train_samples=14041, epochs=2.0, max_seq_length=256, unit="sentences"),
    "classify": dict(title="SST-2 as a table", max_train_samples=30000, epochs=1.0, max_seq_length=128, unit="rows"),
}
SST2_LABEL_NAMES = ("negative", "positive")


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--data", default=DEFAULT_DATA, help="the shared data folder (glue/SST-2, conll2003/, spiece/)")
    parser.add_argument(
        "--max_train_samples", type=int, help="training examples (default: sst2 30000, conll 14041 = all of train)"
    )
    parser.add_argument("--epochs", type=float, help="default: sst2 1, conll 2")
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--config_overrides", default=SMALL_ALBERT)
    parser.add_argument("--output_dir", default=None, help="default: a temporary folder")
    args = parser.parse_args()
    task = TASKS[args.task]
    args.max_train_samples = task["max_train_samples"] if args.max_train_samples is None else args.max_train_samples
    args.epochs = task["epochs"] if args.epochs is None else args.epochs
    return args


def write_sst2_tables(data: str, folder: str) -> tuple[str, str]:
    """SST-2's train and dev sentences as a user's own files: train.parquet and dev.jsonl, labels by name."""
    from albert_hf.data.glue_files import GLUE_TASKS, load_glue_tsv

    splits = load_glue_tsv(os.path.join(data, "glue", "SST-2"), GLUE_TASKS["sst2"], ["train", "validation"])
    paths = []
    for split, path in (("train", "train.parquet"), ("validation", "dev.jsonl")):
        rows = splits[split].map(lambda row: {"review": row["sentence1"], "sentiment": SST2_LABEL_NAMES[row["label"]]})
        rows = rows.select_columns(["review", "sentiment"])
        path = os.path.join(folder, path)
        rows.to_parquet(path) if path.endswith(".parquet") else rows.to_json(path, lines=True, force_ascii=False)
        paths.append(path)
    return paths[0], paths[1]


def data_arguments(task: str, data: str, folder: str) -> list[str]:
    """The job's flags that choose its data and what it evaluates."""
    if task == "classify":
        train, dev = write_sst2_tables(data, folder)
        return ["--train_file", train, "--validation_file", dev, "--text_column", "review"] + [
            "--label_column",
            "sentiment",
            "--do_eval",
        ]
    if task == "sst2":
        return ["--task_name", "sst2", "--data_dir", os.path.join(data, "glue", "SST-2"), "--do_eval"]
    conll = os.path.join(data, "conll2003")
    return [
        "--train_file",
        os.path.join(conll, "train.txt"),
        "--test_file",
        os.path.join(conll, "valid.txt"),
        "--do_predict",
    ]


def run_job(task: str, argv: list[str]) -> None:
    if task == "sst2":
        from albert_hf.scripts.glue import main
    elif task == "classify":
        from albert_hf.scripts.classify import main
    else:
        from albert_hf.scripts.ner import main
    main(argv)


def result_rows(task: str, args: argparse.Namespace, output_dir: str) -> list[tuple[str, str]]:
    """The evaluation figures: SST-2 dev accuracy beside the majority class; CoNLL entity scores, overall, per type."""
    if task == "classify":
        import pandas

        results = json.loads(Path(output_dir, "eval_results.json").read_text())
        dev = pandas.read_json(Path(output_dir).parent / "dev.jsonl", lines=True)["sentiment"]
        majority = dev.value_counts().iloc[0] / len(dev)
        config = json.loads(Path(output_dir, "config.json").read_text())
        return [
            ("dev rows", f"{len(dev)}"),
            ("labels inferred (id2label)", ", ".join(f"{i}: {name}" for i, name in config["id2label"].items())),
            ("majority-class dev accuracy", f"{majority:.4f}"),
            # Always the majority class: its F1 is 2p/(1+p) (precision p, recall 1), the other class's 0.
            ("majority-class dev macro-F1", f"{majority / (1 + majority):.4f}"),
            ("dev accuracy", f"{results['eval_accuracy']:.4f}"),
            ("dev macro-F1", f"{results['eval_macro_f1']:.4f}"),
        ]
    if task == "sst2":
        from albert_hf.data.glue_files import GLUE_TASKS, load_glue_tsv

        results = json.loads(Path(output_dir, "eval_results.json").read_text())
        dev = load_glue_tsv(os.path.join(args.data, "glue", "SST-2"), GLUE_TASKS["sst2"], ["validation"])["validation"]
        majority = Counter(dev["label"]).most_common(1)[0][1] / len(dev)
        return [
            ("dev examples", f"{len(dev)}"),
            ("majority-class dev accuracy", f"{majority:.4f}"),
            ("dev accuracy", f"{results['eval_accuracy']:.4f}"),
        ]
    results = json.loads(Path(output_dir, "predict_results.json").read_text())
    rows = [
        ("valid sentences", f"{results['predict_samples']}"),
        ("entity precision", f"{results['predict_precision']:.4f}"),
        ("entity recall", f"{results['predict_recall']:.4f}"),
        ("entity F1", f"{results['predict_f1']:.4f}"),
        ("token accuracy", f"{results['predict_accuracy']:.4f}"),
    ]
    return rows + [
        (f"{kind} F1 ({results[f'predict_{kind}_number']} entities)", f"{results[f'predict_{kind}_f1']:.4f}")
        for kind in ("PER", "ORG", "LOC", "MISC")
    ]


def main() -> None:
    args = parse_arguments()
    task = TASKS[args.task]
    workdir = args.output_dir or tempfile.mkdtemp(prefix=f"learning_{args.task}_")
    output_dir = os.path.join(workdir, "model")
    argv = data_arguments(args.task, args.data, workdir) + [
        "--tokenizer_name_or_path",
        os.path.join(args.data, "spiece", "albert-30k-clean.model"),
        "--config_overrides",
        args.config_overrides,
        "--do_train",
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
        str(task["max_seq_length"]),
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
    run_job(args.task, argv)
    elapsed = time.perf_counter() - start

    evaluation = "predict" if args.task == "conll" else "eval"
    rows = [
        (f"train {task['unit']}", f"{args.max_train_samples}"),
        ("epochs", f"{args.epochs:g}"),
        ("model", args.config_overrides),
        (f"wall time (train + {evaluation})", f"{elapsed / 60:.1f} min"),
        *result_rows(args.task, args, output_dir),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"\n| {(task['title'] + ' learning check').ljust(width)} | value |")
    print("|" + "-" * (width + 2) + "|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


if __name__ == "__main__":
    main()
