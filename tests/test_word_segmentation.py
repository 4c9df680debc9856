"""Whole-word masking from real word boundaries: words found by fugashi/unidic-lite (Japanese) and jieba (Chinese)
when the data is prepared, stored with the instances (in memory and in the resumable stream) and masked whole by the
collator; spaced text kept bit for bit as the original's "▁" rule; the masking statistics of the log."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from datasets import concatenate_datasets
from helpers.tiny import TINY_TWO_LAYER_OVERRIDES

from albert_hf.data.collator import DataCollatorForSOP, sample_ngram_spans
from albert_hf.data.instance_stream import ResumableInstanceStream
from albert_hf.data.masking_stats import is_punctuation_piece, masking_statistics
from albert_hf.data.sentence_order import (
    build_pretraining_dataset,
    create_sentence_order_instances,
    load_text_documents,
    tokenize_documents,
)
from albert_hf.data.word_segmentation import (
    WordSegmenter,
    describe_word_segmenter,
    resolve_word_segmenter,
)
from albert_hf.pretraining.arguments import PretrainingDataArguments, parse_pretraining_args
from albert_hf.pretraining.corpus import SCRIPT_SAMPLE_DOCUMENTS, SCRIPT_SAMPLE_SENTENCES, choose_word_segmenter
from albert_hf.scripts.pretrain import main
from albert_hf.tokenization import segment_chinese, segment_japanese
from albert_hf.vocabulary import train_tokenizer

JAPANESE_NOVEL = Path("corpus") / "ja" / "wagahai_wa_neko_de_aru.txt"
CHINESE_STORIES = Path(__file__).parent / "data" / "chinese_lu_xun_nahan.txt"
NGRAM_PROBS = np.array([6 / 11, 3 / 11, 2 / 11])
MASKING_LINE = (
    r"masking: \d+\.\d% of tokens masked \(masked_lm_prob 0\.15\), words of \d+\.\d pieces on average, "
    r"word boundaries from "
)


def within(observed: float, expected: float, count: int, sigmas: float = 4.0) -> bool:
    return abs(observed - expected) <= sigmas * np.sqrt(expected * (1 - expected) / count)


# ---- fixtures: the Japanese novel (vocabulary of train_tokenizer's defaults) and the Chinese stories ---------------


@pytest.fixture(scope="module")
def japanese(shared_data, tmp_path_factory):
    """(tokenizer, documents) of the novel: 8,000 pieces by train_tokenizer's defaults on the full novel (as measured
    in docs/japanese.md), 2,000 on the repository's excerpt (its first 600 lines hold no more). Pieces as
    SentencePiece learns them from the raw text (`word_segmenter="none"`), across words: the vocabulary whole-word
    masking has to find words in (tests/test_word_bounded_vocabulary.py has the word-bounded ones)."""
    path = shared_data / JAPANESE_NOVEL
    vocab_size = 8000 if path.stat().st_size > 500_000 else 2000
    tokenizer = train_tokenizer(
        path, tmp_path_factory.mktemp("ja-tokenizer"), vocab_size=vocab_size, show_progress=False, word_segmenter="none"
    )
    return tokenizer, load_text_documents(path)


@pytest.fixture(scope="module")
def chinese(tmp_path_factory):
    """(tokenizer, documents) of two of Lu Xun's stories (tests/data/README.md): 1,000 pieces by train_tokenizer's
    defaults (the 3,900 characters hold no more than 1,065), pieces across words as for the novel."""
    tokenizer = train_tokenizer(
        CHINESE_STORIES,
        tmp_path_factory.mktemp("zh-tokenizer"),
        vocab_size=1000,
        show_progress=False,
        word_segmenter="none",
    )
    return tokenizer, load_text_documents(CHINESE_STORIES, split_lines=True)


def first_sentences(documents) -> list[str]:
    """The sentences `albert-hf pretrain` reads the script of."""
    first = documents.select(range(min(SCRIPT_SAMPLE_DOCUMENTS, len(documents))))["sentences"]
    return [sentence for document in first for sentence in document][:SCRIPT_SAMPLE_SENTENCES]


def masked_features(tokenizer, documents, segmenter, instances: int = 1000) -> list[dict]:
    dataset = build_pretraining_dataset(
        documents, tokenizer, max_seq_length=128, dupe_factor=10, word_segmenter=segmenter
    )
    return [dataset[i] for i in range(min(instances, len(dataset)))]


def span_lengths(collator: DataCollatorForSOP, features: list[dict], draws: int = 4) -> np.ndarray:
    """Lengths of the spans placed while the remaining budget could hold any 3-gram (as test_collator's test)."""
    rng, lengths = np.random.default_rng(0), []
    for feature in features:
        ids = np.asarray(feature["input_ids"])
        _, word_lengths, word_segments = collator.words(ids, np.asarray(feature.get("word_starts", ids * 0 + 1)))
        pieces_before = np.concatenate([[0], np.cumsum(word_lengths)])
        largest_trigram = (pieces_before[3:] - pieces_before[:-3]).max()
        for _ in range(draws):
            remaining = collator.budget(len(ids))
            for first, n in sample_ngram_spans(word_lengths, word_segments, remaining, NGRAM_PROBS, rng):
                if remaining >= largest_trigram:
                    lengths.append(n)
                remaining -= pieces_before[first + n] - pieces_before[first]
    return np.array(lengths)


def meets_targets(stats) -> bool:
    """The targets of whole-word masking on a corpus: 15 +- 1.5% of tokens masked, words of at most 4 pieces on
    average, the punctuation share of the masks within 3 points of the text's."""
    return (
        abs(stats.masked_share - 0.15) <= 0.015
        and stats.pieces_per_word <= 4
        and abs(stats.punctuation_share_of_masks - stats.punctuation_share_of_text) <= 0.03
    )


# ---- choosing the segmenter -----------------------------------------------------------------------------------------


def test_segmenters_find_words():
    assert segment_japanese("吾輩は猫である。名前はまだ無い。") == [
        "吾輩", "は", "猫", "で", "ある", "。", "名前", "は", "まだ", "無い", "。",
    ]  # fmt: skip
    assert segment_chinese("我来到北京清华大学。") == ["我", "来到", "北京", "清华大学", "。"]


def test_the_segmenter_is_chosen_from_the_script(japanese, chinese, shared_data):
    assert resolve_word_segmenter(None, first_sentences(japanese[1])).name == "fugashi/unidic-lite"
    assert resolve_word_segmenter("auto", first_sentences(chinese[1])).name == "jieba"
    english = load_text_documents(shared_data / "corpus" / "botchan.txt")
    assert resolve_word_segmenter("auto", first_sentences(english)) is None  # the "▁" rule, nothing stored
    assert resolve_word_segmenter("pieces", first_sentences(japanese[1])) is None
    assert (
        resolve_word_segmenter("jieba").name == "jieba"
        and resolve_word_segmenter("fugashi").segment is segment_japanese
    )
    assert describe_word_segmenter(None) == 'SentencePiece\'s "▁" (the original rule)'
    # A stream is not read into documents first: its first file's are.
    streamed = PretrainingDataArguments(train_files=[str(shared_data / JAPANESE_NOVEL)], streaming=True)
    assert choose_word_segmenter(streamed, None).name == "fugashi/unidic-lite"


def test_a_missing_extra_is_an_error_that_names_it(monkeypatch, japanese, chinese):
    monkeypatch.setitem(sys.modules, "fugashi", None)  # what an environment without the package gives
    monkeypatch.setitem(sys.modules, "jieba", None)
    with pytest.raises(
        ImportError, match=r'Japanese text: .*fugashi/unidic-lite.*pip install "albert_hf\[ja\]".*--word_segmenter'
    ):
        resolve_word_segmenter(None, first_sentences(japanese[1]))
    with pytest.raises(ImportError, match=r'Chinese text: .*jieba.*pip install "albert_hf\[zh\]"'):
        resolve_word_segmenter(None, first_sentences(chinese[1]))
    assert resolve_word_segmenter("pieces", first_sentences(japanese[1])) is None  # the way out it names


def characters(text: str) -> list[str]:
    return list(text)


def test_another_word_segmenter_plugs_in_and_bad_ones_are_named(tmp_path, monkeypatch, japanese):
    (tmp_path / "my_segmenters.py").write_text(
        "def chars(text):\n    return list(text)\n\ndef drops(text):\n    return [text[:1]]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    tokenizer = japanese[0]
    segmenter = resolve_word_segmenter("my_segmenters:chars")
    assert segmenter.name == "my_segmenters:chars"
    ids, starts = segmenter.encode(tokenizer, ["吾輩は猫である。"])
    assert ids == tokenizer.encode_plain_texts(["吾輩は猫である。"]) and all(
        starts[0]
    )  # every piece starts a character
    with pytest.raises(ValueError, match="cannot be imported"):
        resolve_word_segmenter("my_segmenters:missing")
    with pytest.raises(ValueError, match="'auto', 'pieces', 'fugashi', 'jieba' or 'package.module:function'"):
        resolve_word_segmenter("no_such_segmenter")
    with pytest.raises(ValueError, match="is in none of its words"):
        resolve_word_segmenter("my_segmenters:drops").encode(tokenizer, ["吾輩は猫である。"])
    args = ["--output_dir", str(tmp_path), "--word_segmenter", "my_segmenters:chars", "--use_cpu"]
    assert parse_pretraining_args(args)[1].word_segmenter == "my_segmenters:chars"


# ---- spaced text: bit for bit as the original rule -----------------------------------------------------------------


def test_stored_word_starts_of_spaced_text_reproduce_the_piece_rule_bit_for_bit(shared_data, tokenizer):
    """English (Botchan; WikiText-2, whose numbers exercise the re-split of "1990," pieces) through the stored path,
    words split at spaces and mapped to pieces by their offsets: the same ids, word starts equal to the "▁" rule at
    every token, and the collator's batches identical to those it makes without them."""
    documents = concatenate_datasets(
        [
            load_text_documents(shared_data / "corpus" / "botchan.txt"),
            load_text_documents(shared_data / "corpus" / "wikitext2_valid_paragraphs.txt", split_lines=True),
        ]
    )
    options = dict(max_seq_length=128, dupe_factor=3)
    plain = build_pretraining_dataset(documents, tokenizer, **options)
    stored = build_pretraining_dataset(
        documents, tokenizer, **options, word_segmenter=WordSegmenter("spaces", str.split)
    )
    assert plain.column_names == ["input_ids", "token_type_ids", "sentence_order_label"]
    assert stored.column_names == plain.column_names + ["word_starts"]
    assert stored.remove_columns("word_starts")[:] == plain[:]
    collator = DataCollatorForSOP(tokenizer, seed=7)
    for row in stored:
        assert np.array_equal(np.asarray(row["word_starts"], dtype=bool), collator._is_word_start[row["input_ids"]])
    features, with_starts = list(plain), list(stored)
    assert len(features) > 1000
    for start in range(0, len(features), 64):
        expected, batch = collator(features[start : start + 64]), collator(with_starts[start : start + 64])
        assert all(batch[key].equal(expected[key]) for key in expected)


# ---- the targets, on Japanese and Chinese --------------------------------------------------------------------------


def test_real_word_boundaries_meet_the_masking_targets_on_japanese(japanese):
    check_targets(*japanese, "fugashi/unidic-lite")


def test_real_word_boundaries_meet_the_masking_targets_on_chinese(chinese):
    check_targets(*chinese, "jieba")


def check_targets(tokenizer, documents, expected_segmenter: str) -> None:
    """With the segmenter chosen from the script: 15 +- 1.5% of tokens masked, words of at most 4 pieces, the
    punctuation share of masks within 3 points of the text's, and n-gram spans of 1/n over words. The "▁" rule on
    the same instances misses the targets (whole clauses as words)."""
    segmenter = resolve_word_segmenter(None, first_sentences(documents))
    assert segmenter.name == expected_segmenter
    collator = DataCollatorForSOP(tokenizer, seed=0)
    features = masked_features(tokenizer, documents, segmenter)
    stats = masking_statistics(collator, features, segmenter.name)
    assert meets_targets(stats), stats
    lengths = span_lengths(collator, features)
    assert len(lengths) > 5000
    for n, expected in zip((1, 2, 3), NGRAM_PROBS):
        assert within((lengths == n).mean(), expected, len(lengths)), (n, (lengths == n).mean())
    by_pieces = masking_statistics(collator, masked_features(tokenizer, documents, None), "pieces")
    assert not meets_targets(by_pieces) and by_pieces.pieces_per_word > 4, by_pieces


def test_punctuation_pieces():
    assert all(map(is_punctuation_piece, ["。", "、", "「", "▁」", ".", "…", "，"]))
    assert not any(map(is_punctuation_piece, ["▁", "猫", "▁the", "1", "$"]))


# ---- the stream keeps the word starts, and its exact resume ----------------------------------------------------------


def test_the_resumable_stream_carries_word_starts_and_resumes_exactly(japanese, shared_data, tmp_path):
    tokenizer = japanese[0]
    lines = (shared_data / JAPANESE_NOVEL).read_text(encoding="utf-8").split("\n")[:600]
    paths = []
    for index, part in enumerate((lines[:300], lines[300:])):
        paths.append(tmp_path / f"part-{index}.txt")
        paths[-1].write_text("\n".join(part).strip() + "\n", encoding="utf-8")
    segmenter = resolve_word_segmenter("fugashi")
    options = dict(window_size=40, seed=3, max_seq_length=64, documents_per_batch=4, word_segmenter=segmenter)
    stream = ResumableInstanceStream(paths, tokenizer, **options)
    rows = list(stream)
    assert rows and all(len(row["word_starts"]) == len(row["input_ids"]) for row in rows)
    documents = load_text_documents(stream.file_order(0), streaming=True)
    reference = create_sentence_order_instances(
        tokenize_documents(documents, tokenizer, documents_per_batch=4, word_segmenter=segmenter),
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        max_seq_length=64,
        seed=3,
        documents_per_batch=4,
    )

    def key(row):
        return tuple(row["input_ids"]), tuple(row["word_starts"]), row["sentence_order_label"]

    assert sorted(map(key, rows)) == sorted(map(key, reference))
    assert len(stream._windows) >= 3
    for consumed in (1, stream._windows[1].start.instance + 3, len(rows) - 1):
        resumed = ResumableInstanceStream(paths, tokenizer, **options)
        assert resumed.resume_from_state(stream.position_state(0, consumed), 0, consumed) is None
        assert list(map(key, resumed)) == list(map(key, rows[consumed:]))
    other = ResumableInstanceStream(paths, tokenizer, **{**options, "word_segmenter": None})
    assert other.fingerprint() != stream.fingerprint()  # a saved position is not taken by a stream of other words


# ---- the log of `albert-hf pretrain` --------------------------------------------------------------------------------


def test_masking_statistics_warn_when_far_from_masked_lm_prob(japanese, tokenizer, shared_data):
    ja_tokenizer, documents = japanese
    segmenter = resolve_word_segmenter("fugashi")
    stats = masking_statistics(
        DataCollatorForSOP(ja_tokenizer), masked_features(ja_tokenizer, documents, segmenter), segmenter.name
    )
    assert stats.warning() is None
    assert stats.describe() == (
        f"masking: {stats.masked_share:.1%} of tokens masked (masked_lm_prob 0.15), words of "
        f"{stats.pieces_per_word:.1f} pieces on average, word boundaries from fugashi/unidic-lite"
    )
    # Long sequences under the paper's cap of 20 predictions: the warning says the cap is why.
    english = build_pretraining_dataset(load_text_documents(shared_data / "corpus" / "botchan.txt"), tokenizer, 512)
    capped = masking_statistics(DataCollatorForSOP(tokenizer), list(english), "pieces")
    assert capped.masked_share < 0.1 and "max_predictions_per_seq caps" in capped.warning()


def test_pretrain_logs_the_masking_statistics_of_its_first_instances(japanese, shared_data, tmp_path, caplog):
    tokenizer, _ = japanese
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    argv = [
        "--train_files", str(shared_data / JAPANESE_NOVEL), "--validation_documents", "5",
        "--tokenizer_name_or_path", str(tmp_path / "tokenizer"), "--config_overrides", TINY_TWO_LAYER_OVERRIDES,
        "--max_seq_length", "64", "--max_steps", "1", "--per_device_train_batch_size", "4",
        "--output_dir", str(tmp_path / "model"), "--report_to", "none", "--use_cpu", "--disable_tqdm", "true",
        "--save_strategy", "no",
    ]  # fmt: skip
    with caplog.at_level(logging.INFO, logger="albert_hf.pretraining"):
        assert main(argv + ["--max_eval_instances", "8"]) == 0
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("masking:")]
    assert len(lines) == 1 and lines[0].endswith("word boundaries from fugashi/unidic-lite"), lines
    assert re.fullmatch(MASKING_LINE + "fugashi/unidic-lite", lines[0])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="albert_hf.pretraining"):
        assert main(argv + ["--word_segmenter", "pieces", "--max_eval_instances", "8", "--overwrite_output_dir"]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "masking:" in r.getMessage()]
    assert len(warnings) == 1 and "do not fit the budget" in warnings[0], warnings


def test_trainer_hands_the_word_starts_to_the_collator(japanese, tmp_path):
    """Trainer keeps only the columns the model's forward takes: "word_starts" must still reach the collator, or
    training would mask by the "▁" rule while the log reports words."""
    from albert_hf.arguments import ModelArguments
    from albert_hf.pretraining.run import build_pretraining_model, build_trainer
    from albert_hf.pretraining.trainer import PretrainingArguments

    tokenizer, documents = japanese
    dataset = build_pretraining_dataset(
        documents.select(range(40)), tokenizer, max_seq_length=64, word_segmenter=resolve_word_segmenter("fugashi")
    )
    model = build_pretraining_model(
        ModelArguments(config_preset="base-v2", config_overrides=TINY_TWO_LAYER_OVERRIDES), tokenizer, 64
    )
    training_args = PretrainingArguments(
        output_dir=str(tmp_path), per_device_eval_batch_size=8, report_to=[], use_cpu=True
    )
    trainer = build_trainer(model, tokenizer, PretrainingDataArguments(), training_args, dataset, dataset)
    batch = next(iter(trainer.get_eval_dataloader(dataset)))
    rows = [dataset[i] for i in range(8)]
    expected = trainer.data_collator(rows)
    assert batch["labels"].equal(expected["labels"]) and batch["input_ids"].equal(expected["input_ids"])
    by_pieces = trainer.data_collator([{k: v for k, v in row.items() if k != "word_starts"} for row in rows])
    assert not by_pieces["labels"].equal(expected["labels"])


def test_word_starts_do_not_depend_on_num_proc(japanese):
    """Workers segment their own batches (the segmenter travels to them by reference, its tagger is made there)."""
    tokenizer, documents = japanese
    documents = documents.select(range(min(60, len(documents))))
    segmenter = resolve_word_segmenter("fugashi")
    options = dict(max_seq_length=64, documents_per_batch=10, word_segmenter=segmenter)
    single = build_pretraining_dataset(documents, tokenizer, **options)
    assert build_pretraining_dataset(documents, tokenizer, num_proc=2, **options)[:] == single[:]
