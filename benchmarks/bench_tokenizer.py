"""Speed of `albert_hf.AlbertTokenizer` against transformers' `AlbertTokenizer`: batch-encode all SST-2 train sentences.

Both tokenizers load the same `spiece.model` and encode the same 67,349 sentences in the same process, alternating,
`--repeats` times each; the table gives the best wall-clock and process CPU time of each and their ratio (>1 means
albert_hf is faster). CPU time counts every thread of the Rust backend, so it is the steadier figure on a shared
machine. transformers' tokenizer needs the `protobuf` package to read spiece.model.

    python benchmarks/bench_tokenizer.py [--data_dir ../shared/data] [--repeats 3] [--batch_size 1000]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
import time
from pathlib import Path

from transformers import AlbertTokenizer as TransformersAlbertTokenizer

from albert_hf.tokenization import AlbertTokenizer

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def sst2_sentences(data_dir: Path) -> list[str]:
    with (data_dir / "glue" / "SST-2" / "train.tsv").open(encoding="utf-8", newline="") as file:
        rows = csv.DictReader(file, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row["sentence"] for row in rows]


def load_both(model_file: Path) -> tuple[AlbertTokenizer, TransformersAlbertTokenizer]:
    """albert_hf's and transformers' tokenizers on the same `spiece.model`."""
    with tempfile.TemporaryDirectory() as folder:  # transformers loads spiece.model from a folder
        shutil.copy(model_file, Path(folder) / "spiece.model")
        return AlbertTokenizer(vocab_file=str(model_file)), TransformersAlbertTokenizer.from_pretrained(folder)


def encode_all(tokenizer, sentences: list[str], batch_size: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, tokens) to encode `sentences` in batches, as a data pipeline would."""
    wall, cpu, tokens = time.perf_counter(), time.process_time(), 0
    for start in range(0, len(sentences), batch_size):
        encoding = tokenizer(sentences[start : start + batch_size], truncation=True, max_length=128)
        tokens += sum(map(len, encoding["input_ids"]))
    return time.perf_counter() - wall, time.process_time() - cpu, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=1000)
    args = parser.parse_args()

    sentences = sst2_sentences(args.data_dir)
    ours, theirs = load_both(args.data_dir / "spiece" / "albert-30k-clean.model")
    tokenizers = {"albert_hf.AlbertTokenizer": ours, "transformers.AlbertTokenizer": theirs}
    best = {name: (float("inf"), float("inf"), 0) for name in tokenizers}
    for _ in range(args.repeats):
        for name, tokenizer in tokenizers.items():
            wall, cpu, tokens = encode_all(tokenizer, sentences, args.batch_size)
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu), tokens)

    print(f"SST-2 train: {len(sentences)} sentences, batches of {args.batch_size}, best of {args.repeats}")
    print("| tokenizer | wall s | CPU s | sentences/s (wall) | tokens |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (wall, cpu, tokens) in best.items():
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {len(sentences) / wall:,.0f} | {tokens:,} |")
    ours, theirs = best["albert_hf.AlbertTokenizer"], best["transformers.AlbertTokenizer"]
    print(f"| speed ratio (transformers / albert_hf) | {theirs[0] / ours[0]:.2f}x | {theirs[1] / ours[1]:.2f}x | | |")


if __name__ == "__main__":
    main()
