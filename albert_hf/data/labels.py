"""The labels of any labelled table: what kind they are, their names, and their encoding as model targets.

A table's label column holds names ("positive"), class ids (0, 1, 2), booleans, or scores (3.8). The training split
decides which, once, and every other split is encoded against it:

    space = infer_label_space(train["label"], "label", "train.csv")      # LabelSpace("classification", ["neg", "pos"])
    train_ids = encode_labels(train["label"], space, "train", "train.csv")
    dev_ids = encode_labels(dev["label"], space, "validation", "dev.csv")  # a label train never had: an error
    config = AlbertConfig(**space.config_kwargs(), ...)

Rules, in order: a `datasets.ClassLabel` feature gives its names (in its order, which is the dataset's meaning of the
ids); numbers with a fraction give a regression, also when written as strings ("2.4": JSTS's json writes its scores
so); other strings, integers, and floats that are all integral (a csv column of 0/1 with a blank is read as floats)
give a classification with sorted names (numbers numerically, named as written: 1.0 -> "1"); booleans give ["False",
"True"]. Strings mixed with numbers, a missing value (None, NaN), or a non-finite score is an error naming the column,
split and row; `kind=` overrides the inference where the values allow it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import datasets

from ..errors import UserError
from .text_checks import RowPlaces

# What a label column holds: the `kind` of a `LabelSpace`, and of `infer_label_space`'s override.
CLASSIFICATION = "classification"
REGRESSION = "regression"


class LabelError(UserError):
    """A label column that cannot be used as targets: mixed kinds, a missing value, a label the training split lacks."""


@dataclass(frozen=True)
class LabelSpace:
    """The targets of a task: a classification over `names` (label id = index), or a regression (`names` None)."""

    kind: str
    names: tuple[str, ...] | None = None

    def __post_init__(self):
        if self.kind not in (CLASSIFICATION, REGRESSION):
            raise ValueError(f"kind must be {CLASSIFICATION!r} or {REGRESSION!r}, got {self.kind!r}")
        if (self.kind == CLASSIFICATION) != (self.names is not None):
            raise ValueError("a classification has names and a regression has none")
        if self.names is not None:
            object.__setattr__(self, "names", tuple(self.names))

    @property
    def num_labels(self) -> int:
        """The model's output size: one per class, one score for a regression."""
        return len(self.names) if self.names is not None else 1

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.names)) if self.names is not None else {0: "score"}

    @property
    def label2id(self) -> dict[str, int]:
        return {name: index for index, name in self.id2label.items()}

    def config_kwargs(self) -> dict:
        """What a `PretrainedConfig` needs to know of the labels (its head size and how the loss is chosen)."""
        problem_type = "regression" if self.kind == REGRESSION else "single_label_classification"
        return {
            "num_labels": self.num_labels,
            "id2label": self.id2label,
            "label2id": self.label2id,
            "problem_type": problem_type,
        }


def _where(source: str, split: str | None, column: str, row: int, places: RowPlaces | None = None) -> str:
    """Where a label is: its file and line (`places`), else the row's index in the split; and the column."""
    if places is not None:
        return f"{places.where(row)}: column {column!r}"
    split_part = f" ({split})" if split else ""
    return f"{source}{split_part}: row index {row}, column {column!r}"


def _value_kind(value, where: str) -> str:
    """ "str", "bool", "int" or "float" (the kind that decides the label space); a missing value is an error."""
    if isinstance(value, str):
        return "str"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        if math.isnan(value):
            raise LabelError(f"{where}: the label is missing (NaN). Every row needs a label: fix or drop the row.")
        if math.isinf(value):
            raise LabelError(f"{where}: the label {value} is not finite. Fix or drop the row.")
        return "float"
    if value is None:
        raise LabelError(f"{where}: the label is missing (None). Every row needs a label: fix or drop the row.")
    raise LabelError(f"{where}: a label must be a string or a number, got a {type(value).__name__} ({value!r}).")


def _name(value) -> str:
    """The class name of a label value: strings as they are, numbers as their integer (1.0 -> "1"), bools as str."""
    if isinstance(value, (str, bool)):
        return str(value)
    return str(int(value))


def _number(value) -> float | None:
    """A label as a number: ints and floats, and strings that spell a finite number ("2.4", as JSTS writes its scores);
    None for any other label."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def infer_label_space(
    values: Iterable,
    column: str,
    source: str,
    feature: datasets.features.FeatureType | None = None,
    kind: str | None = None,
    places: RowPlaces | None = None,
) -> LabelSpace:
    """The label space of the training split's `values` of `column` (see the module's rules); `feature` is the column's
    `datasets` feature when there is one (`rows.features[column]`), so a ClassLabel keeps its names and their order.

    `kind` overrides the inference where the values allow it: REGRESSION for integer scores (a 1-5 rating learned as
    a score), CLASSIFICATION for names that happen to be numbers. Scores with fractions cannot be classes.
    """
    if isinstance(feature, datasets.ClassLabel):
        return LabelSpace(CLASSIFICATION, feature.names)
    names = _distinct_labels(values, column, source, places)
    as_numbers = {name: _number(name) for name in names}
    numeric = all(number is not None for number in as_numbers.values())
    has_fractions = numeric and any(not number.is_integer() for number in as_numbers.values())
    if kind == REGRESSION or (kind is None and has_fractions):
        if not numeric:
            raise LabelError(
                f"{source}: column {column!r} holds labels that are not numbers; a regression needs scores."
            )
        return LabelSpace(REGRESSION)
    if has_fractions:
        raise LabelError(f"{source}: column {column!r} holds scores with fractions, which cannot be classes.")
    order = (lambda name: as_numbers[name]) if numeric else None  # 1 < 2 < 10, not "10" < "2"
    return LabelSpace(CLASSIFICATION, [_name(name) for name in sorted(names, key=order)])


def _distinct_labels(values: Iterable, column: str, source: str, places: RowPlaces | None = None) -> set:
    """The distinct labels of the training split, once checked to be of one kind (names, numbers or booleans)."""
    first_row_of_kind: dict[str, int] = {}
    names: set = set()
    for row, value in enumerate(values):
        first_row_of_kind.setdefault(_value_kind(value, _where(source, "train", column, row, places)), row)
        names.add(value)
    if not first_row_of_kind:
        raise LabelError(f"{source}: column {column!r} has no labels.")
    kinds = set(first_row_of_kind)
    if len(kinds) > 1 and not kinds <= {"int", "float"}:
        at = places.where if places is not None else (lambda row: f"row index {row}")
        found = ", ".join(f"{kind} (first at {at(row)})" for kind, row in sorted(first_row_of_kind.items()))
        raise LabelError(
            f"{source}: column {column!r} mixes kinds of labels: {found}. Labels must be all names or all numbers."
        )
    return names


def encode_labels(
    values: Iterable,
    space: LabelSpace,
    split: str,
    source: str,
    column: str = "label",
    feature: datasets.features.FeatureType | None = None,
    places: RowPlaces | None = None,
) -> list[int] | list[float]:
    """`values` as targets of `space`: class ids, or floats for a regression.

    `feature` is the split's own feature of the column: a ClassLabel's ids are read as its names, so a split whose
    ClassLabel orders them differently is still encoded by name. A class the training split did not have, a missing
    value or a non-finite score is an error naming the label, split and row.
    """
    if space.kind == REGRESSION:
        return [_score(value, _where(source, split, column, row, places)) for row, value in enumerate(values)]
    label2id = space.label2id
    encoded = []
    for row, value in enumerate(values):
        where = _where(source, split, column, row, places)
        name = _class_name(value, feature, where)
        if name not in label2id:
            raise LabelError(
                f"{where}: label {name!r} is not one of the training split's labels {list(space.names)}. A model "
                "cannot learn a class it never sees: fix the label, or add examples of it to the training data."
            )
        encoded.append(label2id[name])
    return encoded


def _score(value, where: str) -> float:
    _value_kind(value, where)  # a missing or non-finite value: its own message
    number = _number(value)
    if number is None:
        raise LabelError(f"{where}: a regression label must be a number, got {value!r}.")
    return number


def _class_name(value, feature, where: str) -> str:
    kind = _value_kind(value, where)
    if isinstance(feature, datasets.ClassLabel):
        if kind != "int" or not 0 <= value < feature.num_classes:
            raise LabelError(f"{where}: {value!r} is not a class id of {list(feature.names)}.")
        return feature.names[value]
    if kind == "float" and not float(value).is_integer():
        raise LabelError(f"{where}: {value!r} is a score, but the training split's labels are classes.")
    return _name(value)


__all__ = [
    "CLASSIFICATION",
    "REGRESSION",
    "LabelError",
    "LabelSpace",
    "encode_labels",
    "infer_label_space",
]
