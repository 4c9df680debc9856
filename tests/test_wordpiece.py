"""BERT WordPiece vocabularies (the Chinese ALBERTs': `vocab.txt` with BERT's tokenizer) in every job: the one loader
(`albert_hf.formats.load_tokenizer`) reads them as BERT does, whole-word masking reads "##" continuations (and, for
Chinese, the words of a segmenter), and pretraining continues on one. `ner`, `classify` and `squad` fine-tuning such a
model folder, and the folders they write loading without albert_hf, are in tests/test_stock_format.py (with every
job's output folder, loaded by one process).

The reference tokenization is google-research's own `FullTokenizer` on the `vocab.txt` (`helpers.wordpiece`), which
shares no code with transformers' `BertTokenizer` (Rust `tokenizers`). The vocabulary is trained here, on the
repository's Chinese text (no Hub).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from helpers.wordpiece import (
    chinese_paragraphs,
    google_wordpiece_ids,
    google_wordpiece_tokens,
    train_chinese_wordpiece,
    wordpiece_model_folder,
)
from transformers import BertTokenizer

from albert_hf.cli import main as cli_main
from albert_hf.data.collator import DataCollatorForSOP
from albert_hf.data.word_segmentation import describe_word_segmenter, resolve_word_segmenter
from albert_hf.formats import SENTENCEPIECE, WORDPIECE, load_tokenizer, tokenizer_kind

QUIET = ["--use_cpu", "true", "--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no"]
MIXED = ["我住得久了，“入芝兰之室，久而不闻其香”。", "He was PLAYING unaffordable games in 1990, 北京!", "  "]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory) -> Path:
    return train_chinese_wordpiece(tmp_path_factory.mktemp("vocabulary"))


@pytest.fixture(scope="module")
def model_folder(vocab_file, tmp_path_factory) -> Path:
    return wordpiece_model_folder(tmp_path_factory.mktemp("models") / "albert-zh-tiny", vocab_file)


def test_the_one_loader_reads_a_wordpiece_vocabulary_as_bert_does(vocab_file, model_folder, tmp_path, spiece_model):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "vocab.txt").write_bytes(vocab_file.read_bytes())  # a folder as some Hub repositories hold it
    texts = chinese_paragraphs()[:40] + MIXED
    expected = google_wordpiece_ids(vocab_file, texts)
    assert any(token.startswith("##") for token in google_wordpiece_tokens(vocab_file, MIXED[1]))
    for source in (vocab_file, model_folder, bare):
        assert tokenizer_kind(source) == WORDPIECE
        tokenizer = load_tokenizer(source)
        assert isinstance(tokenizer, BertTokenizer), source
        assert tokenizer(texts, add_special_tokens=False)["input_ids"] == expected, source
    assert tokenizer_kind(spiece_model) == SENTENCEPIECE
    # The folder the import writes is transformers' own ALBERT with BERT's tokenizer: stock, no code.
    config = json.loads((model_folder / "config.json").read_text())
    tokenizer_config = json.loads((model_folder / "tokenizer_config.json").read_text())
    assert config["model_type"] == "albert" and tokenizer_config["tokenizer_class"] == "BertTokenizer"
    assert not list(model_folder.glob("*.py"))


def test_whole_word_masking_reads_wordpiece_continuations(vocab_file):
    """A word is a piece and the "##" pieces after it (BERT's `create_pretraining_data.py`): the collator's words,
    against the words read off google-research's tokens."""
    tokenizer = load_tokenizer(vocab_file)
    text = "He was PLAYING unaffordable games, 北京!"
    tokens = google_wordpiece_tokens(vocab_file, text)
    expected_lengths = []
    for token in tokens:
        if token.startswith("##"):
            expected_lengths[-1] += 1
        else:
            expected_lengths.append(1)
    assert max(expected_lengths) > 1  # the text has continued words
    collator = DataCollatorForSOP(tokenizer)
    ids = np.array([tokenizer.cls_token_id, *tokenizer.convert_tokens_to_ids(tokens), tokenizer.sep_token_id])
    starts, lengths, _ = collator.words(ids)
    assert lengths.tolist() == expected_lengths and starts[0] == 1
    assert describe_word_segmenter(None, tokenizer) == "WordPiece's \"##\" continuations (BERT's rule)"


def test_chinese_whole_word_masking_joins_the_characters_of_a_segmenter_word(vocab_file):
    """With jieba (chosen for Chinese text), a word of jieba's is one word of its characters, as Chinese BERT-wwm
    marks them: each character is a token of BERT's, and a token starts a word where a jieba word starts."""
    import jieba

    tokenizer = load_tokenizer(vocab_file)
    sentences = [paragraph for paragraph in chinese_paragraphs()[:20] if paragraph.strip()]
    segmenter = resolve_word_segmenter("auto", sentences)
    assert segmenter.name == "jieba"
    ids, starts = segmenter.encode(tokenizer, sentences)
    assert ids == tokenizer(sentences, add_special_tokens=False)["input_ids"]
    for sentence, sentence_starts in zip(sentences, starts):
        word_starts = set()
        position = 0
        for word in jieba.lcut(sentence):
            word_starts.add(position)
            position += len(word)
        characters = [index for index, char in enumerate(sentence) if not char.isspace()]
        assert len(characters) == len(sentence_starts)  # one token per character: all are in the vocabulary
        assert sentence_starts == [int(index in word_starts) for index in characters]
    assert 0 < sum(map(sum, starts)) < sum(map(len, starts))  # words of several characters were found


def test_continued_pretraining_on_a_wordpiece_vocabulary_masks_jieba_words(model_folder, tmp_path, caplog):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(chinese_paragraphs()[:30]) + "\n", encoding="utf-8")
    argv = ["pretrain", "--model_name_or_path", str(model_folder), "--train_files", str(corpus)]
    argv += ["--lines_are_paragraphs", "--max_seq_length", "64", "--max_steps", "1"]
    argv += ["--per_device_train_batch_size", "2", "--output_dir", str(tmp_path / "out"), *QUIET]
    with caplog.at_level(logging.INFO, logger="albert_hf"):
        assert cli_main(argv) == 0
    messages = [record.getMessage() for record in caplog.records]
    assert any("word boundaries from jieba" in message for message in messages), messages
    assert isinstance(load_tokenizer(tmp_path / "out"), BertTokenizer)
