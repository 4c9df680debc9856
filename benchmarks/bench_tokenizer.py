"""Speed of `albert_hf.AlbertHFTokenizer` against transformers' `AlbertTokenizer`: batch-encode real texts.

Both tokenizers load the same `spiece.model` and encode the same texts in batches of `--batch_size` (truncation to
128 tokens, as a fine-tuning data pipeline calls them), in the same process, alternating, `--repeats` times each.
Two text sets: all 67,349 SST-2 train sentences, and every line of the pretraining corpora and transformers' text
samples in the shared data (WikiText-2, Gutenberg, ...: longer texts). Each set runs in a fresh process per
`TOKENIZERS_PARALLELISM` setting (the Rust thread pool reads it once), "true" (all cores) and "false" (one thread).

The table gives the median wall-clock and process CPU time of each tokenizer and their ratio (>1 means albert_hf is
faster). CPU time counts every thread of the Rust backend, so on a shared machine it is the steadier figure; wall
time under contention is noisy, hence medians of several alternating repeats. transformers' tokenizer needs the
`protobuf` package to read spiece.model; the corpora are read with `tests/tokenization_reference.py`.

    python benchmarks/bench_tokenizer.py [--data_dir ../shared/data] [--repeats 5] [--batch_size 1000]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TEXT_SETS = ("SST-2 train", "corpora")


def sst2_sentences(data_dir: Path) -> list[str]:
    with (data_dir / "glue" / "SST-2" / "train.tsv").open(encoding="utf-8", newline="") as file:
        rows = csv.DictReader(file, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row["sentence"] for row in rows]


def corpus_lines(data_dir: Path) -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from tokenization_reference import corpus_texts

    return list(corpus_texts(data_dir))


def load_both(model_file: Path):
    """albert_hf's and transformers' tokenizers on the same `spiece.model`."""
    from transformers import AlbertTokenizer as TransformersAlbertTokenizer

    from albert_hf.tokenization import AlbertHFTokenizer

    with tempfile.TemporaryDirectory() as folder:  # transformers loads spiece.model from a folder
        shutil.copy(model_file, Path(folder) / "spiece.model")
        return AlbertHFTokenizer(vocab_file=str(model_file)), TransformersAlbertTokenizer.from_pretrained(folder)


def encode_all(tokenizer, sentences: list[str], batch_size: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, tokens) to encode `sentences` in batches, as a data pipeline would."""
    wall, cpu, tokens = time.perf_counter(), time.process_time(), 0
    for start in range(0, len(sentences), batch_size):
        encoding = tokenizer(sentences[start : start + batch_size], truncation=True, max_length=128)
        tokens += sum(map(len, encoding["input_ids"]))
    return time.perf_counter() - wall, time.process_time() - cpu, tokens


def worker(data_dir: Path, text_set: str, repeats: int, batch_size: int) -> dict:
    """Runs in a child process with TOKENIZERS_PARALLELISM already set; returns every timing."""
    texts = sst2_sentences(data_dir) if text_set == "SST-2 train" else corpus_lines(data_dir)
    ours, theirs = load_both(data_dir / "spiece" / "albert-30k-clean.model")
    tokenizers = {"albert_hf": ours, "transformers": theirs}
    for tokenizer in tokenizers.values():  # warm-up: thread pool, caches
        encode_all(tokenizer, texts[:2000], batch_size)
    runs = {name: [] for name in tokenizers}
    for _ in range(repeats):
        for name, tokenizer in tokenizers.items():
            runs[name].append(encode_all(tokenizer, texts, batch_size))
    return {"texts": len(texts), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--text_sets", nargs="+", default=list(TEXT_SETS), choices=TEXT_SETS)
    parser.add_argument("--parallelism", nargs="+", default=["true", "false"], choices=["true", "false"])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.data_dir, args.worker, args.repeats, args.batch_size)))
        return

    print(f"batches of {args.batch_size}, truncation to 128, median of {args.repeats} alternating repeats")
    print("| texts | TOKENIZERS_PARALLELISM | albert_hf wall s | transformers wall s | wall ratio | "
          "albert_hf CPU s | transformers CPU s | CPU ratio | tokens (ours / theirs) |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for text_set in args.text_sets:
        for parallelism in args.parallelism:
            command = [sys.executable, __file__, "--worker", text_set, "--data_dir", str(args.data_dir)]
            command += ["--repeats", str(args.repeats), "--batch_size", str(args.batch_size)]
            env = dict(os.environ, TOKENIZERS_PARALLELISM=parallelism)
            result = json.loads(subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout)
            ours, theirs = result["runs"]["albert_hf"], result["runs"]["transformers"]
            wall = [statistics.median(run[0] for run in runs) for runs in (ours, theirs)]
            cpu = [statistics.median(run[1] for run in runs) for runs in (ours, theirs)]
            print(
                f"| {text_set} ({result['texts']:,}) | {parallelism} | {wall[0]:.2f} | {wall[1]:.2f} | "
                f"{wall[1] / wall[0]:.2f}x | {cpu[0]:.2f} | {cpu[1]:.2f} | {cpu[1] / cpu[0]:.2f}x | "
                f"{ours[0][2]:,} / {theirs[0][2]:,} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
