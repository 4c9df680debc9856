"""Pretraining data at corpus scale: `albert-hf pretrain`'s data preparation against the original pipeline.

The same text (built from ../shared/data/corpus, repeated up to 10, 50 and 200 MB, one sentence per line and a blank
line between documents, written to /tmp) is turned into instances of at most 512 tokens by

  * ours: `albert_hf.pretraining.corpus.make_instances` (read -> tokenize -> over-long/single-sentence checks -> SOP
    instances, all as `datasets` Arrow files on disk), with num_proc 1 and 2;
  * the original: google-research's BERT `create_training_instances` (the bert-tensorflow wheel) with ALBERT's
    `FullTokenizer` over the SentencePiece model (the albert-tensorflow wheel), i.e. the in-memory design that
    ALBERT's create_pretraining_data.py extends. Their `import tensorflow` gets the stand-in in
    benchmarks/tf_standin (flags, logging, file access only); no TFRecord is written. Note the original also draws
    the MLM masks here, which ours leaves to the collator (fresh masks per epoch).

Each run is its own subprocess. Peak memory: VmHWM of the run's main process (what the kernel recorded), and the
peak of the summed RSS of the process tree sampled every 0.2 s (workers included), of which the part that is
file-backed pages of memory-mapped *.arrow files (read from /proc/<pid>/smaps) is given separately: that part is page
cache the kernel can drop, not memory the pipeline holds.

    pip install --no-deps bert-tensorflow albert-tensorflow    # the original pipeline (1.0.4 and 1.1 measured)
    nice -n 15 python benchmarks/pretraining_data.py --sizes 10 50 200 --num_proc 1 2
    nice -n 15 python benchmarks/pretraining_data.py --profile 5     # cProfile of ours on a 5 MB corpus
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "data"
if not SHARED.exists():
    SHARED = Path("/work/shared/data")
SPIECE = SHARED / "spiece" / "albert-30k-clean.model"
WORK = Path(tempfile.gettempdir()) / "albert_hf_pretraining_data"
PARAGRAPHS_PER_BOOK_DOCUMENT = 30  # books are cut into documents of 30 paragraphs (chapter-sized), articles kept


# --------------------------------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------------------------------


def base_documents() -> list[list[str]]:
    """Documents (lists of sentences) of the shared English corpora: WikiText-2 articles and book chapters."""
    from albert_hf.data.sentences import split_sentences

    documents = []
    for name, per_document in (
        ("wikitext2_valid_paragraphs.txt", None),
        ("gutenberg_paragraphs.txt", PARAGRAPHS_PER_BOOK_DOCUMENT),
    ):
        paragraphs: list[str] = []
        with open(SHARED / "corpus" / name, encoding="utf-8") as handle:
            for line in [*handle, ""]:
                if line.strip():
                    paragraphs.append(line.strip())
                    if per_document and len(paragraphs) == per_document:
                        documents.append([s for p in paragraphs for s in split_sentences(p)])
                        paragraphs = []
                elif paragraphs:
                    documents.append([s for p in paragraphs for s in split_sentences(p)])
                    paragraphs = []
    return [document for document in documents if document]


def build_corpus(size_mb: int) -> Path:
    """/tmp/.../corpus_<size>mb.txt: the base documents repeated until the file holds size_mb * 10^6 bytes."""
    path = WORK / f"corpus_{size_mb}mb.txt"
    if path.exists() and path.stat().st_size >= size_mb * 1_000_000:
        return path
    WORK.mkdir(parents=True, exist_ok=True)
    blocks = ["\n".join(document) + "\n\n" for document in base_documents()]
    target, written = size_mb * 1_000_000, 0
    with open(path.with_suffix(".tmp"), "w", encoding="utf-8") as handle:
        while written < target:
            for block in blocks:
                handle.write(block)
                written += len(block.encode("utf-8"))
                if written >= target:
                    break
    os.replace(path.with_suffix(".tmp"), path)
    return path


# --------------------------------------------------------------------------------------------------------------------
# The two pipelines (each run in a subprocess: `--_run ours|original`)
# --------------------------------------------------------------------------------------------------------------------


def vm_hwm_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def length_statistics(lengths, labels) -> dict:
    import numpy as np

    lengths, labels = np.asarray(lengths), np.asarray(labels)
    return {
        "instances": int(len(lengths)),
        "tokens": int(lengths.sum()),
        "length_p10_p50_p90": [int(v) for v in np.percentile(lengths, [10, 50, 90])] if len(lengths) else [],
        "full_length_share": float((lengths >= 500).mean()) if len(lengths) else 0.0,
        "short_share": float((lengths < 0.9 * 509).mean()) if len(lengths) else 0.0,
        "label1_share": float(labels.mean()) if len(labels) else 0.0,
    }


def run_ours(corpus: str, num_proc: int, dupe_factor: int, cache_dir: str) -> dict:
    from albert_hf.pretraining.arguments import PretrainingDataArguments
    from albert_hf.pretraining.corpus import load_documents, make_instances
    from albert_hf.tokenization import AlbertHFTokenizer

    start = time.perf_counter()
    tokenizer = AlbertHFTokenizer(vocab_file=str(SPIECE))
    data_args = PretrainingDataArguments(
        train_files=[corpus],
        max_seq_length=512,
        dupe_factor=dupe_factor,
        preprocessing_num_workers=num_proc,
        cache_dir=cache_dir,
        validation_documents=0,
    )
    documents, _ = load_documents(data_args, seed=12345)
    read = time.perf_counter()
    instances, _ = make_instances(documents, tokenizer, data_args, seed=12345)
    wall = time.perf_counter() - start
    peak = vm_hwm_mb()
    import pyarrow.compute as pc

    table = instances.data.table
    lengths = pc.list_value_length(table.column("input_ids")).to_numpy()
    labels = table.column("sentence_order_label").to_numpy()
    return {
        "wall_s": wall,
        "read_s": read - start,
        "vm_hwm_mb": peak,
        "documents": len(documents),
        **length_statistics(lengths, labels),
    }


def run_original(corpus: str, dupe_factor: int) -> dict:
    sys.path.insert(0, str(HERE / "tf_standin"))
    import random

    from albert import tokenization as albert_tokenization
    from bert import create_pretraining_data as original

    start = time.perf_counter()
    tokenizer = albert_tokenization.FullTokenizer(vocab_file=None, do_lower_case=True, spm_model_file=str(SPIECE))
    first_document = []
    create_instances = original.create_instances_from_document

    def timed(*args, **kwargs):  # notes when reading + tokenizing ends and instance creation starts
        if not first_document:
            first_document.append(time.perf_counter())
        return create_instances(*args, **kwargs)

    original.create_instances_from_document = timed
    instances = original.create_training_instances(
        [corpus],
        tokenizer,
        max_seq_length=512,
        dupe_factor=dupe_factor,
        short_seq_prob=0.1,
        masked_lm_prob=0.15,
        max_predictions_per_seq=20,
        rng=random.Random(12345),
    )
    wall = time.perf_counter() - start
    peak = vm_hwm_mb()
    lengths = [len(instance.tokens) for instance in instances]
    labels = [int(instance.is_random_next) for instance in instances]
    return {
        "wall_s": wall,
        "read_s": (first_document or [time.perf_counter()])[0] - start,
        "vm_hwm_mb": peak,
        **length_statistics(lengths, labels),
    }


# --------------------------------------------------------------------------------------------------------------------
# Driver: one subprocess per run, memory of its process tree sampled from outside
# --------------------------------------------------------------------------------------------------------------------


def arrow_mapped_mb(process: psutil.Process) -> float:
    """RSS of the file-backed mappings of *.arrow files (page cache of memory-mapped Arrow tables)."""
    total, in_arrow = 0, False
    try:
        with open(f"/proc/{process.pid}/smaps") as handle:
            for line in handle:
                first = line.split(maxsplit=6)
                if "-" in first[0] and len(first) >= 5 and ":" not in first[0]:
                    in_arrow = first[-1].strip().endswith(".arrow")
                elif in_arrow and line.startswith("Rss:"):
                    total += int(first[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return total / 1024


def run_measured(arguments: list[str]) -> dict:
    """Run this script with `arguments` in a subprocess; the result, with sampled tree RSS peaks."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as result_file:
        result_path = result_file.name
    command = [sys.executable, __file__, *arguments, "--_result", result_path]
    child = subprocess.Popen(command)
    root = psutil.Process(child.pid)
    peak = {"tree_rss_mb": 0.0, "arrow_mmap_mb_at_peak": 0.0, "arrow_mmap_mb_max": 0.0}
    done = threading.Event()

    def sample():
        ticks = 0
        while not done.is_set():
            try:
                processes = [root, *root.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in processes) / 2**20
                arrow = sum(arrow_mapped_mb(p) for p in processes) if ticks % 5 == 0 else None
            except psutil.Error:
                rss, arrow = 0.0, None
            if arrow is not None:
                peak["arrow_mmap_mb_max"] = max(peak["arrow_mmap_mb_max"], arrow)
            if rss > peak["tree_rss_mb"]:
                peak["tree_rss_mb"] = rss
                if arrow is not None:
                    peak["arrow_mmap_mb_at_peak"] = arrow
            ticks += 1
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = child.wait()
    done.set()
    sampler.join()
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} failed with exit code {code}")
    result = json.loads(Path(result_path).read_text())
    os.unlink(result_path)
    return {**result, **peak}


def print_table(rows: list[dict]) -> None:
    header = (
        f"{'corpus':>7} {'pipeline':<18} {'wall s':>8} {'read+tok s':>10} {'VmHWM MB':>9} {'tree RSS MB':>11} "
        f"{'arrow mmap':>10} {'instances':>9} {'len p10/50/90':>14} {'full':>5} {'label1':>6} {'x orig':>7}"
    )
    print(header)
    print("-" * len(header))
    originals = {row["size_mb"]: row for row in rows if row["pipeline"] == "original"}
    for row in rows:
        reference = originals.get(row["size_mb"])
        ratio = f"{reference['wall_s'] / row['wall_s']:.2f}" if reference else "-"
        lengths = "/".join(map(str, row["length_p10_p50_p90"]))
        print(
            f"{row['size_mb']:>5}MB {row['pipeline']:<18} {row['wall_s']:>8.1f} {row['read_s']:>10.1f} "
            f"{row['vm_hwm_mb']:>9.0f} {row['tree_rss_mb']:>11.0f} {row['arrow_mmap_mb_at_peak']:>10.0f} "
            f"{row['instances']:>9} {lengths:>14} {row['full_length_share']:>5.2f} {row['label1_share']:>6.3f} "
            f"{ratio:>7}"
        )


def profile(size_mb: int, num_proc: int) -> None:
    import cProfile
    import pstats

    corpus = build_corpus(size_mb)
    with tempfile.TemporaryDirectory(dir=WORK) as cache_dir:
        profiler = cProfile.Profile()
        profiler.enable()
        result = run_ours(str(corpus), num_proc if num_proc > 1 else None, 1, cache_dir)
        profiler.disable()
    print(json.dumps(result, indent=1))
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200], help="corpus sizes in MB")
    parser.add_argument("--num_proc", type=int, nargs="+", default=[1, 2], help="num_proc values for ours")
    parser.add_argument("--dupe_factor", type=int, default=1)
    parser.add_argument("--pipelines", nargs="+", choices=["original", "ours"], default=["original", "ours"])
    parser.add_argument("--json", help="append the rows to this file (rows of earlier runs in it join the table)")
    parser.add_argument("--profile", type=int, metavar="MB", help="cProfile ours on a corpus of MB megabytes")
    parser.add_argument("--_run", choices=["ours", "original"], help=argparse.SUPPRESS)
    parser.add_argument("--_corpus", help=argparse.SUPPRESS)
    parser.add_argument("--_num_proc", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--_result", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args._run:
        if args._run == "ours":
            with tempfile.TemporaryDirectory(dir=WORK) as cache_dir:
                result = run_ours(args._corpus, args._num_proc, args.dupe_factor, cache_dir)
        else:
            result = run_original(args._corpus, args.dupe_factor)
        Path(args._result).write_text(json.dumps(result))
        return
    if args.profile:
        profile(args.profile, args.num_proc[0])
        return

    print(f"dupe_factor {args.dupe_factor}, max_seq_length 512, short_seq_prob 0.1; corpora in {WORK}")
    rows = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() else []
    for size in args.sizes:
        corpus = str(build_corpus(size))
        runs = [("original", ["--_run", "original"])] if "original" in args.pipelines else []
        if "ours" in args.pipelines:
            runs += [(f"ours num_proc={n}", ["--_run", "ours", "--_num_proc", str(n)]) for n in args.num_proc]
        for name, arguments in runs:
            result = run_measured([*arguments, "--_corpus", corpus, "--dupe_factor", str(args.dupe_factor)])
            rows.append({"size_mb": size, "pipeline": name, **result})
            print(json.dumps(rows[-1]), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1))
    print()
    print_table(rows)


if __name__ == "__main__":
    main()
