"""Token classification on Japanese and Chinese: words joined as running text against one "▁" per word.

    python benchmarks/ner_alignment.py --output_dir runs/ner_alignment      # about 10 minutes on 2 CPU cores

The vocabularies are trained as SentencePiece trains on raw text (`--word_segmenter none`: pieces may run across
words), as when these tables were measured; benchmarks/word_bounded_vocabulary.py compares word-bounded ones.

1. Alignment figures on the NER fixtures of tests/data/ner_cjk (written for this project) with three vocabularies:
   the Japanese novel's (docs/japanese.md's own `albert-hf train-tokenizer` command: 8,000 pieces), one trained on
   the Chinese fixture's own source text (Lu Xun, tests/data, 1,000 pieces, as benchmarks/masking_stats.py uses),
   and, for each fixture, one trained on the fixture's training text: tokens per sentence with one "▁" per word
   (`--alignment words`, what the job did before) and as running text (`--alignment running_text`), the share of
   sentences whose ids are the running text's own tokenization, the gold tags' round trip (tags -> piece labels ->
   tags, seqeval F1), and how many sentences hold a piece that spans an entity boundary (the only loss of the round
   trip: one piece cannot carry two words' different tags).
2. What it is worth: a small ALBERT pretrained on the novel with docs/japanese.md's `albert-hf pretrain` command
   (500 steps of 16 sequences of 64 tokens; `--pretrain_steps` shortens it), fine-tuned with `albert-hf ner` on the Japanese fixture with each
   alignment, same hyperparameters, budget and seeds; dev F1 over every word of the dev split (`--do_predict` on
   it), beside the all-O baseline (F1 0: it finds no entity) and the same architecture with random weights (no
   pretraining), fine-tuned the same way.

Prints both tables (markdown). The pretrained model is kept in `<output_dir>/ja-albert` and reused by a rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from albert_hf.cli import main as cli_main
from albert_hf.configuration import AlbertConfig
from albert_hf.data.ner import (
    ALIGN_RUNNING_TEXT,
    ALIGN_WORDS,
    build_label_list,
    join_words,
    load_ner_file,
    tokenize_and_align,
    word_predictions,
)
from albert_hf.metrics.ner import ner_metrics
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.vocabulary import train_tokenizer

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATA = os.environ.get("ALBERT_HF_SHARED_DATA", str(REPOSITORY.parent / "shared" / "data"))
FIXTURES = REPOSITORY / "tests" / "data" / "ner_cjk"
LU_XUN = REPOSITORY / "tests" / "data" / "chinese_lu_xun_nahan.txt"
NOVEL = "corpus/ja/wagahai_wa_neko_de_aru.txt"


def fixture(language: str, split: str):
    return load_ner_file(str(FIXTURES / language / f"{split}.txt"))


def alignment_figures(language: str, tokenizer) -> dict:
    """Tokens per sentence, ids equal to the running text, gold round trip and entity-spanning pieces on the dev
    split, for each alignment."""
    sentences = fixture(language, "valid")
    labels = build_label_list(fixture(language, "train"), sentences)
    texts = [join_words(words)[0] for words in sentences["tokens"]]
    running_ids = tokenizer(texts)["input_ids"]
    figures = {}
    for alignment in (ALIGN_WORDS, ALIGN_RUNNING_TEXT):
        encoded, _ = tokenize_and_align(sentences, tokenizer, labels, 512, alignment=alignment)
        recovered = [
            word_predictions(row["labels"], row["word_ids"], len(row["word_positions"]), labels, row["word_positions"])[
                0
            ]
            for row in encoded
        ]
        figures[alignment] = {
            "tokens": sum(map(len, encoded["input_ids"])) / len(encoded),
            "same_ids": sum(a == b for a, b in zip(encoded["input_ids"], running_ids)) / len(encoded),
            "round_trip_f1": ner_metrics(sentences["ner_tags"], recovered)["f1"],
            "spanning": sum(spans_an_entity_boundary(row, tags) for row, tags in zip(encoded, sentences["ner_tags"])),
        }
    figures["sentences"] = len(sentences)
    return figures


def spans_an_entity_boundary(row: dict, tags: list[str]) -> bool:
    """Whether a word of the sentence is read from a piece that starts in a word of another entity (or O)."""
    for word, position in enumerate(row["word_positions"]):
        owner = row["word_ids"][position] if position is not None else word
        if owner != word and (tags[word].startswith("B-") or tags[word][2:] != tags[owner][2:]):
            return True
    return False


def fixture_vocabulary(language: str, folder: Path, vocab_size: int):
    """A vocabulary of the fixture's training text, written as running text, one sentence per line."""
    train = fixture(language, "train")
    text = folder / f"{language}_fixture.txt"
    text.write_text("".join(join_words(words)[0] + "\n" for words in train["tokens"]), encoding="utf-8")
    return train_tokenizer(
        text, folder / f"{language}_fixture_tokenizer", vocab_size, character_coverage=1.0, word_segmenter="none"
    )


def alignment_table(output_dir: Path, data: Path) -> list[str]:
    vocabularies = []
    novel_tokenizer = output_dir / "ja-tokenizer"
    if not (novel_tokenizer / "spiece.model").exists():
        cli_main(["train-tokenizer", str(data / NOVEL), "--output_dir", str(novel_tokenizer)]
                 + ["--vocab_size", "8000", "--character_coverage", "0.9995", "--word_segmenter", "none"])  # fmt: skip
    vocabularies.append(("ja", "the novel, 8,000 pieces", AlbertHFTokenizer.from_pretrained(str(novel_tokenizer))))
    vocabularies.append(("ja", "the fixture's train split, 450 pieces", fixture_vocabulary("ja", output_dir, 450)))
    lu_xun = train_tokenizer(
        LU_XUN, output_dir / "zh-tokenizer", 1000, character_coverage=0.9995, word_segmenter="none"
    )
    vocabularies.append(("zh", "Lu Xun (tests/data), 1,000 pieces", lu_xun))
    vocabularies.append(("zh", "the fixture's train split, 300 pieces", fixture_vocabulary("zh", output_dir, 300)))
    rows = [
        '| fixture (dev split) | vocabulary | tokens per sentence: one "▁" per word -> running text | ids equal to '
        "the running text's | gold round trip F1: words / running text | sentences with a piece across an entity "
        "boundary (running text) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for language, name, tokenizer in vocabularies:
        figures = alignment_figures(language, tokenizer)
        words, running = figures[ALIGN_WORDS], figures[ALIGN_RUNNING_TEXT]
        rows.append(
            f"| {language} ({figures['sentences']} sentences) | {name} | {words['tokens']:.2f} -> "
            f"{running['tokens']:.2f} ({running['tokens'] / words['tokens']:.2f}x) | {words['same_ids']:.0%} -> "
            f"{running['same_ids']:.0%} | {words['round_trip_f1']:.4f} / {running['round_trip_f1']:.4f} | "
            f"{running['spanning']} |"
        )
    return rows


def pretrain(output_dir: Path, data: Path, steps: int) -> Path:
    """docs/japanese.md's pretraining command (its tokenizer: the novel's 8,000 pieces), for `steps` steps (the
    docs' command: 500)."""
    model = output_dir / "ja-albert"
    if (model / "config.json").exists():
        return model
    argv = ["pretrain", "--recipe", "tiny", "--train_files", str(data / NOVEL), "--validation_documents", "70"]
    argv += ["--tokenizer_name_or_path", str(output_dir / "ja-tokenizer"), "--output_dir", str(model)]
    argv += ["--max_steps", str(steps), "--warmup_steps", str(max(1, steps * 60 // 500)), "--max_seq_length", "64"]
    argv += ["--per_device_train_batch_size", "16", "--global_batch_size", "16", "--dupe_factor", "3"]
    argv += ["--eval_strategy", "no", "--logging_steps", "25", "--save_strategy", "no"]
    argv += ["--use_cpu", "--report_to", "none"]
    if cli_main(argv) != 0:
        raise SystemExit("pretraining failed")
    return model


def random_weights(model: Path, output_dir: Path) -> Path:
    """A checkpoint of the pretrained model's config and tokenizer with fresh random weights (seed 0)."""
    folder = output_dir / "ja-random"
    if not (folder / "config.json").exists():
        torch.manual_seed(0)
        AlbertForPreTraining(AlbertConfig.from_pretrained(model)).save_pretrained(folder)
        AlbertHFTokenizer.from_pretrained(str(model)).save_pretrained(folder)
    return folder


def fine_tune(model: Path, alignment: str, seed: int, output_dir: Path, epochs: int, learning_rate: float) -> dict:
    out = output_dir / f"ner-{model.name}-{alignment}-seed{seed}"
    argv = ["ner", "--model_name_or_path", str(model), "--data_dir", str(FIXTURES / "ja")]
    argv += ["--test_file", str(FIXTURES / "ja" / "valid.txt"), "--alignment", alignment]
    argv += ["--do_train", "--do_predict", "--num_train_epochs", str(epochs), "--learning_rate", str(learning_rate)]
    argv += ["--per_device_train_batch_size", "16", "--max_seq_length", "64", "--seed", str(seed)]
    argv += ["--warmup_steps", "0.1", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]
    argv += ["--output_dir", str(out), "--overwrite_output_dir", "--use_cpu", "true"]
    started = time.perf_counter()
    if cli_main(argv) != 0:
        raise SystemExit(f"fine-tuning failed: {alignment}, seed {seed}")
    predict = json.loads((out / "predict_results.json").read_text())
    return {"f1": predict["predict_f1"], "seconds": time.perf_counter() - started}


def value_table(model: Path, output_dir: Path, seeds: list[int], epochs: int, learning_rate: float) -> list[str]:
    tokenizer = AlbertHFTokenizer.from_pretrained(str(model))
    figures = alignment_figures("ja", tokenizer)
    rows = [
        f"| model | alignment | tokens per sentence | dev F1 (seeds {', '.join(map(str, seeds))}) | mean | fine-tuning "
        "time |",
        "| --- | --- | --- | --- | --- | --- |",
        "| - | all-O baseline | - | - | 0.000 | - |",
    ]
    for name, start in (("pretrained on the novel", model), ("random weights", random_weights(model, output_dir))):
        for alignment in (ALIGN_WORDS, ALIGN_RUNNING_TEXT):
            runs = [fine_tune(start, alignment, seed, output_dir, epochs, learning_rate) for seed in seeds]
            scores = [run["f1"] for run in runs]
            how = 'one "▁" per word (`--alignment words`)' if alignment == ALIGN_WORDS else "running text (`auto`)"
            rows.append(
                f"| {name} | {how} | {figures[alignment]['tokens']:.2f} | {' / '.join(f'{s:.3f}' for s in scores)} | "
                f"{statistics.mean(scores):.3f} | {statistics.mean(run['seconds'] for run in runs):.0f} s per run |"
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", default="runs/ner_alignment")
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--pretrain_steps", type=int, default=500, help="docs/japanese.md's command: 500")
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    args = parser.parse_args()
    output_dir, data = Path(args.output_dir), Path(args.data)
    output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print("\n".join(["", *alignment_table(output_dir, data), ""]), flush=True)
    model = pretrain(output_dir, data, args.pretrain_steps)
    print(f"pretrained {args.pretrain_steps} steps: {model}", flush=True)
    value = value_table(model, output_dir, args.seeds, args.epochs, args.learning_rate)
    print("\n".join(["", *value, "", f"total wall time {time.perf_counter() - started:.0f} s"]))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
