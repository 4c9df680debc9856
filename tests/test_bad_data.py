"""Bad data: every malformed input gets an error naming the file and line, or a documented skip that is counted.

Inputs tried, per reader: empty files, blank-only files, non-UTF-8 bytes, missing columns or fields, unknown labels,
answers that do not occur in their context, empty and one-sentence documents, sentences longer than max_seq_length.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from albert_hf.data.glue import get_glue_task, read_glue_tsv
from albert_hf.data.multiple_choice import read_multiple_choice
from albert_hf.data.ner import load_ner_file
from albert_hf.data.pretraining import load_text_documents
from albert_hf.data.squad import load_squad_examples

LATIN1_BYTES = "café".encode("latin-1")  # b"caf\xe9": not UTF-8


def write(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


# --------------------------------------------------------------------------------------------------------------------
# Pretraining text: one sentence per line, blank lines between documents
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n\n   \n\t\n"], ids=["empty", "blank-lines-only"])
def test_corpus_without_text_names_the_file(tmp_path, content):
    path = write(tmp_path, "corpus.txt", content)
    with pytest.raises(ValueError, match=rf"{path}: no text found"):
        load_text_documents(path, cache_dir=str(tmp_path / "cache"))


def test_corpus_with_non_utf8_bytes_names_file_and_line(tmp_path):
    path = write(tmp_path, "corpus.txt", b"First sentence.\nSecond sentence.\n\n" + LATIN1_BYTES + b" au lait.\n")
    with pytest.raises(ValueError, match=rf"{path}:4: not valid UTF-8"):
        load_text_documents(path, cache_dir=str(tmp_path / "cache"))
    streamed = load_text_documents(path, streaming=True)
    with pytest.raises(ValueError, match=rf"{path}:4: not valid UTF-8"):
        list(streamed)


def test_runs_of_blank_lines_make_no_empty_documents(tmp_path):
    path = write(tmp_path, "corpus.txt", "\n\nA one.\nA two.\n\n\n\n  \nB one.\nB two.\n\n")
    documents = load_text_documents(path, cache_dir=str(tmp_path / "cache"))
    assert documents["sentences"] == [["A one.", "A two."], ["B one.", "B two."]]


def prepare(tmp_path: Path, tokenizer, text: str, max_seq_length: int = 32):
    from albert_hf.pretraining.arguments import PretrainingDataArguments
    from albert_hf.pretraining.data import prepare_datasets

    path = write(tmp_path, "corpus.txt", text)
    data_args = PretrainingDataArguments(
        train_files=[str(path)], max_seq_length=max_seq_length, cache_dir=str(tmp_path / "cache")
    )
    return prepare_datasets(data_args, tokenizer, seed=0)


def test_one_sentence_documents_are_skipped_counted_and_reported(tmp_path, tokenizer):
    text = "Only one sentence here.\n\nThe first of two.\nThe second of two.\n\nAlone again.\n"
    train, _, stats = prepare(tmp_path, tokenizer, text)
    assert stats.train_documents == 3 and stats.skipped_single_sentence_documents == 2
    assert "skipped single sentence documents: 2" in stats.describe()
    assert len(train) == 1  # the pair of the two-sentence document, and nothing else
    pair = tokenizer(["The first of two.", "The second of two."])["input_ids"]
    assert sorted(train[0]["input_ids"]) == sorted(pair[0] + pair[1][1:])  # [CLS] A [SEP] B [SEP], in either order


def test_sentences_longer_than_max_seq_length_are_truncated_and_counted(tmp_path, tokenizer):
    long_line = " ".join(f"word{i}" for i in range(200))  # hundreds of tokens, far over max_seq_length=32
    text = f"A short opening sentence.\n{long_line}\nA short closing sentence.\n"
    train, _, stats = prepare(tmp_path, tokenizer, text, max_seq_length=32)
    assert len(train) >= 1 and all(len(ids) <= 32 for ids in train["input_ids"])
    # The tokens cut from an over-long sentence must not vanish silently: the report counts such sentences.
    assert stats.sentences_longer_than_max_seq_length == 1
    assert "sentences longer than max seq length: 1" in stats.describe()


# --------------------------------------------------------------------------------------------------------------------
# GLUE tsv
# --------------------------------------------------------------------------------------------------------------------

SST2_HEADER = "sentence\tlabel\n"


@pytest.mark.parametrize(
    "content, message",
    [
        ("", r"{path}: empty file"),
        ("text\tlabel\na fine film\t1\n", r"{path}:1: the header has no column 'sentence'"),
        (
            SST2_HEADER + "a fine film\t1\nno label column here\n",
            r"{path}:3: expected 2 tab-separated columns, found 1",
        ),
        (SST2_HEADER + "a fine film\t1\na dull one\tmaybe\n", r"{path}:3: label 'maybe' is not one of \['0', '1'\]"),
        (SST2_HEADER.encode() + b"a fine film\t1\n" + LATIN1_BYTES + b"\t1\n", r"{path}:3: not valid UTF-8"),
    ],
    ids=["empty", "missing-column", "short-row", "unknown-label", "non-utf8"],
)
def test_glue_errors_name_file_and_line(tmp_path, content, message):
    path = write(tmp_path, "train.tsv", content)
    with pytest.raises(ValueError, match=message.format(path=path)):
        read_glue_tsv(str(path), get_glue_task("sst2"), labelled=True)


def test_glue_skip_malformed_rows_is_counted(tmp_path, caplog):
    path = write(tmp_path, "train.tsv", SST2_HEADER + "good\t1\nshort\nbad\tmaybe\nfine\t0\n")
    with caplog.at_level(logging.WARNING):
        rows = read_glue_tsv(str(path), get_glue_task("sst2"), labelled=True, skip_malformed_rows=True)
    assert [row["sentence1"] for row in rows] == ["good", "fine"]
    assert f"{path}: skipped 2 malformed rows (lines 3, 4)" in caplog.text


# --------------------------------------------------------------------------------------------------------------------
# CoNLL-2003
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        ("", r"{path}: no sentences found"),
        ("-DOCSTART- -X- -X- O\n\n", r"{path}: no sentences found"),
        ("EU NNP B-NP B-ORG\nrejects\n", r"{path}:2: expected a word and a tag"),
        ("EU NNP B-NP B-ORG\nrejects VBZ B-VP PER\n", r"{path}:2: 'PER' is not an IOB tag"),
        ("EU NNP B-NP B-ORG\nrejects VBZ B-VP X-MISC\n", r"{path}:2: 'X-MISC' is not an IOB tag"),
        (b"EU NNP B-NP B-ORG\n\n" + LATIN1_BYTES + b" NN I-NP O\n", r"{path}:3: not valid UTF-8"),
    ],
    ids=["empty", "docstart-only", "missing-column", "bare-type", "unknown-prefix", "non-utf8"],
)
def test_conll_errors_name_file_and_line(tmp_path, content, message):
    path = write(tmp_path, "train.txt", content)
    with pytest.raises(ValueError, match=message.format(path=path)):
        load_ner_file(str(path))


def test_conll_json_unknown_tag_id_names_the_line(tmp_path):
    lines = [json.dumps({"tokens": ["EU"], "ner_tags": [3]}), json.dumps({"tokens": ["EU"], "ner_tags": [42]})]
    path = write(tmp_path, "train.json", "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"{path}:2: tag id 42 is outside the label list"):
        load_ner_file(str(path))


# --------------------------------------------------------------------------------------------------------------------
# SQuAD
# --------------------------------------------------------------------------------------------------------------------


def squad_file(context: str = "Paris is the capital of France.", answer: str = "Paris", start: int = 0, **paragraph):
    qa = {"id": "q1", "question": "What is the capital?", "answers": [{"text": answer, "answer_start": start}]}
    return json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": [qa], **paragraph}]}]})


@pytest.mark.parametrize(
    "content, message",
    [
        ("", r"{path}: not valid JSON \(line 1"),
        (squad_file(answer="Lyon"), r"{path}: data\[0\].paragraphs\[0\].qas\[0\]: question 'q1': answer 'Lyon' is not"),
        (
            squad_file(start=5),
            r"{path}: data\[0\].paragraphs\[0\].qas\[0\]: question 'q1': answer 'Paris' is not at "
            r"answer_start 5",
        ),
        (
            squad_file().replace('"context"', '"text"'),
            r"{path}: data\[0\].paragraphs\[0\]: a paragraph needs 'context'",
        ),
        (json.dumps({"data": [{"id": "q", "context": "c", "question": "?"}]}), r"{path}: data\[0\]: 'answers' must be"),
        (b'{"data": [{"title": "' + LATIN1_BYTES + b'", "paragraphs": []}]}', r"{path}.*not valid UTF-8"),
    ],
    ids=["empty", "answer-not-in-context", "answer-elsewhere", "missing-context", "missing-answers", "non-utf8"],
)
def test_squad_errors_name_file_and_place(tmp_path, content, message):
    path = write(tmp_path, "dev.json", content)
    with pytest.raises(ValueError, match=message.format(path=path)):
        load_squad_examples(path)


def test_squad_json_lines_errors_name_the_line(tmp_path):
    record = {"id": "q1", "context": "abc", "question": "?", "answers": {"text": ["b"], "answer_start": [1]}}
    path = write(tmp_path, "dev.jsonl", json.dumps(record) + "\n{not json\n")
    with pytest.raises(ValueError, match=rf"{path}: line 2: not valid JSON"):
        load_squad_examples(path)


# --------------------------------------------------------------------------------------------------------------------
# Multiple choice (SWAG / RACE)
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record, message",
    [
        (
            {"sent1": "She opens", "sent2": "the", "ending0": "door.", "label": 0},
            r"{path}:2: expected ending0..endingN",
        ),
        ({"article": "a", "question": "q", "options": ["x", "y"], "answer": "E"}, r"{path}:2: answer 'E' is not one"),
        ({"article": "a", "question": "q"}, r"{path}:2: missing fields \['options', 'answer'\]"),
        ({"sent1": LATIN1_BYTES.decode("latin-1")}, r"{path}:2: not valid UTF-8"),
    ],
    ids=["one-ending", "unknown-answer", "missing-fields", "non-utf8"],
)
def test_multiple_choice_errors_name_file_and_line(tmp_path, record, message):
    good = {"sent1": "She opens", "sent2": "the", "ending0": "door.", "ending1": "window.", "label": 0}
    line = json.dumps(record, ensure_ascii=False).encode("utf-8")
    if message.endswith("UTF-8"):
        line = line.replace("café".encode(), LATIN1_BYTES)
    path = write(tmp_path, "train.jsonl", json.dumps(good).encode() + b"\n" + line + b"\n")
    with pytest.raises(ValueError, match=message.format(path=path)):
        read_multiple_choice(str(path))


# --------------------------------------------------------------------------------------------------------------------
# The shared UTF-8 reader
# --------------------------------------------------------------------------------------------------------------------


def test_read_utf8_names_the_line_of_the_bad_byte(tmp_path):
    from albert_hf.data.textfiles import decode_line, read_utf8

    path = write(tmp_path, "data.txt", b"ok\r\nstill ok \xe2\x82\xac\n\n" + LATIN1_BYTES + b"\n")
    with pytest.raises(ValueError, match=rf"{path}:4: not valid UTF-8 \(invalid continuation byte: byte b'\\xe9'\)"):
        read_utf8(path)
    assert read_utf8(write(tmp_path, "bom.tsv", b"\xef\xbb\xbfa\tb\r\n"), encoding="utf-8-sig") == "a\tb\r\n"
    assert decode_line(b"caf\xc3\xa9\n", path, 7) == "café\n"
    with pytest.raises(ValueError, match=rf"{path}:7: not valid UTF-8"):
        decode_line(LATIN1_BYTES, path, 7)
