"""NER and multiple-choice examples from tables (jsonl, parquet, saved datasets): the same examples as the readers of
the original layouts (CoNLL column files, RACE json) give for the same data, and errors that name the row."""

from __future__ import annotations

import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from albert_hf.data.multiple_choice import examples_from_rows, read_multiple_choice
from albert_hf.data.ner import CONLL2003_LABELS, ner_sentences_from_rows, read_conll
from albert_hf.data.sources import load_rows
from albert_hf.errors import DataError, UserError


@pytest.fixture(autouse=True)
def private_datasets_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))


@pytest.fixture(scope="module")
def conll_sentences(shared_data) -> list[dict]:
    """The CoNLL-2003 validation sentences as the CoNLL reader gives them (IOB2 tags as names)."""
    return read_conll(str(shared_data / "conll2003" / "valid.txt"))


def test_ner_tags_as_names_from_parquet_equal_the_conll_reader(conll_sentences, tmp_path):
    path = tmp_path / "valid.parquet"
    table = {"words": [s["tokens"] for s in conll_sentences], "tags": [s["ner_tags"] for s in conll_sentences]}
    pq.write_table(pa.table(table), path)
    rows = load_rows(data_files=[str(path)])
    assert ner_sentences_from_rows(rows, str(path), tokens_column="words", tags_column="tags") == conll_sentences


def test_ner_tag_ids_of_a_class_label_feature_equal_the_conll_reader(conll_sentences, tmp_path):
    # The Hub layout: ids whose names the Sequence(ClassLabel) feature carries.
    features = datasets.Features(
        {
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": datasets.Sequence(datasets.ClassLabel(names=list(CONLL2003_LABELS))),
        }
    )
    ids = [[CONLL2003_LABELS.index(tag) for tag in s["ner_tags"]] for s in conll_sentences]
    saved = tmp_path / "saved"
    rows = {"tokens": [s["tokens"] for s in conll_sentences], "ner_tags": ids}
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(saved))
    assert ner_sentences_from_rows(load_rows(dataset_name=str(saved)), str(saved)) == conll_sentences


def test_ner_tag_ids_with_names_given(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"tokens": ["Tokyo", "rain"], "ner_tags": [1, 0]}) + "\n", encoding="utf-8")
    rows = load_rows(data_files=[str(path)])
    assert ner_sentences_from_rows(rows, "ids.jsonl", label_names=["O", "B-LOC"]) == [
        {"tokens": ["Tokyo", "rain"], "ner_tags": ["B-LOC", "O"]}
    ]
    with pytest.raises(DataError, match=r"ids\.jsonl: row index 0: the tags of 'ner_tags' are ids.*as names"):
        ner_sentences_from_rows(rows, "ids.jsonl")


@pytest.mark.parametrize(
    "record, message",
    [
        ({"tokens": "Tokyo rain", "ner_tags": ["B-LOC", "O"]}, r"column 'tokens' \(--tokens_column\) must be a list"),
        ({"tokens": ["Tokyo", "rain"], "ner_tags": "B-LOC O"}, r"column 'ner_tags' \(--tags_column\) must be a list"),
        ({"tokens": ["Tokyo", "rain"], "ner_tags": ["B-LOC"]}, r"2 tokens but 1 tags"),
        ({"tokens": ["Tokyo", "rain"], "ner_tags": ["LOC", "O"]}, r"'LOC' is not an IOB tag"),
    ],
)
def test_bad_ner_rows_are_named(record, message):
    rows = datasets.Dataset.from_list([record])
    with pytest.raises(ValueError, match=rf"table: row index 0: {message}"):
        ner_sentences_from_rows(rows, "table")


def test_ner_columns_are_checked_by_option():
    rows = datasets.Dataset.from_list([{"tokens": ["fine"], "ner_tags": ["O"]}])
    with pytest.raises(DataError, match=r"no column 'words' \(--tokens_column\); its columns are"):
        ner_sentences_from_rows(rows, "table", tokens_column="words")


RACE_RECORDS = [
    {"article": "Ken went to Kyoto by train.", "question": "Ken went to Kyoto by _.", "options": ["bus", "train"]},
    {"article": "It rained all day.", "question": "What was the weather?", "options": ["sunny", "rainy"]},
]


def test_a_table_with_a_question_and_a_list_of_options_equals_the_race_reader(tmp_path):
    reference = tmp_path / "race.jsonl"
    answers = ["B", 1]
    reference.write_text(
        "".join(json.dumps({**r, "answer": a}) + "\n" for r, a in zip(RACE_RECORDS, answers)), encoding="utf-8"
    )
    table = tmp_path / "race.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "answer": a} for r, a in zip(RACE_RECORDS, ["B", "1"])]), table)
    rows = load_rows(data_files=[str(table)])
    examples = examples_from_rows(
        rows,
        str(table),
        context_column="article",
        choice_columns=["options"],
        question_column="question",
        label_column="answer",
    )
    assert examples == read_multiple_choice(str(reference))


def test_choice_columns_one_per_choice(tmp_path):
    rows = datasets.Dataset.from_list(
        [{"q": "Where do fish live?", "c0": "in trees", "c1": "in water", "c2": "in cars", "answer": 1}]
    )
    examples = examples_from_rows(rows, "table", "q", ["c0", "c1", "c2"], label_column="answer")
    assert examples == [{"context": "Where do fish live?", "choices": ["in trees", "in water", "in cars"], "label": 1}]


@pytest.mark.parametrize(
    "record, message",
    [
        ({"q": "Q?", "c0": "a", "c1": None, "answer": 0}, r"table: row index 1: column 'c1': empty \(None\)"),
        ({"q": "Q?", "c0": "a", "c1": "b", "answer": 2}, r"table: row index 1: answer 2 is not one of the 2 choices"),
    ],
)
def test_bad_multiple_choice_rows_are_named(record, message):
    rows = datasets.Dataset.from_list([{"q": "Q?", "c0": "a", "c1": "b", "answer": 0}, record])
    with pytest.raises(ValueError, match=message):
        examples_from_rows(rows, "table", "q", ["c0", "c1"], label_column="answer")


def test_multiple_choice_columns_are_checked_by_option():
    rows = datasets.Dataset.from_list([{"q": "Q?", "c0": "a", "c1": "b", "answer": 0}])
    with pytest.raises(DataError, match=r"no column 'c2' \(--choice_columns\)"):
        examples_from_rows(rows, "table", "q", ["c0", "c1", "c2"], label_column="answer")
    with pytest.raises(DataError, match=r"no column 'label' \(--label_column\)"):
        examples_from_rows(rows, "table", "q", ["c0", "c1"])
    with pytest.raises(DataError, match=r"table: row index 0: 1 choice; pass --choice_columns"):
        examples_from_rows(rows, "table", "q", ["c0"], label_column="answer")


def test_a_list_column_with_different_numbers_of_choices_is_refused():
    rows = datasets.Dataset.from_list(
        [{"q": "Q1?", "options": ["a", "b"], "answer": 0}, {"q": "Q2?", "options": ["a", "b", "c"], "answer": 2}]
    )
    with pytest.raises(UserError, match=r"table: examples have different numbers of choices \[2, 3\]"):
        examples_from_rows(rows, "table", "q", ["options"], label_column="answer")
