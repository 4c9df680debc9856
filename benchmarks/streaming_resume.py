"""What resuming a streamed pretraining run (`--streaming`) costs: Trainer's replay of the trained batches (how a
streamed run resumed before it saved its position, and how it still resumes from a checkpoint without one) against
the position saved in the checkpoint (`ResumableInstanceStream`), at several steps of one long pass.

    python benchmarks/streaming_resume.py [--corpus ../shared/data/corpus] [--resume_steps 0 1000 10000]
        [--replay_batches 1000] [--copies 34] [--shuffle_buffer_size 10000]

The tiny recipe (batch 32, length 128, ALBERT's 30k SentencePiece model, windows of 10,000 instances) over the real
corpus's English paragraph files, listed `--copies` times so that one pass is longer than the last resume step (as a
corpus of a few hundred MB would be). For each step S (0: the start of a run, for comparison):

  * replay: Trainer's `skip_first_batches` over S x accumulation batches of its own training DataLoader, then the
    first new batch. Timed for real up to `--replay_batches` batches; beyond that, estimated from the measured rate.
  * read again: what a checkpoint without a saved position costs now: the stream reads its pass again up to the
    trained instances (`read_again_until`: reading, tokenizing, cutting, no collating), then the first new batch.
  * position: the stream's position after S steps, as the checkpoint of step S saves it (taken from a run of the
    stream through S, not timed), given to the Trainer's stream (`resume_from_state`), then the first new batch of
    the same DataLoader: the time and the documents read. That batch is checked against the uninterrupted stream's
    (and against the replayed one where both are measured): equal, tensor for tensor.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import os
import tempfile
import time
from pathlib import Path

import torch
from accelerate import skip_first_batches

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def build_trainer(files: list[str], output_dir: str, accumulation: int, window: int):
    from common import pretraining_run

    from albert_hf.pretraining.arguments import parse_pretraining_args

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
        str(accumulation),
        "--max_steps",
        "20000",
        "--shuffle_buffer_size",
        str(window),
    ]
    return pretraining_run(parse_pretraining_args(argv)).trainer


def saved_positions(stream, consumed_counts: list[int], batch_size: int) -> dict[int, tuple[dict, list[dict]]]:
    """consumed -> (the position a checkpoint saves after that many instances of pass 0, the next batch's rows)."""
    stream.set_epoch(0)
    rows = iter(stream)
    found, read = {}, 0
    for consumed in sorted(consumed_counts):
        for _ in itertools.islice(rows, consumed - read):
            pass
        following = list(itertools.islice(rows, batch_size))
        read = consumed + len(following)
        if len(following) < batch_size:
            raise SystemExit(f"one pass holds fewer than {consumed + batch_size} instances: raise --copies.")
        found[consumed] = (stream.position_state(0, consumed), following)
    return found


def same_batch(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(torch.equal(first[key], second[key]) for key in first)


def timed_first_batch(loader) -> tuple[dict, float]:
    started = time.perf_counter()
    batch = next(iter(loader))
    return batch, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(SHARED / "corpus"))
    parser.add_argument("--resume_steps", type=int, nargs="+", default=[0, 1000, 10_000])
    parser.add_argument("--replay_batches", type=int, default=1000, help="replays longer than this are estimated")
    parser.add_argument("--copies", type=int, default=34, help="times the files are listed: one pass's length")
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--shuffle_buffer_size", type=int, default=10_000, help="instances per shuffled window")
    cli = parser.parse_args()

    # The English paragraph files (the Gutenberg books as paragraphs, WikiText-2, Botchan); the raw books under
    # gutenberg/ repeat gutenberg_paragraphs.txt, and one of them is not UTF-8.
    files = sorted(glob.glob(os.path.join(cli.corpus, "*.txt")))
    accumulation = cli.gradient_accumulation_steps
    with tempfile.TemporaryDirectory() as output_dir:
        trainer = build_trainer(files * cli.copies, output_dir, accumulation, cli.shuffle_buffer_size)
        stream, batch_size = trainer.train_dataset, trainer.args.train_batch_size
        consumed = {step: step * accumulation * batch_size for step in cli.resume_steps}
        started = time.perf_counter()
        positions = saved_positions(type(stream)(**stream_arguments(stream)), list(consumed.values()), batch_size)
        print(f"(the uninterrupted stream through step {max(cli.resume_steps)}: {time.perf_counter() - started:.0f} s)")

        replay_rate, replayed = None, {}
        replay_batches = min(cli.replay_batches, max(consumed.values()) // batch_size)
        if replay_batches:
            loader = trainer.get_train_dataloader()
            loader.set_epoch(0)
            batch, seconds = timed_first_batch(skip_first_batches(loader, replay_batches))
            replay_rate = replay_batches / seconds
            replayed[replay_batches * batch_size] = (batch, seconds)

        print(
            f"corpus: {len(files)} files under {cli.corpus}, listed {cli.copies} times (one pass); "
            f"--shuffle_buffer_size {cli.shuffle_buffer_size}"
        )
        print(
            "| resume at step | batches to skip | replay (Trainer reads them again) | read again (the stream) | "
            "saved position | documents read to resume | first batch as uninterrupted |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for step in cli.resume_steps:
            state, following = positions[consumed[step]]
            expected = trainer.data_collator(following)
            read_again, equal_again = "nothing to skip", True
            if consumed[step]:
                started = time.perf_counter()
                stream.read_again_until(0, consumed[step])
                loader = trainer.get_train_dataloader()
                loader.set_epoch(0)
                batch, seconds = timed_first_batch(loader)
                read_again = f"{time.perf_counter() - started:.1f} s"
                equal_again = same_batch(batch, expected)
            read_before = stream.documents_read
            problem = stream.resume_from_state(state, 0, consumed[step])
            assert problem is None, problem
            loader = trainer.get_train_dataloader()
            loader.set_epoch(0)
            batch, seconds = timed_first_batch(loader)
            documents = stream.documents_read - read_before
            equal = same_batch(batch, expected) and equal_again
            batches = consumed[step] // batch_size
            if not batches:
                replay = "nothing to skip"
            elif consumed[step] in replayed:
                replay_batch, replay_seconds = replayed[consumed[step]]
                replay = f"{replay_seconds:.1f} s (measured)"
                equal = equal and same_batch(replay_batch, expected)
            elif replay_rate:
                replay = f"{batches / replay_rate / 60:.1f} min (at {replay_rate:.1f} batches/s)"
            else:
                replay = "not measured"
            print(
                f"| {step:,} | {batches:,} | {replay} | {read_again} | {seconds:.1f} s | {documents:,} "
                f"| {'yes' if equal else 'NO'} |"
            )


def stream_arguments(stream) -> dict:
    """The arguments that make another stream equal to `stream` (to take positions from without touching it)."""
    options = stream.instance_options
    return dict(
        files=[path for path, _, _ in stream.signatures],
        tokenizer=stream.tokenizer,
        window_size=stream.window_size,
        seed=stream.seed,
        split_lines=stream.split_lines,
        sentence_splitter=stream.sentence_splitter,
        max_seq_length=options["max_seq_length"],
        short_seq_prob=options["short_seq_prob"],
        dupe_factor=options["dupe_factor"],
        objective=options["objective"],
        documents_per_batch=stream.documents_per_batch,
    )


if __name__ == "__main__":
    main()
