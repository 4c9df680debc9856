"""The five JGLUE tasks, in their published layouts (the made-up fixtures of tests/data/jglue/), read by the package's
readers: MARC-ja, JSTS and JNLI as labelled tables, JSQuAD by the SQuAD reader, JCommonsenseQA as multiple choice.
The expected values are the fixtures' own rows, written out by hand."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from albert_hf.data.labels import CLASSIFICATION, REGRESSION, LabelSpace, encode_labels, infer_label_space
from albert_hf.data.multiple_choice import examples_from_rows
from albert_hf.data.sources import load_rows, require_columns
from albert_hf.data.squad_windows import load_squad_examples

JGLUE = Path(__file__).parent / "data" / "jglue"


@pytest.fixture(autouse=True)
def private_datasets_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))


def labelled_split(task: str, split: str, columns: dict[str, str]) -> datasets.Dataset:
    path = str(next((JGLUE / task).glob(f"{split}-*.json")))
    rows = load_rows(data_files=[path])
    require_columns(rows, columns, path)
    return rows


def test_marc_ja_is_a_two_class_text_classification():
    train = labelled_split("marc_ja-v1.1", "train", {"--text_column": "sentence", "--label_column": "label"})
    valid = labelled_split("marc_ja-v1.1", "valid", {"--text_column": "sentence", "--label_column": "label"})
    space = infer_label_space(train["label"], "label", "marc_ja train")
    assert space == LabelSpace(CLASSIFICATION, ["negative", "positive"])
    assert encode_labels(train["label"], space, "train", "marc_ja") == [1, 0, 1, 0, 1, 0]
    assert encode_labels(valid["label"], space, "validation", "marc_ja") == [1, 0, 1]
    assert valid["sentence"][1] == "二週間で壊れたので、もう買いません。"


def test_jsts_is_a_sentence_pair_regression_on_scores_written_as_strings():
    columns = {"--text_column": "sentence1", "--text_pair_column": "sentence2", "--label_column": "label"}
    train = labelled_split("jsts-v1.3", "train", columns)
    valid = labelled_split("jsts-v1.3", "valid", columns)
    space = infer_label_space(train["label"], "label", "jsts train")
    assert space == LabelSpace(REGRESSION)
    assert encode_labels(train["label"], space, "train", "jsts") == [4.2, 3.6, 1.0, 5.0, 0.4, 1.8]
    assert encode_labels(valid["label"], space, "validation", "jsts") == [3.8, 0.6, 3.2]


def test_jnli_is_a_three_class_sentence_pair_classification():
    columns = {"--text_column": "sentence1", "--text_pair_column": "sentence2", "--label_column": "label"}
    train = labelled_split("jnli-v1.3", "train", columns)
    valid = labelled_split("jnli-v1.3", "valid", columns)
    space = infer_label_space(train["label"], "label", "jnli train")
    assert space == LabelSpace(CLASSIFICATION, ["contradiction", "entailment", "neutral"])
    assert encode_labels(valid["label"], space, "validation", "jnli") == [1, 0, 2]


def test_jsquad_is_read_by_the_squad_reader():
    train = load_squad_examples(JGLUE / "jsquad-v1.3" / "train-v1.3.json")
    valid = load_squad_examples(JGLUE / "jsquad-v1.3" / "valid-v1.3.json")
    assert (len(train), len(valid)) == (4, 2)
    first = valid[0]
    assert first["id"] == "v0p0q0" and first["title"] == "青葉図書館"
    assert first["question"] == "青葉図書館の休館日は何曜日か。"
    assert first["answers"] == {"text": ["月曜日"], "answer_start": [43]}
    assert first["context"][43 : 43 + 3] == "月曜日"
    assert first["context"].startswith("青葉図書館 [SEP] ")  # JSQuAD's context: the title, [SEP], the paragraph


def test_jcommonsenseqa_is_five_way_multiple_choice():
    path = str(JGLUE / "jcommonsenseqa-v1.3" / "valid-v1.3.json")
    rows = load_rows(data_files=[path])
    choices = [f"choice{index}" for index in range(5)]
    examples = examples_from_rows(rows, path, context_column="question", choice_columns=choices)
    assert examples == [
        {"context": "髪を切る店は？", "choices": ["美容院", "八百屋", "本屋", "薬局", "銀行"], "label": 0},
        {
            "context": "寒いときに着るものは？",
            "choices": ["水着", "コート", "サンダル", "浴衣", "半ズボン"],
            "label": 1,
        },
    ]
    train = examples_from_rows(load_rows(data_files=[path.replace("valid", "train")]), path, "question", choices)
    assert [example["label"] for example in train] == [0, 1, 2, 3, 4]
