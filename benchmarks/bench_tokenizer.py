"""Speed of `albert_hf.AlbertHFTokenizer` against transformers' `AlbertTokenizer`, per source of the shared data.

Both tokenizers load the same `spiece.model` and encode the same inputs, called as this project's jobs call a
tokenizer on that kind of text, in the same process, alternating, `--repeats` times each:

| source | inputs | call |
| --- | --- | --- |
| WikiText-2 paragraphs | every non-empty line of `corpus/wikitext2_valid_paragraphs.txt` | truncation to 512 |
| Gutenberg paragraphs | every non-empty line of `corpus/gutenberg_paragraphs.txt` | truncation to 512 |
| Botchan | every line of `corpus/botchan.txt` | truncation to 512 |
| GLUE sentences | SST-2 train sentences | truncation to 128, token type ids (`tokenize_text_pairs`) |
| GLUE pairs | MRPC and RTE train pairs | truncation to 128, token type ids (`tokenize_text_pairs`) |
| SQuAD questions | the questions of `squad/dev-v1.1-part-a.json` | no special tokens, offsets (`truncate_questions`) |
| SQuAD question + context | question and context pairs | windows of 384, stride 128, offsets, padding (`tokenize_windows`) |
| SQuAD question + sentence | each question with the context sentence its first answer starts in | truncation to 128, token type ids (QNLI-style pairs, `tokenize_text_pairs`) |
| CoNLL sentences | CoNLL-2003 train, pre-tokenized words | `is_split_into_words`, truncation to 128 (`tokenize_ner`) |
| mixed | the three corpora and the SQuAD contexts, shuffled | truncation to 512 |

Each source is encoded in one call over all its inputs and in batches of `--batch_size`, in a fresh process per
`TOKENIZERS_PARALLELISM` setting (the Rust thread pool reads it once): "true" (all cores) and "false" (one thread,
with `RAYON_NUM_THREADS=1`).
`--max_inputs` keeps only the first inputs of each source (the table says how many).

The table gives the median wall-clock and process CPU time of each tokenizer and their ratio (>1 means albert_hf is
faster). CPU time counts every thread of the Rust backend, so on a shared machine it is the steadier figure; wall
time under contention is noisy, hence medians of several alternating repeats. `--profile` prints instead, per source
and tokenizer, how much of a call the Rust `encode_batch` takes and, for ours, the screening that routes each text,
and the CPU time of ours with every text through the exact route (the one `tokenizers.Tokenizer` that would need no
routing).
transformers' tokenizer needs the `protobuf` package to read spiece.model.

    python benchmarks/bench_tokenizer.py [--data_dir ../shared/data] [--repeats 5] [--quick] [--sources ...]
    python benchmarks/bench_tokenizer.py --profile [--sources ...]
"""

from __future__ import annotations

import argparse
import bisect
import csv
import gc
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PARAGRAPHS = dict(truncation=True, max_length=512)
GLUE = dict(truncation=True, max_length=128, return_token_type_ids=True)


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as file:
        return list(csv.DictReader(file, delimiter="\t", quoting=csv.QUOTE_NONE))


def _squad(data_dir: Path) -> list[tuple[str, str]]:
    data = json.loads((data_dir / "squad" / "dev-v1.1-part-a.json").read_text(encoding="utf-8"))["data"]
    return [
        (qa["question"], paragraph["context"])
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def _question_sentence_pairs(data_dir: Path) -> list[tuple[str, str]]:
    """Each SQuAD question with the sentence of its context that its first answer starts in (as QNLI pairs them)."""
    data = json.loads((data_dir / "squad" / "dev-v1.1-part-a.json").read_text(encoding="utf-8"))["data"]
    pairs = []
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            ends = [match.end() for match in re.finditer(r"[.!?](?=\s)", context)] + [len(context)]
            starts = [0] + ends[:-1]
            for qa in paragraph["qas"]:
                at = qa["answers"][0]["answer_start"]
                index = min(bisect.bisect_right(ends, at), len(ends) - 1)
                pairs.append((qa["question"], context[starts[index] : ends[index]].strip()))
    return pairs


def _conll(data_dir: Path) -> list[list[str]]:
    sentences, words = [], []
    for line in (data_dir / "conll2003" / "train.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(words)
            words = []
        else:
            words.append(line.split(" ")[0])
    return sentences + ([words] if words else [])


def _mixed(data_dir: Path) -> list[str]:
    corpus = data_dir / "corpus"
    texts = [line for name in ("wikitext2_valid_paragraphs", "gutenberg_paragraphs", "botchan")
             for line in _lines(corpus / f"{name}.txt")]  # fmt: skip
    texts += list(dict.fromkeys(context for _, context in _squad(data_dir)))
    random.Random(0).shuffle(texts)
    return texts


# name -> (inputs from the data folder, how a job calls the tokenizer on a slice of them)
SOURCES: dict[str, tuple[Callable[[Path], list], Callable]] = {
    "WikiText-2 paragraphs": (
        lambda d: _lines(d / "corpus" / "wikitext2_valid_paragraphs.txt"),
        lambda tokenizer, batch: tokenizer(batch, **PARAGRAPHS),
    ),
    "Gutenberg paragraphs": (
        lambda d: _lines(d / "corpus" / "gutenberg_paragraphs.txt"),
        lambda tokenizer, batch: tokenizer(batch, **PARAGRAPHS),
    ),
    "Botchan": (
        lambda d: _lines(d / "corpus" / "botchan.txt"),
        lambda tokenizer, batch: tokenizer(batch, **PARAGRAPHS),
    ),
    "GLUE sentences (SST-2)": (
        lambda d: [row["sentence"] for row in _tsv(d / "glue" / "SST-2" / "train.tsv")],
        lambda tokenizer, batch: tokenizer(batch, **GLUE),
    ),
    "GLUE pairs (MRPC, RTE)": (
        lambda d: (
            [(row["#1 String"], row["#2 String"]) for row in _tsv(d / "glue" / "MRPC" / "train.tsv")]
            + [(row["sentence1"], row["sentence2"]) for row in _tsv(d / "glue" / "RTE" / "train.tsv")]
        ),
        lambda tokenizer, batch: tokenizer([a for a, _ in batch], [b for _, b in batch], **GLUE),
    ),
    "SQuAD questions": (
        lambda d: [question for question, _ in _squad(d)],
        lambda tokenizer, batch: tokenizer(batch, add_special_tokens=False, return_offsets_mapping=True),
    ),
    "SQuAD question + context": (
        _squad,
        lambda tokenizer, batch: tokenizer(
            [question.lstrip() for question, _ in batch],
            [context for _, context in batch],
            truncation="only_second",
            max_length=384,
            stride=128,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            return_token_type_ids=True,
            padding="max_length",
        ),
    ),
    "SQuAD question + sentence": (
        _question_sentence_pairs,
        lambda tokenizer, batch: tokenizer([a for a, _ in batch], [b for _, b in batch], **GLUE),
    ),
    "CoNLL sentences (words)": (
        _conll,
        lambda tokenizer, batch: tokenizer(
            batch, is_split_into_words=True, truncation=True, max_length=128, return_token_type_ids=True
        ),
    ),
    "mixed": (_mixed, lambda tokenizer, batch: tokenizer(batch, **PARAGRAPHS)),
}


def load_both(model_file: Path):
    """albert_hf's and transformers' tokenizers on the same `spiece.model`."""
    from transformers import AlbertTokenizer as TransformersAlbertTokenizer

    from albert_hf.tokenization import AlbertHFTokenizer

    with tempfile.TemporaryDirectory() as folder:  # transformers loads spiece.model from a folder
        shutil.copy(model_file, Path(folder) / "spiece.model")
        return AlbertHFTokenizer(vocab_file=str(model_file)), TransformersAlbertTokenizer.from_pretrained(folder)


def encode_all(call: Callable, tokenizer, inputs: list, batch_size: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, tokens) to encode `inputs` in batches of `batch_size`."""
    gc.collect()
    wall, cpu, tokens = time.perf_counter(), time.process_time(), 0
    for start in range(0, len(inputs), batch_size):
        tokens += sum(map(len, call(tokenizer, inputs[start : start + batch_size])["input_ids"]))
    return time.perf_counter() - wall, time.process_time() - cpu, tokens


def worker(args: argparse.Namespace) -> dict:
    """Runs in a child process with TOKENIZERS_PARALLELISM already set; returns every timing."""
    ours, theirs = load_both(args.data_dir / "spiece" / "albert-30k-clean.model")
    tokenizers = {"albert_hf": ours, "transformers": theirs}
    results = {}
    for source in args.sources:
        load, call = SOURCES[source]
        inputs = load(args.data_dir)[: args.max_inputs]
        for tokenizer in tokenizers.values():  # warm-up: thread pool, caches
            encode_all(call, tokenizer, inputs[:1000], args.batch_size)
        for pattern, batch_size in (("one call", len(inputs)), (f"batches of {args.batch_size:,}", args.batch_size)):
            runs = {name: [] for name in tokenizers}
            for _ in range(args.repeats):
                for name, tokenizer in tokenizers.items():
                    runs[name].append(encode_all(call, tokenizer, inputs, max(batch_size, 1)))
            results[f"{source}|{pattern}"] = {"inputs": len(inputs), "runs": runs}
    return results


class _TimedRust:
    """Stands in for a Rust `Tokenizer` (transformers' backend, or one route of ours), adding the CPU time of its
    `encode_batch` calls to `timings`."""

    def __init__(self, rust, timings: dict):
        object.__setattr__(self, "_rust", rust)
        object.__setattr__(self, "_timings", timings)

    def __getattr__(self, name: str):
        return getattr(self._rust, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._rust, name, value)

    def encode_batch(self, *args, **kwargs):
        start = time.process_time()
        try:
            return self._rust.encode_batch(*args, **kwargs)
        finally:
            self._timings["Rust"] += time.process_time() - start


def profile(args: argparse.Namespace) -> None:
    """Per source and tokenizer, in batches: CPU seconds of a whole call, of Rust's encode_batch, of our screening."""
    ours, theirs = load_both(args.data_dir / "spiece" / "albert-30k-clean.model")
    backend = ours._tokenizer
    print(f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM')}, batches of {args.batch_size:,}, "
          "CPU s, medians of 3")  # fmt: skip
    print("| source (inputs) | tokenizer | whole call | Rust encode_batch | screening | rest (Python) | "
          "exact route only |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for source in args.sources:
        load, call = SOURCES[source]
        inputs = load(args.data_dir)[: args.max_inputs]
        for name, tokenizer in (("albert_hf", ours), ("transformers", theirs)):
            encode_all(call, tokenizer, inputs[:1000], args.batch_size)
            whole = statistics.median(encode_all(call, tokenizer, inputs, args.batch_size)[1] for _ in range(3))
            timings = {"Rust": 0.0, "screening": 0.0}
            if name == "albert_hf":  # every route of the backend, and the screening that chooses them
                routes = dict(backend.routes)
                backend.routes.update({key: _TimedRust(route, timings) for key, route in routes.items()})
                object.__setattr__(backend, "pipelines_of", _timed(backend.pipelines_of, timings, "screening"))
            else:
                rust = tokenizer._tokenizer
                object.__setattr__(tokenizer, "_tokenizer", _TimedRust(rust, timings))
            try:
                for _ in range(3):
                    encode_all(call, tokenizer, inputs, args.batch_size)
            finally:
                if name == "albert_hf":
                    backend.routes.update(routes)
                    backend.__dict__.pop("pipelines_of", None)
                else:
                    object.__setattr__(tokenizer, "_tokenizer", rust)
            exact_only = ""
            if name == "albert_hf":  # the one Tokenizer that needs no routing: every text through the Python steps
                object.__setattr__(backend, "pipelines_of", lambda items: ["exact"] * len(items))
                try:
                    runs = [encode_all(call, tokenizer, inputs, args.batch_size)[1] for _ in range(3)]
                finally:
                    backend.__dict__.pop("pipelines_of", None)
                exact_only = f"{statistics.median(runs):.3f}"
            rust_s, screening_s = timings["Rust"] / 3, timings["screening"] / 3
            print(
                f"| {source} ({len(inputs):,}) | {name} | {whole:.3f} | {rust_s:.3f} | "
                f"{f'{screening_s:.3f}' if name == 'albert_hf' else ''} | {whole - rust_s - screening_s:.3f} | "
                f"{exact_only} |",
                flush=True,
            )


def _timed(function: Callable, timings: dict, key: str) -> Callable:
    def run(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            timings[key] += time.process_time() - start

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="3 repeats and at most 20,000 inputs per source")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--max_inputs", type=int, default=None, help="keep only the first inputs of each source")
    parser.add_argument("--sources", nargs="+", default=list(SOURCES), choices=list(SOURCES), metavar="SOURCE")
    parser.add_argument("--parallelism", nargs="+", default=["true", "false"], choices=["true", "false"])
    parser.add_argument("--profile", action="store_true", help="where the time of a call goes, per source")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.max_inputs = 3, args.max_inputs or 20_000
    if args.worker:
        print(json.dumps(worker(args)))
        return
    if args.profile:
        profile(args)
        return

    print(f"median of {args.repeats} alternating repeats; ratio = transformers / albert_hf (>1: albert_hf faster)")
    print("| source (inputs) | call | TOKENIZERS_PARALLELISM | albert_hf wall s | transformers wall s | wall ratio | "
          "albert_hf CPU s | transformers CPU s | CPU ratio | tokens (ours / theirs) |")  # fmt: skip
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for parallelism in args.parallelism:
        command = [sys.executable, __file__, "--worker", "--data_dir", str(args.data_dir), "--sources", *args.sources]
        command += ["--repeats", str(args.repeats), "--batch_size", str(args.batch_size)]
        command += ["--max_inputs", str(args.max_inputs)] if args.max_inputs else []
        env = dict(os.environ, TOKENIZERS_PARALLELISM=parallelism)
        if parallelism == "false":  # one thread: the Rust pool too, whatever else reads the variable
            env["RAYON_NUM_THREADS"] = "1"
        results = json.loads(subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout)
        for key, result in results.items():
            source, pattern = key.split("|")
            ours, theirs = result["runs"]["albert_hf"], result["runs"]["transformers"]
            wall = [statistics.median(run[0] for run in runs) for runs in (ours, theirs)]
            cpu = [statistics.median(run[1] for run in runs) for runs in (ours, theirs)]
            print(
                f"| {source} ({result['inputs']:,}) | {pattern} | {parallelism} | {wall[0]:.2f} | {wall[1]:.2f} | "
                f"{wall[1] / wall[0]:.2f}x | {cpu[0]:.2f} | {cpu[1]:.2f} | {cpu[1] / cpu[0]:.2f}x | "
                f"{ours[0][2]:,} / {theirs[0][2]:,} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
