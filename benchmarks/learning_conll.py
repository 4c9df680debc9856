"""Learning check: a small ALBERT trained from scratch on CoNLL-2003 reaches an entity F1 well above zero.

Runs the real NER job (`albert_hf.tasks.ner.main`) on the local CoNLL files, with the real 30k SentencePiece vocabulary
and a small randomly initialised ALBERT, on CPU, then prints a table with the word-level scores on the validation
file (overall and per entity type). Meant to finish within 15 minutes on 2 CPU cores:

    PYTHONPATH=. python benchmarks/learning_conll.py [--data ../shared/data] [--max_train_samples 14041] [--epochs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from albert_hf.tasks.ner import main as run_ner

DEFAULT_DATA = os.environ.get(
    "ALBERT_HF_SHARED_DATA", str(Path(__file__).resolve().parents[1].parent / "shared" / "data")
)
SMALL_ALBERT = "embedding_size=64,hidden_size=64,num_attention_heads=2,intermediate_size=256,num_hidden_layers=2"


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA, help="the shared data folder (conll2003/, spiece/)")
    parser.add_argument("--max_train_samples", type=int, default=14041, help="sentences (default: all of train)")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--config_overrides", default=SMALL_ALBERT)
    parser.add_argument("--output_dir", default=None, help="default: a temporary folder")
    return parser.parse_args()


def main() -> None:
    args = parse_arguments()
    conll = os.path.join(args.data, "conll2003")
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="learning_conll_")
    argv = [
        "--train_file",
        os.path.join(conll, "train.txt"),
        "--test_file",
        os.path.join(conll, "valid.txt"),
        "--tokenizer_name_or_path",
        os.path.join(args.data, "spiece", "albert-30k-clean.model"),
        "--config_overrides",
        args.config_overrides,
        "--do_train",
        "--do_predict",
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
        "256",
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
    run_ner(argv)
    elapsed = time.perf_counter() - start

    results = json.loads(Path(output_dir, "predict_results.json").read_text())
    rows = [
        ("train sentences", f"{args.max_train_samples}"),
        ("epochs", f"{args.epochs:g}"),
        ("model", args.config_overrides),
        ("wall time (train + predict)", f"{elapsed / 60:.1f} min"),
        ("valid sentences", f"{results['predict_samples']}"),
        ("entity precision", f"{results['predict_precision']:.4f}"),
        ("entity recall", f"{results['predict_recall']:.4f}"),
        ("entity F1", f"{results['predict_f1']:.4f}"),
        ("token accuracy", f"{results['predict_accuracy']:.4f}"),
    ]
    rows += [
        (f"{kind} F1 ({results[f'predict_{kind}_number']} entities)", f"{results[f'predict_{kind}_f1']:.4f}")
        for kind in ("PER", "ORG", "LOC", "MISC")
    ]
    width = max(len(name) for name, _ in rows)
    print("\n| CoNLL-2003 learning check" + " " * (width - 25) + " | value |")
    print("|" + "-" * (width + 2) + "|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


if __name__ == "__main__":
    main()
