"""SOP vs NSP pretraining (the paper's Table 5, in miniature): a benchmark script, not a test.

Trains the same small ALBERT twice for the same number of steps on the same text, once with sentence-order
prediction and once with next-sentence prediction, then evaluates both on WikiText-2 validation articles that
neither saw in training: MLM accuracy (beside the frequency baseline: always the most frequent masked token), and the
accuracy of the sentence head on SOP pairs and on NSP pairs. The paper's finding: an NSP-trained model stays near
chance on SOP (it learns topic, not order) while an SOP-trained one does well on both.

    python benchmarks/pretraining_sop_vs_nsp.py --data_dir ../shared/data --max_steps 3000

Training text: the Gutenberg books and Botchan, plus the WikiText-2 validation articles not held out (the last
`--held_out_articles` are). Prints one table row per mode as it finishes; `--json` keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from common import pretraining_run
from datasets import Dataset, concatenate_datasets

from albert_hf.arguments import ModelArguments
from albert_hf.data.sentence_order import load_text_documents
from albert_hf.pretraining.arguments import RECIPES, PretrainingDataArguments, PretrainingJob, RecipeArguments
from albert_hf.pretraining.corpus import make_instances
from albert_hf.pretraining.report import frequency_baselines
from albert_hf.pretraining.trainer import PretrainingArguments
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.vocabulary import train_tokenizer


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    repository = Path(__file__).resolve().parents[1]
    default_data = os.environ.get("ALBERT_HF_SHARED_DATA", str(repository.parent / "shared" / "data"))
    parser.add_argument("--data_dir", default=default_data, help="the shared data folder (corpus/ inside)")
    parser.add_argument("--output_dir", default="runs/sop_vs_nsp")
    parser.add_argument("--modes", nargs="+", default=["sop", "nsp"], choices=["sop", "nsp"])
    parser.add_argument("--max_steps", type=int, default=3000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--dupe_factor", type=int, default=5, help="passes over the text with fresh pairs")
    parser.add_argument("--learning_rate", type=float, default=RECIPES["tiny"]["learning_rate"])
    parser.add_argument("--model_overrides", default=RECIPES["tiny"]["config_overrides"])
    parser.add_argument("--held_out_articles", type=int, default=20, help="WikiText-2 articles kept for evaluation")
    parser.add_argument("--eval_instances", type=int, default=1000, help="per evaluation task")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def split_corpus(corpus: Path, held_out_articles: int) -> tuple[Dataset, Dataset]:
    """(training documents, held-out WikiText-2 articles)."""
    books = load_text_documents(corpus / "gutenberg_paragraphs.txt", split_lines=True)
    botchan = load_text_documents(corpus / "botchan.txt")
    wiki = load_text_documents(corpus / "wikitext2_valid_paragraphs.txt", split_lines=True)
    if not 0 < held_out_articles < len(wiki):
        raise SystemExit(f"--held_out_articles must be between 1 and {len(wiki) - 1}")
    held_out = wiki.select(range(len(wiki) - held_out_articles, len(wiki)))
    train = concatenate_datasets([books, botchan, wiki.select(range(len(wiki) - held_out_articles))])
    return train, held_out


def shared_tokenizer(documents: Dataset, output_dir: Path, vocab_size: int) -> AlbertHFTokenizer:
    """One vocabulary for both modes, trained on the training text (reused when already there)."""
    folder = output_dir / "tokenizer"
    if (folder / "spiece.model").is_file():
        return AlbertHFTokenizer.from_pretrained(folder)
    sentences = Dataset.from_dict({"text": [s for document in documents["sentences"] for s in document]})
    return train_tokenizer(sentences, folder, vocab_size=vocab_size, show_progress=False)


def evaluation_sets(documents: Dataset, tokenizer, args: argparse.Namespace) -> dict[str, Dataset]:
    """The held-out articles cut into SOP pairs and into NSP pairs."""
    sets = {}
    for objective in ("sop", "nsp"):
        data_args = PretrainingDataArguments(max_seq_length=args.max_seq_length, objective=objective)
        instances, _ = make_instances(documents, tokenizer, data_args, seed=args.seed + 1)
        sets[objective] = instances.shuffle(seed=args.seed).select(range(min(args.eval_instances, len(instances))))
    return sets


def run_mode(mode: str, train_documents, tokenizer, eval_sets, args: argparse.Namespace) -> dict:
    data_args = PretrainingDataArguments(
        max_seq_length=args.max_seq_length, objective=mode, dupe_factor=args.dupe_factor
    )
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
    job = PretrainingJob(
        model=ModelArguments(config_overrides=args.model_overrides),
        data=data_args,
        recipe=RecipeArguments(),
        training=training_args,
    )
    run = pretraining_run(job, tokenizer=tokenizer, documents=(train_documents, None))
    trainer, train_dataset = run.trainer, run.train_dataset
    started = time.time()
    trainer.train()
    seconds = time.time() - started
    trainer.save_model()
    metrics = trainer.evaluate(eval_dataset=eval_sets)
    baseline = frequency_baselines(trainer.get_eval_dataloader(eval_sets["sop"]))
    return {
        "mode": mode,
        "instances": len(train_dataset),
        "steps": trainer.state.global_step,
        "train_seconds": seconds,
        "mlm_accuracy": metrics["eval_sop_mlm_accuracy"],
        "mlm_baseline": baseline.mlm,
        "sop_accuracy": metrics["eval_sop_sop_accuracy"],
        "nsp_accuracy": metrics["eval_nsp_sop_accuracy"],
        "sop_baseline": baseline.sop,
        "nsp_baseline": frequency_baselines(trainer.get_eval_dataloader(eval_sets["nsp"])).sop,
    }


def format_table(rows: list[dict]) -> str:
    lines = [
        "| trained on | instances | steps | train s | MLM acc (baseline) | SOP acc (baseline) | NSP acc (baseline) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['mode'].upper()} | {row['instances']} | {row['steps']} | {row['train_seconds']:.0f} "
            f"| {row['mlm_accuracy']:.3f} ({row['mlm_baseline']:.3f}) | {row['sop_accuracy']:.3f} "
            f"({row['sop_baseline']:.3f}) | {row['nsp_accuracy']:.3f} ({row['nsp_baseline']:.3f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    args = parse_arguments()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    corpus = Path(args.data_dir) / "corpus"
    if not corpus.is_dir():
        raise SystemExit(f"missing {corpus}: pass --data_dir (the shared data folder) or set ALBERT_HF_SHARED_DATA")
    output_dir = Path(args.output_dir)
    train_documents, held_out = split_corpus(corpus, args.held_out_articles)
    tokenizer = shared_tokenizer(train_documents, output_dir, args.vocab_size)
    eval_sets = evaluation_sets(held_out, tokenizer, args)
    rows = []
    for mode in args.modes:
        rows.append(run_mode(mode, train_documents, tokenizer, eval_sets, args))
        print(f"\nEvaluation on {args.held_out_articles} held-out WikiText-2 validation articles:")
        print(format_table(rows), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
