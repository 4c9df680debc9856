"""SOP vs NSP pretraining (the paper's Table 5, in miniature): a benchmark script, not a test.

Trains the same small ALBERT twice for the same number of steps on the Gutenberg books of the shared data, once with
sentence-order prediction and once with next-sentence prediction, then evaluates both on WikiText-2 validation
articles (never seen in training): MLM accuracy, and the accuracy of the sentence head on SOP pairs and on NSP pairs.
The paper's finding is that an NSP-trained model stays near chance on SOP while an SOP-trained one solves both.

    python benchmarks/pretraining_sop_vs_nsp.py --data_dir ../shared/data --max_steps 600

About 10 minutes per mode on 2 CPU cores at the defaults. Prints one table row per mode.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from datasets import Dataset

from albert_hf.data.pretraining import load_text_documents
from albert_hf.tasks.common import ModelArguments
from albert_hf.tasks.pretraining import (
    RECIPES,
    PretrainingDataArguments,
    build_pretraining_model,
    build_trainer,
    make_instances,
)
from albert_hf.tokenization import AlbertTokenizer, train_tokenizer
from albert_hf.training.trainer import PretrainingArguments


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    repository = Path(__file__).resolve().parents[1]
    default_data = os.environ.get("ALBERT_HF_SHARED_DATA", str(repository.parent / "shared" / "data"))
    parser.add_argument("--data_dir", default=default_data, help="the shared data folder (corpus/ inside)")
    parser.add_argument("--output_dir", default="runs/sop_vs_nsp")
    parser.add_argument("--modes", nargs="+", default=["sop", "nsp"], choices=["sop", "nsp"])
    parser.add_argument("--max_steps", type=int, default=600)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--learning_rate", type=float, default=RECIPES["tiny"]["learning_rate"])
    parser.add_argument("--eval_instances", type=int, default=1000, help="per evaluation task")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def shared_tokenizer(train_file: Path, output_dir: Path, vocab_size: int) -> AlbertTokenizer:
    """One vocabulary for both modes, trained on the training books (reused when already there)."""
    folder = output_dir / "tokenizer"
    if (folder / "spiece.model").is_file():
        return AlbertTokenizer.from_pretrained(folder)
    return train_tokenizer(train_file, folder, vocab_size=vocab_size, show_progress=False)


def evaluation_sets(eval_file: Path, tokenizer, args: argparse.Namespace) -> dict[str, Dataset]:
    """WikiText-2 validation cut into SOP pairs and into NSP pairs."""
    documents = load_text_documents(eval_file, split_lines=True)
    sets = {}
    for objective in ("sop", "nsp"):
        data_args = PretrainingDataArguments(max_seq_length=args.max_seq_length, objective=objective)
        instances, _ = make_instances(documents, tokenizer, data_args, seed=args.seed + 1)
        sets[objective] = instances.shuffle(seed=args.seed).select(range(min(args.eval_instances, len(instances))))
    return sets


def run_mode(mode: str, train_documents, tokenizer, eval_sets, args: argparse.Namespace) -> dict[str, float]:
    data_args = PretrainingDataArguments(max_seq_length=args.max_seq_length, objective=mode)
    train_dataset, _ = make_instances(train_documents, tokenizer, data_args, seed=args.seed)
    overrides = RECIPES["tiny"]["config_overrides"].replace(
        "max_position_embeddings=128", f"max_position_embeddings={max(128, args.max_seq_length)}"
    )
    model = build_pretraining_model(ModelArguments(config_overrides=overrides), tokenizer, args.max_seq_length)
    training_args = PretrainingArguments(
        output_dir=str(Path(args.output_dir) / mode),
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        learning_rate=args.learning_rate,
        warmup_steps=max(1, args.max_steps // 10),
        logging_steps=max(1, args.max_steps // 20),
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        disable_tqdm=True,
    )
    trainer = build_trainer(model, tokenizer, data_args, training_args, train_dataset)
    started = time.time()
    trainer.train()
    seconds = time.time() - started
    metrics = trainer.evaluate(eval_dataset=eval_sets)
    return {
        "mode": mode,
        "instances": len(train_dataset),
        "steps": trainer.state.global_step,
        "steps_per_second": trainer.state.global_step / seconds,
        "mlm_accuracy": metrics["eval_sop_mlm_accuracy"],
        "sop_accuracy": metrics["eval_sop_sop_accuracy"],
        "nsp_accuracy": metrics["eval_nsp_sop_accuracy"],
    }


def print_table(rows: list[dict]) -> None:
    header = f"{'trained on':<10} {'instances':>9} {'steps':>6} {'steps/s':>8} " + " ".join(
        f"{name:>8}" for name in ("MLM acc", "SOP acc", "NSP acc")
    )
    print("\nEvaluation on WikiText-2 validation (held out):")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['mode'].upper():<10} {row['instances']:>9} {row['steps']:>6} {row['steps_per_second']:>8.2f} "
            f"{row['mlm_accuracy']:>8.3f} {row['sop_accuracy']:>8.3f} {row['nsp_accuracy']:>8.3f}"
        )


def main() -> None:
    args = parse_arguments()
    corpus = Path(args.data_dir) / "corpus"
    train_file, eval_file = corpus / "gutenberg_paragraphs.txt", corpus / "wikitext2_valid_paragraphs.txt"
    for path in (train_file, eval_file):
        if not path.is_file():
            raise SystemExit(f"missing {path}: pass --data_dir (the shared data folder) or set ALBERT_HF_SHARED_DATA")
    output_dir = Path(args.output_dir)
    tokenizer = shared_tokenizer(train_file, output_dir, args.vocab_size)
    train_documents = load_text_documents(train_file, split_lines=True)
    eval_sets = evaluation_sets(eval_file, tokenizer, args)
    rows = []
    for mode in args.modes:
        rows.append(run_mode(mode, train_documents, tokenizer, eval_sets, args))
        print_table(rows)


if __name__ == "__main__":
    main()
