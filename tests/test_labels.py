"""albert_hf.data.labels: the label space each kind of label column gives (checked against hand-written expectations),
the encoding of every split against the training split's space, and an error naming the row for each bad label."""

from __future__ import annotations

import math

import datasets
import pytest

from albert_hf.data.labels import (
    CLASSIFICATION,
    REGRESSION,
    LabelError,
    LabelSpace,
    encode_labels,
    infer_label_space,
)
from albert_hf.errors import UserError


@pytest.mark.parametrize(
    "values, expected",
    [
        (["pos", "neg", "pos", "neutral"], LabelSpace(CLASSIFICATION, ["neg", "neutral", "pos"])),
        ([10, 2, 1, 2], LabelSpace(CLASSIFICATION, ["1", "2", "10"])),  # numerically, not as strings ("10" < "2")
        ([1.0, 0.0, 1.0], LabelSpace(CLASSIFICATION, ["0", "1"])),  # integral floats are class ids
        ([1, 0.0], LabelSpace(CLASSIFICATION, ["0", "1"])),
        ([True, False, True], LabelSpace(CLASSIFICATION, ["False", "True"])),
        ([3.8, 1.0, 5], LabelSpace(REGRESSION)),  # one non-integral value makes the column scores
    ],
)
def test_the_label_space_of_each_kind_of_column(values, expected):
    assert infer_label_space(values, "label", "train.csv") == expected


def test_a_class_label_feature_keeps_its_names_and_their_order():
    feature = datasets.ClassLabel(names=["positive", "negative"])
    space = infer_label_space([1, 0, 0], "label", "marc_ja", feature=feature)
    assert space == LabelSpace(CLASSIFICATION, ["positive", "negative"])
    assert encode_labels([1, 0], space, "validation", "marc_ja", feature=feature) == [1, 0]
    # A split whose ClassLabel orders the same names differently is encoded by name.
    reordered = datasets.ClassLabel(names=["negative", "positive"])
    assert encode_labels([1, 0], space, "validation", "other", feature=reordered) == [0, 1]
    with pytest.raises(LabelError, match=r"other \(test\): row index 0, column 'label': 2 is not a class id"):
        encode_labels([2], space, "test", "other", feature=reordered)


def test_config_fields_of_a_classification_and_a_regression():
    assert LabelSpace(CLASSIFICATION, ["neg", "pos"]).config_kwargs() == {
        "num_labels": 2,
        "id2label": {0: "neg", 1: "pos"},
        "label2id": {"neg": 0, "pos": 1},
        "problem_type": "single_label_classification",
    }
    assert LabelSpace(REGRESSION).config_kwargs() == {
        "num_labels": 1,
        "id2label": {0: "score"},
        "label2id": {"score": 0},
        "problem_type": "regression",
    }


def test_encoding_gives_ids_of_the_training_names():
    space = infer_label_space(["pos", "neg"], "label", "train.csv")
    assert encode_labels(["neg", "pos", "pos"], space, "validation", "dev.csv") == [0, 1, 1]
    ids = infer_label_space([2, 0, 1], "label", "train.csv")
    assert encode_labels([0, 2.0, 1], ids, "validation", "dev.csv") == [0, 2, 1]


def test_regression_labels_are_floats():
    space = infer_label_space([0.5, 4.2], "score", "jsts")
    assert encode_labels([3, 1.25], space, "validation", "jsts", column="score") == [3.0, 1.25]


def test_a_label_the_training_split_lacks_is_named_with_its_split_and_row():
    space = infer_label_space(["pos", "neg"], "label", "train.csv")
    message = r"dev\.csv \(validation\): row index 2, column 'label': label 'neutral' is not one of the training split's labels \['neg', 'pos'\]"
    with pytest.raises(LabelError, match=message):
        encode_labels(["pos", "neg", "neutral"], space, "validation", "dev.csv")
    assert issubclass(LabelError, UserError)


def test_a_score_in_a_classification_is_an_error():
    space = infer_label_space([0, 1], "label", "train.csv")
    with pytest.raises(LabelError, match=r"row index 0, column 'label': 0.5 is a score"):
        encode_labels([0.5], space, "validation", "dev.csv")


@pytest.mark.parametrize(
    "values, message",
    [
        (["pos", 1, "neg"], r"mixes kinds of labels: int \(first at row index 1\), str \(first at row index 0\)"),
        ([True, 0], r"mixes kinds of labels: bool \(first at row index 0\), int \(first at row index 1\)"),
        (["pos", None], r"row index 1, column 'label': the label is missing \(None\)"),
        ([1.5, math.nan], r"row index 1, column 'label': the label is missing \(NaN\)"),
        ([1.5, math.inf], r"row index 1, column 'label': the label inf is not finite"),
        ([[1, 2]], r"row index 0, column 'label': a label must be a string or a number, got a list"),
        ([], r"column 'label' has no labels"),
    ],
)
def test_bad_training_labels_are_named(values, message):
    with pytest.raises(LabelError, match=rf"train\.csv.*{message}"):
        infer_label_space(values, "label", "train.csv")


@pytest.mark.parametrize("value, message", [(math.nan, "missing"), (-math.inf, "not finite"), ("high", "a number")])
def test_bad_regression_labels_are_named(value, message):
    space = LabelSpace(REGRESSION)
    with pytest.raises(LabelError, match=rf"jsts \(test\): row index 1, column 'label': .*{message}"):
        encode_labels([1.0, value], space, "test", "jsts")


def test_scores_written_as_strings_are_a_regression():
    # JSTS's json files write every score as a string.
    space = infer_label_space(["0.0", "2.4", "5.0"], "label", "jsts")
    assert space == LabelSpace(REGRESSION)
    assert encode_labels(["3.8", "1.0", 2], space, "validation", "jsts") == [3.8, 1.0, 2.0]
    with pytest.raises(
        LabelError, match=r"row index 1, column 'label': a regression label must be a number, got 'high'"
    ):
        encode_labels(["3.8", "high"], space, "validation", "jsts")


def test_names_that_are_integers_sort_numerically_and_keep_their_spelling():
    assert infer_label_space(["10", "2", "1"], "stars", "reviews") == LabelSpace(CLASSIFICATION, ["1", "2", "10"])
    assert infer_label_space(["2.4", "high"], "label", "t") == LabelSpace(CLASSIFICATION, ["2.4", "high"])


def test_the_kind_can_be_chosen_where_the_values_allow_it():
    assert infer_label_space([1, 5, 3], "stars", "reviews", kind=REGRESSION) == LabelSpace(REGRESSION)
    assert infer_label_space([1, 5, 3], "stars", "reviews", kind=CLASSIFICATION) == LabelSpace(
        CLASSIFICATION, ["1", "3", "5"]
    )
    with pytest.raises(
        LabelError, match=r"reviews: column 'stars' holds scores with fractions, which cannot be classes"
    ):
        infer_label_space([1.5, 5], "stars", "reviews", kind=CLASSIFICATION)
    with pytest.raises(LabelError, match=r"reviews: column 'stars' holds labels that are not numbers"):
        infer_label_space(["pos", "neg"], "stars", "reviews", kind=REGRESSION)
