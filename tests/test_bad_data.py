"""Bad data: every malformed input gets an error naming the file and line, or a documented skip that is counted.

Inputs tried, per reader: empty files, blank-only files, non-UTF-8 bytes, missing columns or fields, unknown labels,
answers that do not occur in their context, empty and one-sentence documents, sentences longer than max_seq_length.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from helpers.command_line import assert_one_line_error, run_cli
from helpers.data import SPIECE_MODEL
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.data.glue_files import get_glue_task, load_glue_files, read_glue_tsv
from albert_hf.data.multiple_choice import read_multiple_choice
from albert_hf.data.ner import check_tags_seen_in_training, load_ner_file
from albert_hf.data.sentence_order import load_text_documents
from albert_hf.data.squad_windows import load_squad_examples
from albert_hf.errors import DataError, UserError

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
    from albert_hf.pretraining.corpus import prepare_datasets

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


STSB_HEADER = "sentence1\tsentence2\tscore\n"


@pytest.mark.parametrize(
    "score, message",
    [
        ("nan", "label 'nan' is not a finite number"),
        ("inf", "label 'inf' is not a finite number"),
        ("-42", "label '-42' is outside the stsb score range 0 to 5"),
        ("5.01", "label '5.01' is outside the stsb score range 0 to 5"),
    ],
)
def test_stsb_scores_must_be_finite_and_on_the_0_to_5_scale(tmp_path, score, message):
    path = write(tmp_path, "train.tsv", STSB_HEADER + "a\tb\t0\nc\td\t5\ne\tf\t" + score + "\n")
    with pytest.raises(DataError, match=rf"^{path}:4: {message}$"):
        read_glue_tsv(str(path), get_glue_task("stsb"), labelled=True)


def test_stsb_scale_ends_are_scores(tmp_path):
    path = write(tmp_path, "train.tsv", STSB_HEADER + "a\tb\t0\nc\td\t5.000\ne\tf\t2.4\n")
    rows = read_glue_tsv(str(path), get_glue_task("stsb"), labelled=True)
    assert [row["label"] for row in rows] == [0.0, 5.0, 2.4]


def test_stsb_csv_and_json_scores_are_checked_naming_file_and_row(tmp_path):
    path = write(tmp_path, "train.csv", "sentence1,sentence2,label\na,b,2.5\nc,d,nan\n")
    with pytest.raises(DataError, match=rf"^{path}:3: column 'label': the label is missing"):
        load_glue_files(get_glue_task("stsb"), {"train": str(path)})
    rows = [{"sentence1": "a", "sentence2": "b", "label": 2.5}, {"sentence1": "c", "sentence2": "d", "label": -42}]
    path = write(tmp_path, "train.jsonl", "\n".join(json.dumps(row) for row in rows) + "\n")
    with pytest.raises(
        DataError, match=rf"^{path}:2: column 'label': label -42.0 is outside the stsb score range 0 to 5$"
    ):
        load_glue_files(get_glue_task("stsb"), {"train": str(path)})


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


@pytest.mark.parametrize(
    "row, message",
    [
        (
            "rejects VBZ B-VP",
            r"{path}:2: 3 columns, but the rows of this file have 4 \(line 1\): .*A column is missing",
        ),
        (
            "New\tYork NNP I-NP B-LOC",
            r"{path}:2: 5 columns, but the rows of this file have 4 \(line 1\): .*holds a tab",
        ),
        ("New York NNP I-NP B-LOC", r"{path}:2: 5 columns, but the rows of this file have 4 .*holds a space or a tab"),
    ],
    ids=["missing-ner-column", "tab-in-token", "space-in-token"],
)
def test_conll_rows_must_have_the_files_column_count(tmp_path, row, message):
    # Without the check, the first row's chunk tag B-VP became the NER label and "York" vanished.
    path = write(tmp_path, "train.txt", f"EU NNP B-NP B-ORG\n{row}\n\nPeter NNP B-NP B-PER\n")
    with pytest.raises(DataError, match=message.format(path=path)):
        load_ner_file(str(path))


def test_tab_separated_conll_files_read_as_before(tmp_path):
    path = write(tmp_path, "train.txt", "EU\tNNP\tB-NP\tB-ORG\nrejects\tVBZ\tB-VP\tO\n")
    assert load_ner_file(str(path))[0] == {"tokens": ["EU", "rejects"], "ner_tags": ["B-ORG", "O"]}


def test_a_tag_only_the_dev_file_has_is_refused_naming_tag_file_and_line(tmp_path):
    train = write(tmp_path, "train.txt", "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n")
    dev = write(tmp_path, "valid.txt", "Peter NNP B-NP B-PER\n\nthe DT B-NP O\nOlympics NNPS I-NP I-EVENT\n")
    splits = {"train": load_ner_file(str(train)), "validation": load_ner_file(str(dev))}
    files = {"train": str(train), "validation": str(dev)}
    # I-EVENT opens an entity, so IOB2 reads it as B-EVENT; the line is the one of the file.
    with pytest.raises(DataError, match=rf"^{dev}:4: tag 'B-EVENT' of the validation data never occurs in the "):
        check_tags_seen_in_training(splits, files)
    with pytest.raises(DataError, match=r"^the validation data, sentence 2: tag 'B-EVENT'"):
        check_tags_seen_in_training(splits)
    check_tags_seen_in_training({"validation": splits["validation"]})  # nothing to compare with: evaluation only
    check_tags_seen_in_training({"train": splits["train"], "test": splits["train"]})


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


@pytest.mark.parametrize("text", ["", "   "], ids=["empty", "blank"])
def test_squad_answer_with_empty_text_is_refused_naming_the_question(tmp_path, text):
    path = write(tmp_path, "train.json", squad_file(answer=text, start=3))
    with pytest.raises(DataError, match=rf"{path}: data\[0\].paragraphs\[0\].qas\[0\]: question 'q1': an answer has "):
        load_squad_examples(path)


def test_squad_json_lines_errors_name_the_line(tmp_path):
    record = {"id": "q1", "context": "abc", "question": "?", "answers": {"text": ["b"], "answer_start": [1]}}
    path = write(tmp_path, "dev.jsonl", json.dumps(record) + "\n{not json\n")
    with pytest.raises(ValueError, match=rf"{path}:2: not valid JSON"):
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
    from albert_hf.data.textfiles import read_utf8

    path = write(tmp_path, "data.txt", b"ok\r\nstill ok \xe2\x82\xac\n\n" + LATIN1_BYTES + b"\n")
    with pytest.raises(ValueError, match=rf"{path}:4: not valid UTF-8 \(invalid continuation byte: byte b'\\xe9'\)"):
        read_utf8(path)
    assert read_utf8(write(tmp_path, "bom.tsv", b"\xef\xbb\xbfa\tb\r\n"), encoding="utf-8-sig") == "a\tb\r\n"


# --------------------------------------------------------------------------------------------------------------------
# A tokenizer and a model's vocabulary: one rule for pretraining's checks and for saving to the Hub
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pieces, vocab_size, fits",
    [
        (30000, 30000, True),
        (30000, 30080, True),  # padded to a multiple of 128 (235 x 128)
        (30000, 30081, False),  # more rows than padding explains: another vocabulary
        (400, 30000, False),
        (30001, 30000, False),  # id 30000 has no row
        (1, 128, True),
    ],
)
def test_tokenizer_and_vocabulary_rule(pieces, vocab_size, fits):
    from albert_hf.tokenizer_fit import vocabulary_problem

    assert (vocabulary_problem(pieces, vocab_size) is None) == fits


def test_hub_and_pretraining_checks_ask_the_same_rule(tokenizer):
    from helpers.tiny import tiny_config

    from albert_hf.hub import check_tokenizer_fits
    from albert_hf.modeling import AlbertForMaskedLM
    from albert_hf.tokenizer_fit import PretrainingSetupError, check_tokenizer_matches_config

    assert len(tokenizer) == 30000
    padded, larger = tiny_config(vocab_size=30080), tiny_config(vocab_size=29999)
    check_tokenizer_fits(AlbertForMaskedLM(padded), tokenizer)
    check_tokenizer_matches_config(tokenizer, padded)
    with pytest.raises(UserError, match="has 30000 pieces but the model has vocab_size 29999: ids 29999"):
        check_tokenizer_fits(AlbertForMaskedLM(larger), tokenizer)
    with pytest.raises(PretrainingSetupError, match="has 30000 pieces but the model config has vocab_size 29999: ids"):
        check_tokenizer_matches_config(tokenizer, larger)


# --------------------------------------------------------------------------------------------------------------------
# Through the command line: exit status 2, one message, no traceback
# --------------------------------------------------------------------------------------------------------------------


def job_options(output_dir: Path) -> list[str]:
    return [
        "--tokenizer_name_or_path",
        str(SPIECE_MODEL),
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--do_train",
        "--max_steps",
        "1",
        "--report_to",
        "none",
        "--output_dir",
        str(output_dir),
    ]


@pytest.mark.parametrize(
    "row, message",
    [("rejects VBZ B-VP", "2: 3 columns, but the rows of this file have 4"), ("Ger\tman JJ B-NP O", "2: 5 columns")],
    ids=["missing-ner-column", "tab-in-token"],
)
def test_cli_refuses_a_conll_row_with_another_column_count(tmp_path, row, message):
    train = write(tmp_path, "train.txt", f"EU NNP B-NP B-ORG\n{row}\n")
    result = run_cli(["ner", "--train_file", str(train), *job_options(tmp_path / "out")])
    assert_one_line_error(result, "ner", f"{train}:{message}")


def test_cli_refuses_a_dev_tag_never_trained_on(tmp_path):
    train = write(tmp_path, "train.txt", "EU NNP B-NP B-ORG\n\nPeter NNP B-NP B-PER\n")
    dev = write(tmp_path, "valid.txt", "Peter NNP B-NP B-PER\nParis NNP I-NP B-LOC\n")
    argv = ["ner", "--train_file", str(train), "--validation_file", str(dev), "--do_eval", *job_options(tmp_path)]
    assert_one_line_error(run_cli(argv), "ner", f"{dev}:2: tag 'B-LOC' of the validation data never occurs")


@pytest.mark.parametrize(
    "score, message", [("nan", "label 'nan' is not a finite number"), ("-42", "label '-42' is outside the stsb")]
)
def test_cli_refuses_an_stsb_score_off_the_scale(tmp_path, score, message):
    train = write(tmp_path, "train.tsv", STSB_HEADER + f"a\tb\t2.5\nc\td\t{score}\n")
    result = run_cli(["glue", "--task_name", "stsb", "--train_file", str(train), *job_options(tmp_path / "out")])
    assert_one_line_error(result, "glue", f"{train}:3: {message}")


def test_cli_refuses_an_empty_squad_answer(tmp_path):
    train = write(tmp_path, "train.json", squad_file(answer="", start=0))
    result = run_cli(["squad", "--train_file", str(train), *job_options(tmp_path / "out")])
    assert_one_line_error(result, "squad", f"{train}: data[0].paragraphs[0].qas[0]: question 'q1': an answer has empty")
