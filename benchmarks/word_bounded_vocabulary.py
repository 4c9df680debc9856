"""Word-bounded vocabularies of Japanese and Chinese against vocabularies whose pieces run across words.

    nice -n 10 python benchmarks/word_bounded_vocabulary.py --output_dir runs/word_bounded   # ~10 min on 2 cores

Text: the Japanese novel of the shared data (`corpus/ja/wagahai_wa_neko_de_aru.txt`, one sentence per line) and Lu
Xun's two stories (`tests/data/chinese_lu_xun_nahan.txt`, one paragraph per line); the NER fixtures of
`tests/data/ner_cjk/` (made up for this project). Vocabularies: `albert-hf train-tokenizer`'s recipe with
`--word_segmenter auto` (bounded: fugashi/unidic-lite, jieba) and `--word_segmenter none` (unbounded, as before), the
same size each: 8,000 pieces of the novel (docs/japanese.md's command, character coverage 0.9995), 800 of Lu Xun's
3,900 characters (the bounded vocabulary holds at most 929 there).

1. Means: how a bounded vocabulary is learned, chosen by measurement. The lines are split 9:1 (every tenth line held
   out); vocabularies of the nine tenths, tokens per character of the held-out tenth, each bounded one encoded word
   by word: (i) SentencePiece on the raw text (unbounded), (ii) SentencePiece's `pretokenization_delimiter` between
   the segmenter's words (its seed pieces stop at the delimiter; its EM training sees the sentences without it), (iii)
   the segmenter's words as SentencePiece's TSV input with their counts (what `train_tokenizer` does), and the floor
   of any bounded vocabulary: one piece per word.
2. (a) QA answers at word boundaries reachable exactly: contexts are the corpora's paragraphs (the novel's blank-line
   paragraphs, Lu Xun's lines); answers are runs of 1 to 3 consecutive words of the segmenter on the raw paragraph
   (no run that is only punctuation), 2 per paragraph of the novel and 6 per paragraph of Lu Xun, seeded; and the
   entities of the NER fixtures' dev splits as answers in their sentences. Each goes through `albert-hf squad`'s own
   steps: windows of 384 tokens (stride 128), one-hot logits at the gold span, post-processing; exact when the
   answer comes back character for character (target: at least 99.5% for bounded). Also the share of the answers'
   edges that fall inside a piece (what the job logs). (b) NER gold round trip (gold tags -> piece labels -> tags,
   seqeval F1; target 1.0) on the fixtures' dev splits, with the corpus vocabularies and with vocabularies of each
   fixture's own training text (300 / 200 pieces). (c) tokens per character of each whole corpus. (d) encoding
   speed of every line of each corpus, side by side in this process: `tokenizer(lines)` (what the fine-tuning jobs
   call) and `encode_plain_texts` (pretraining data), best of 3, and the segmenter alone.
3. Pretraining: docs/japanese.md's `albert-hf pretrain` command on the novel (500 steps of 16 x 64 tokens, 70
   paragraphs held out; `--pretrain_steps` changes it) with each 8,000-piece vocabulary; held-out MLM accuracy beside
   its frequency baseline (the most frequent masked token), SOP accuracy, tokens per character; `--skip_pretraining`
   leaves it out.

Prints the tables (markdown) for docs/japanese.md.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import sys
import time
from pathlib import Path

import numpy as np
import sentencepiece as spm
from common import pretraining_run
from datasets import Dataset
from ner_alignment import alignment_figures, fixture

from albert_hf.data.ner import join_words
from albert_hf.data.squad_windows import (
    char_span_to_token_span,
    postprocess_predictions,
    prepare_eval_features,
    window_offsets,
)
from albert_hf.data.word_segmentation import edges_inside_pieces
from albert_hf.pretraining.arguments import parse_pretraining_args
from albert_hf.pretraining.report import held_out_baselines
from albert_hf.tokenization import AlbertHFTokenizer, segment_chinese, segment_japanese, segment_word_ends
from albert_hf.vocabulary import ALBERT_CONTROL_SYMBOLS, ALBERT_USER_DEFINED_SYMBOLS, count_word_parts, train_tokenizer

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPOSITORY.parent / "shared" / "data"))
NOVEL = Path("corpus") / "ja" / "wagahai_wa_neko_de_aru.txt"
LU_XUN = REPOSITORY / "tests" / "data" / "chinese_lu_xun_nahan.txt"
SEGMENT = {"ja": segment_japanese, "zh": segment_chinese}
SEGMENTER = {"ja": "fugashi", "zh": "jieba"}
VOCAB_SIZE = {"ja": 8000, "zh": 800}
COVERAGE = 0.9995
DELIMITER = "\ufdd1"  # a noncharacter: in no text, kept by SentencePiece's nmt_nfkc


def corpus_lines(language: str, data: Path) -> list[str]:
    path = data / NOVEL if language == "ja" else LU_XUN
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def paragraphs(language: str, data: Path) -> list[str]:
    """The novel's paragraphs (lines between blank lines, joined), Lu Xun's lines."""
    if language == "zh":
        return corpus_lines("zh", data)
    text = (data / NOVEL).read_text(encoding="utf-8")
    return ["".join(block.split("\n")).strip() for block in text.split("\n\n") if block.strip()]


def vocabulary(language: str, lines: list[str], folder: Path, bounded: bool) -> AlbertHFTokenizer:
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "spiece.model").exists():
        return AlbertHFTokenizer.from_pretrained(folder)
    text = folder / "text.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return train_tokenizer(
        text,
        folder,
        VOCAB_SIZE[language],
        character_coverage=COVERAGE,
        show_progress=False,
        word_segmenter="auto" if bounded else "none",
    )


def tokens_per_character(tokenizer, lines: list[str]) -> float:
    return sum(map(len, tokenizer.encode_plain_texts(lines))) / sum(len("".join(line.split())) for line in lines)


# ---- 1. means --------------------------------------------------------------------------------------------------------


def delimiter_vocabulary(language: str, lines: list[str], folder: Path) -> AlbertHFTokenizer:
    """SentencePiece's `pretokenization_delimiter` between the segmenter's words (of the text as the tokenizer reads
    it), the ALBERT recipe otherwise; as many pieces as it can learn, up to the size asked."""
    folder.mkdir(parents=True, exist_ok=True)
    normalizer = spm.SentencePieceNormalizer(
        rule_name="nmt_nfkc", add_dummy_prefix=False, escape_whitespaces=False, remove_extra_whitespaces=True
    )
    sentences = []
    for line in lines:
        text = normalizer.normalize(line.lower())
        ends = segment_word_ends(SEGMENT[language], text, SEGMENTER[language])
        sentences.append(DELIMITER.join(text[a:b] for a, b in zip([0, *ends], ends)))
    model = folder / "spiece.model"
    with open(model, "wb") as writer:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=writer,
            model_type="unigram",
            vocab_size=VOCAB_SIZE[language],
            hard_vocab_limit=False,
            character_coverage=COVERAGE,
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            control_symbols=list(ALBERT_CONTROL_SYMBOLS),
            user_defined_symbols=list(ALBERT_USER_DEFINED_SYMBOLS),
            pretokenization_delimiter=DELIMITER,
            normalization_rule_name="nmt_nfkc",
            minloglevel=2,
        )
    return AlbertHFTokenizer(vocab_file=str(model), keep_accents=True, word_segmenter=SEGMENTER[language])


def means_table(data: Path, output_dir: Path) -> list[str]:
    rows = [
        "| text | means | pieces | tokens per character (held-out tenth) | against unbounded |",
        "| --- | --- | --- | --- | --- |",
    ]
    for language in ("ja", "zh"):
        lines = corpus_lines(language, data)
        held_out = lines[::10]
        train = [line for index, line in enumerate(lines) if index % 10]
        folder = output_dir / "means" / language
        unbounded = vocabulary(language, train, folder / "unbounded", bounded=False)
        base = tokens_per_character(unbounded, held_out)
        found = [
            ("(i) SentencePiece on the raw text (unbounded)", unbounded),
            ("(ii) `pretokenization_delimiter` between words", delimiter_vocabulary(language, train, folder / "delim")),
            ("(iii) words with their counts as TSV (`train_tokenizer`)", vocabulary(language, train, folder / "tsv", True)),
        ]  # fmt: skip
        for name, tokenizer in found:
            ratio = tokens_per_character(tokenizer, held_out)
            rows.append(f"| {language} | {name} | {len(tokenizer):,} | {ratio:.4f} | {ratio / base:.3f}x |")
        prepared = [" ".join(line.lower().split()) for line in held_out]
        words = sum(count_word_parts(prepared, SEGMENTER[language]).values())
        floor = words / sum(len("".join(line.split())) for line in held_out)
        rows.append(f"| {language} | floor of any bounded vocabulary: one piece per word | - | {floor:.4f} | "
                    f"{floor / base:.3f}x |")  # fmt: skip
    return rows


# ---- 2. answers, entities, tokens, speed -----------------------------------------------------------------------------


def word_answers(language: str, data: Path, per_paragraph: int, seed: int = 0) -> Dataset:
    """QA examples: each paragraph with `per_paragraph` answers of 1 to 3 consecutive words of the segmenter."""
    generator, rows = random.Random(seed), []
    for index, context in enumerate(paragraphs(language, data)):
        words, position = [], 0
        for word in SEGMENT[language](context):
            if word.strip():
                position = context.index(word, position)
                words.append((position, position + len(word)))
                position += len(word)
        if not any(any(char.isalnum() for char in context[start:end]) for start, end in words):
            continue
        for number in range(per_paragraph):
            while True:  # a run of words that is not only punctuation
                first = generator.randrange(len(words))
                last = min(len(words), first + generator.randint(1, 3)) - 1
                start, end = words[first][0], words[last][1]
                if any(char.isalnum() for char in context[start:end]):
                    break
            answers = {"text": [context[start:end]], "answer_start": [start]}
            rows.append({"id": f"{index}-{number}", "title": "", "context": context, "question": "何？", "answers": answers})  # fmt: skip
    return Dataset.from_list(rows)


def entity_answers(language: str) -> Dataset:
    """QA examples: the entities of the NER fixture's dev split, in their sentences written as running text."""
    sentences, rows = fixture(language, "valid"), []
    for index, (words, tags) in enumerate(zip(sentences["tokens"], sentences["ner_tags"])):
        text, spans = join_words(words)
        for first, tag in enumerate(tags):
            if tag.startswith("B-"):
                last = first
                while last + 1 < len(tags) and tags[last + 1] == f"I-{tag[2:]}":
                    last += 1
                start, end = spans[first][0], spans[last][1]
                answers = {"text": [text[start:end]], "answer_start": [start]}
                rows.append({"id": f"{index}-{first}", "title": "", "context": text, "question": "何？", "answers": answers})  # fmt: skip
    return Dataset.from_list(rows)


def reachable(examples: Dataset, tokenizer) -> tuple[float, float]:
    """(share of answers that come back exactly from one-hot logits at their token span, share of answer edges
    inside a piece), through the squad job's windows and post-processing."""
    features = examples.map(
        prepare_eval_features,
        batched=True,
        remove_columns=examples.column_names,
        fn_kwargs={"tokenizer": tokenizer, "max_seq_length": 384, "doc_stride": 128},
    )
    offsets = window_offsets(features)
    starts, ends = np.zeros(offsets.shape[:2]), np.zeros(offsets.shape[:2])
    row_of = {question_id: row for row, question_id in enumerate(examples["id"])}
    answers = examples["answers"]
    for window, question_id in enumerate(features["example_id"]):
        answer = answers[row_of[question_id]]
        start_char = answer["answer_start"][0]
        context_tokens = np.flatnonzero(offsets[window, :, 0] >= 0)
        span = char_span_to_token_span(
            offsets[window], (context_tokens[0], context_tokens[-1]), start_char, start_char + len(answer["text"][0])
        )
        if span is not None:
            starts[window, span[0]] = ends[window, span[1]] = 10.0
    predictions = postprocess_predictions(examples, features, starts, ends, max_answer_length=100).predictions
    exact = sum(predictions[row["id"]] == row["answers"]["text"][0] for row in examples) / len(examples)
    edges: dict[str, list[int]] = {}
    for row in examples:
        start = row["answers"]["answer_start"][0]
        edges.setdefault(row["context"], []).extend((start, start + len(row["answers"]["text"][0])))
    inside, total = edges_inside_pieces(tokenizer, list(edges), list(edges.values()))
    return exact, inside / total


def best_time(function, tokenizer=None, repeats: int = 3) -> float:
    """The best of `repeats` timings of `function(tokenizer)`, each on a fresh copy of the tokenizer (a word-bounded
    tokenizer remembers the words of the texts it saw last: no repeat may start with them known)."""
    times = []
    for _ in range(repeats):
        fresh = pickle.loads(pickle.dumps(tokenizer)) if tokenizer is not None else None
        fresh and fresh.encode_plain_texts(["準備"])  # SentencePiece's processors are built on first use
        started = time.perf_counter()
        function(fresh)
        times.append(time.perf_counter() - started)
    return min(times)


def comparison_tables(data: Path, output_dir: Path) -> list[str]:
    qa = [
        "| text | answers | vocabulary | pieces | reachable exactly | answer edges inside a piece |",
        "| --- " * 6 + "|",
    ]
    ner = [
        "| fixture (dev split) | vocabulary | pieces | gold round trip F1 | tokens per sentence |",
        "| --- " * 5 + "|",
    ]
    speed = [
        "| text | vocabulary | tokens per character | `tokenizer(lines)` | `encode_plain_texts` | segmenter alone |",
        "| --- " * 6 + "|",
    ]
    tokenizers = {}
    for language in ("ja", "zh"):
        lines = corpus_lines(language, data)
        for bounded in (False, True):
            name = "bounded" if bounded else "unbounded"
            tokenizers[language, bounded] = vocabulary(language, lines, output_dir / f"{language}-{name}", bounded)
        questions = {
            f"words of the {'novel' if language == 'ja' else 'stories'}": word_answers(
                language, data, 2 if language == "ja" else 6
            ),  # fmt: skip
            "entities of the NER fixture": entity_answers(language),
        }
        for what, examples in questions.items():
            for bounded in (False, True):
                tokenizer = tokenizers[language, bounded]
                exact, inside = reachable(examples, tokenizer)
                qa.append(f"| {language} | {what} ({len(examples):,}) | {'bounded' if bounded else 'unbounded'} | "
                          f"{len(tokenizer):,} | {exact:.2%} | {inside:.2%} |")  # fmt: skip
        fixture_text = output_dir / f"{language}-fixture.txt"
        sentences = fixture(language, "train")["tokens"]
        fixture_text.write_text("".join(join_words(words)[0] + "\n" for words in sentences), encoding="utf-8")
        size = 300 if language == "ja" else 200
        for bounded in (False, True):
            name = "bounded" if bounded else "unbounded"
            corpus = tokenizers[language, bounded]
            own = train_tokenizer(
                fixture_text, output_dir / f"{language}-fixture-{name}", size, character_coverage=1.0,
                show_progress=False, word_segmenter="auto" if bounded else "none",
            )  # fmt: skip
            for source, tokenizer in ((f"the {'novel' if language == 'ja' else 'stories'}", corpus), ("its train split", own)):  # fmt: skip
                figures = alignment_figures(language, tokenizer)["running_text"]
                ner.append(f"| {language} | {source}, {name} | {len(tokenizer):,} | {figures['round_trip_f1']:.4f} | "
                           f"{figures['tokens']:.2f} |")  # fmt: skip
        segment = SEGMENT[language]
        alone = best_time(lambda _: [segment(line) for line in lines])
        timings = {}
        for bounded in (False, True):
            tokenizer = tokenizers[language, bounded]
            timings[bounded] = (
                best_time(lambda fresh: fresh(lines, add_special_tokens=False), tokenizer),
                best_time(lambda fresh: fresh.encode_plain_texts(lines), tokenizer),
            )
        for bounded in (False, True):
            call, plain = timings[bounded]
            ratio = "" if not bounded else f" ({call / timings[False][0]:.1f}x)"
            plain_ratio = "" if not bounded else f" ({plain / timings[False][1]:.1f}x)"
            speed.append(
                f"| {language} ({len(lines):,} lines) | {'bounded' if bounded else 'unbounded'} | "
                f"{tokens_per_character(tokenizers[language, bounded], lines):.4f} | {call:.2f} s{ratio} | "
                f"{plain:.2f} s{plain_ratio} | {alone:.2f} s |"
            )
    return qa + [""] + ner + [""] + speed


# ---- 3. pretraining --------------------------------------------------------------------------------------------------


def pretraining_table(data: Path, output_dir: Path, steps: int) -> list[str]:
    rows = [
        "| vocabulary | pieces | tokens per character | masked held-out tokens | MLM accuracy (loss) | baseline: always "
        "| baseline accuracy | ratio | SOP accuracy (majority) | wall time |",
        "| --- " * 10 + "|",
    ]
    lines = corpus_lines("ja", data)
    for bounded in (False, True):
        name = "bounded" if bounded else "unbounded"
        tokenizer_dir = output_dir / f"ja-{name}"
        argv = ["--recipe", "tiny", "--train_files", str(data / NOVEL), "--validation_documents", "70"]
        argv += ["--tokenizer_name_or_path", str(tokenizer_dir), "--output_dir", str(output_dir / f"pretrain-{name}")]
        argv += ["--max_steps", str(steps), "--warmup_steps", str(max(1, steps * 60 // 500)), "--max_seq_length", "64"]
        argv += ["--per_device_train_batch_size", "16", "--global_batch_size", "16", "--dupe_factor", "3"]
        argv += ["--eval_strategy", "no", "--logging_steps", "100", "--save_strategy", "no", "--seed", "42"]
        argv += ["--use_cpu", "--report_to", "none", "--overwrite_output_dir", "--disable_tqdm", "true"]
        started = time.perf_counter()
        run = pretraining_run(parse_pretraining_args(argv))
        run.trainer.train()
        metrics = run.trainer.evaluate()
        seconds = time.perf_counter() - started
        baselines = held_out_baselines(run.trainer, run.eval_dataset)
        token = run.tokenizer.convert_ids_to_tokens(baselines.mlm_token_id)
        rows.append(
            f"| {name} (`--word_segmenter {'auto' if bounded else 'none'}`) | {len(run.tokenizer):,} | "
            f"{tokens_per_character(run.tokenizer, lines):.4f} | {baselines.mlm_targets:,} | "
            f"{metrics['eval_mlm_accuracy']:.3f} ({metrics['eval_mlm_loss']:.2f}) | {token!r} | {baselines.mlm:.3f} | "
            f"{metrics['eval_mlm_accuracy'] / baselines.mlm:.2f}x | {metrics['eval_sop_accuracy']:.3f} "
            f"({baselines.sop:.3f}) | {seconds / 60:.1f} min |"
        )
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pretrain_steps", type=int, default=500)
    parser.add_argument("--skip_pretraining", action="store_true")
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tables = [means_table(args.data_dir, args.output_dir), comparison_tables(args.data_dir, args.output_dir)]
    if not args.skip_pretraining:
        tables.append(pretraining_table(args.data_dir, args.output_dir, args.pretrain_steps))
    for table in tables:
        print("\n" + "\n".join(table))
    print(f"\n{(time.perf_counter() - started) / 60:.1f} min in all")


if __name__ == "__main__":
    main(sys.argv[1:])
