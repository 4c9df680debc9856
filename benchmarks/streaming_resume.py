"""What resuming a streamed pretraining run (`--streaming`) costs: the Trainer skips the consumed batches by reading
them again (files, tokenization, SOP instances, shuffle buffer, masking collator), before the first new step.

    python benchmarks/streaming_resume.py [--corpus ../shared/data/corpus] [--batches 300] [--resume_step 10000]

Times `skip_first_batches` on the Trainer's own training dataloader over the real corpus (the tiny recipe: batch 32,
length 128, ALBERT's 30k SentencePiece model), for `--batches` batches, and prints the rate and the time a resume at
`--resume_step` (x gradient accumulation) would spend skipping, with the stream's length in batches (one pass over
the corpus): a resume past the first pass cannot be skipped to within that pass.
"""

from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time
from pathlib import Path

from accelerate import skip_first_batches

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(SHARED / "corpus"))
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--resume_step", type=int, default=10_000)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--count_pass", action="store_true", help="also count the batches of one full pass")
    cli = parser.parse_args()

    from albert_hf.tasks.common import load_tokenizer
    from albert_hf.tasks.pretraining import (
        RECIPES,
        build_pretraining_model,
        build_trainer,
        parse_pretraining_args,
        prepare_datasets,
    )

    # The English paragraph files (the Gutenberg books as paragraphs, WikiText-2, Botchan); the raw books under
    # gutenberg/ repeat gutenberg_paragraphs.txt, and one of them is not UTF-8.
    files = sorted(glob.glob(os.path.join(cli.corpus, "*.txt")))
    with tempfile.TemporaryDirectory() as output_dir:
        argv = [
            "--recipe",
            "tiny",
            "--streaming",
            "--lines_are_paragraphs",
            "--train_files",
            *files,
            "--tokenizer_name_or_path",
            str(SHARED / "spiece" / "albert-30k-clean.model"),
            "--output_dir",
            output_dir,
            "--use_cpu",
            "--report_to",
            "none",
            "--gradient_accumulation_steps",
            str(cli.gradient_accumulation_steps),
            "--max_steps",
            "20000",
        ]
        model_args, data_args, _, training_args = parse_pretraining_args(argv)
        tokenizer = load_tokenizer(model_args)
        train, _, _ = prepare_datasets(data_args, tokenizer, training_args.seed)
        model = build_pretraining_model(model_args, tokenizer, data_args.max_seq_length)
        trainer = build_trainer(model, tokenizer, data_args, training_args, train)
        loader = trainer.get_train_dataloader()
        started = time.perf_counter()
        first = next(iter(skip_first_batches(loader, cli.batches)))
        seconds = time.perf_counter() - started
        assert first["input_ids"].shape[0] == RECIPES["tiny"]["per_device_train_batch_size"]
        rate = cli.batches / seconds
        to_skip = cli.resume_step * cli.gradient_accumulation_steps
        print(f"corpus: {len(files)} files under {cli.corpus}")
        print(
            f"| batches skipped | seconds | batches/s | resume at step {cli.resume_step}: batches to skip | "
            "estimated skip time |"
        )
        print("| --- | --- | --- | --- | --- |")
        print(f"| {cli.batches} | {seconds:.1f} | {rate:.1f} | {to_skip} | {to_skip / rate / 60:.1f} min |")
        if cli.count_pass:
            started = time.perf_counter()
            per_pass = sum(1 for _ in loader)
            print(f"one pass over the corpus: {per_pass} batches of 32 ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
