"""Multiple-choice data (SWAG and RACE layouts) for `AlbertForMultipleChoice`.

Both layouts become a `datasets.Dataset` with one row per question:

    context: str        first segment, shared by every choice (SWAG: sent1; RACE: the article)
    choices: list[str]  second segment of each choice (SWAG: sent2 + ending_i; RACE: the question with option i)
    label:   int        index of the right choice

and each choice is encoded as the pair `[CLS] context [SEP] choice [SEP]`; the model scores the N pairs and a softmax
over them picks the answer.

Accepted records (json lines, or one json list / RACE article object per file):
    SWAG:           {"sent1", "sent2", "ending0", ..., "endingK", "label"}
    RACE, flat:     {"article", "question", "options": [...], "answer": "A" | 0}     (the Hub's ehovy/race layout)
    RACE, original: {"article", "questions": [...], "options": [[...], ...], "answers": [...]}   (one file per article)

Any table (csv, json lines, parquet, a Hub dataset: JCommonsenseQA's `question, choice0..choice4, label`) is read by
`examples_from_rows`, naming its context, choice and label columns.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterator, Sequence

from datasets import Dataset

from ..errors import DataError, MissingFileError
from .caching import map_fingerprint
from .sources import require_columns
from .text_checks import RowPlaces, check_text
from .text_pairs import find_truncated
from .textfiles import read_utf8

_ENDING_KEY = re.compile(r"^ending(\d+)$")


def swag_example(record: dict, where: str) -> dict:
    """SWAG: context sent1; each choice is sent2 (the start of the next sentence) followed by one ending."""
    endings = sorted((int(m.group(1)), value) for key, value in record.items() if (m := _ENDING_KEY.match(key)))
    if [index for index, _ in endings] != list(range(len(endings))) or len(endings) < 2:
        raise DataError(f"{where}: expected ending0..endingN (N >= 1), got {sorted(record)}.")
    _require(record, ("sent1", "sent2", "label"), where)
    context = check_text(record["sent1"], where, "field 'sent1'")
    start = check_text(record["sent2"], where, "field 'sent2'", required=False)  # a choice may start afresh
    endings = [(index, check_text(ending, where, f"field 'ending{index}'")) for index, ending in endings]
    return {
        "context": context,
        "choices": [f"{start} {ending}" for _, ending in endings],
        "label": _choice_index(record["label"], len(endings), where),
    }


def race_choice(question: str, option: str) -> str:
    """RACE's question with an option: cloze questions ("... _ ...") get the option in the blank, as in ALBERT's
    RACE code; other questions are followed by the option."""
    if "_" in question:
        return question.replace("_", option)
    return f"{question} {option}"


def race_example(article: str, question: str, options: list[str], answer: str | int, where: str) -> dict:
    if not isinstance(options, list) or len(options) < 2:
        raise DataError(f"{where}: 'options' must be a list of at least two answers, got {options!r}.")
    article = check_text(article, where, "field 'article'")
    question = check_text(question, where, "field 'question'")
    options = [check_text(option, where, f"option {number}") for number, option in enumerate(options)]
    return {
        "context": article,
        "choices": [race_choice(question, option) for option in options],
        "label": _choice_index(answer, len(options), where),
    }


def _choice_index(answer: str | int, num_choices: int, where: str) -> int:
    """The answer as an index: an int, a digit string, or a letter A, B, C, ..."""
    if isinstance(answer, str) and len(answer) == 1 and answer.isalpha():
        index = ord(answer.upper()) - ord("A")
    else:
        try:
            index = int(answer)
        except (TypeError, ValueError):
            raise DataError(f"{where}: answer {answer!r} is neither a choice index nor a letter.") from None
    if not 0 <= index < num_choices:
        raise DataError(f"{where}: answer {answer!r} is not one of the {num_choices} choices.")
    return index


def _require(record: dict, keys: tuple[str, ...], where: str) -> None:
    missing = [key for key in keys if key not in record]
    if missing:
        raise DataError(f"{where}: missing fields {missing} (has {sorted(record)}).")


def examples_from_record(record: dict, where: str) -> Iterator[dict]:
    """One SWAG or RACE record -> its examples (an original RACE article holds several questions)."""
    if "sent1" in record:
        yield swag_example(record, where)
    elif "questions" in record:
        _require(record, ("article", "questions", "options", "answers"), where)
        if not len(record["questions"]) == len(record["options"]) == len(record["answers"]):
            raise DataError(f"{where}: 'questions', 'options' and 'answers' differ in length.")
        for number, fields in enumerate(zip(record["questions"], record["options"], record["answers"])):
            yield race_example(record["article"], *fields, where=f"{where} question {number}")
    elif "article" in record:
        _require(record, ("question", "options", "answer"), where)
        yield race_example(record["article"], record["question"], record["options"], record["answer"], where)
    else:
        raise DataError(f"{where}: neither SWAG (sent1, sent2, ending*) nor RACE (article, question(s), options).")


def _records(path: str) -> Iterator[tuple[dict, str]]:
    """Each json object of a file with where it comes from: a list, a single object, or json lines."""
    text = read_utf8(path)  # bad bytes: the error names file and line
    stripped = text.lstrip()
    if stripped.startswith("["):
        for number, record in enumerate(json.loads(text)):
            yield record, f"{path} item {number}"
        return
    try:
        yield json.loads(text), path  # a single object: one RACE article file
        return
    except json.JSONDecodeError:
        pass
    for line_number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield json.loads(line), f"{path}:{line_number}"
            except json.JSONDecodeError as error:
                raise DataError(f"{path}:{line_number}: not a json object ({error.msg}).") from None


def read_multiple_choice(path: str) -> list[dict]:
    """Every example of a SWAG/RACE json file; a folder is read file by file (RACE ships one file per article)."""
    paths = [os.path.join(path, name) for name in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
    examples = [
        example for file in paths for record, where in _records(file) for example in examples_from_record(record, where)
    ]
    return check_examples(examples, path)


def check_examples(examples: list[dict], source: str) -> list[dict]:
    """`examples`, once checked to be some and to have one number of choices (a batch is [examples, choices, tokens])."""
    if not examples:
        raise DataError(f"{source}: no multiple-choice examples found.")
    counts = {len(example["choices"]) for example in examples}
    if len(counts) > 1:
        raise DataError(f"{source}: examples have different numbers of choices {sorted(counts)}; batches need one.")
    return examples


def examples_from_rows(
    rows: Dataset,
    source: str,
    context_column: str,
    choice_columns: Sequence[str],
    label_column: str = "label",
    question_column: str | None = None,
    places: RowPlaces | None = None,
) -> list[dict]:
    """Examples of a table (csv, json, jsonl, parquet, a Hub dataset), as [`read_multiple_choice`] gives them.

    `context_column` is the first segment of every pair. `choice_columns` are the columns of the choices, one each
    (`choice0` ... `choice4`, as JCommonsenseQA), or a single column holding the list of choices. With
    `question_column` (RACE-like tables: an article, then a question about it) each choice is the question with the
    option, as [`race_choice`] writes it. The label is the right choice's index, digit or letter (A, B, ...).
    Every text is checked by the reader contract (`albert_hf.data.text_checks`); errors name the row by its file and
    line (`places`), else its index.
    """
    columns = {"--context_column": context_column, "--label_column": label_column}
    if question_column is not None:
        columns["--question_column"] = question_column
    require_columns(rows, columns, source)
    if not choice_columns:
        raise DataError(f"{source}: no choice columns given; pass --choice_columns.")
    for column in choice_columns:
        require_columns(rows, {"--choice_columns": column}, source)
    places = places or RowPlaces(None, source)
    examples = []
    for row, record in enumerate(rows):
        where = places.where(row)
        options = _options(record, choice_columns, where)
        if question_column is not None:
            question = _text(record, question_column, where)
            options = [race_choice(question, option) for option in options]
        examples.append(
            {
                "context": _text(record, context_column, where),
                "choices": options,
                "label": _choice_index(record[label_column], len(options), where),
            }
        )
    return check_examples(examples, source)


def _options(record: dict, choice_columns: Sequence[str], where: str) -> list[str]:
    """The choices of one row: one per column, or the list in the only choice column."""
    if len(choice_columns) == 1 and isinstance(record[choice_columns[0]], list):
        options = record[choice_columns[0]]
        for number, option in enumerate(options):
            check_text(option, where, f"column {choice_columns[0]!r}, choice {number}")
    else:
        options = [_text(record, column, where) for column in choice_columns]
    if len(options) < 2:
        raise DataError(
            f"{where}: {len(options)} choice; pass --choice_columns with a column per choice or a list column."
        )
    return options


def _text(record: dict, column: str, where: str) -> str:
    return check_text(record[column], where, f"column {column!r}")


def load_multiple_choice(path: str) -> Dataset:
    """A SWAG or RACE json file, or a folder of RACE's per-article files, as a Dataset of examples
    ([`read_multiple_choice`]); a missing path is a `MissingFileError`."""
    if not os.path.exists(path):
        raise MissingFileError(f"Multiple-choice data {path} does not exist.")
    return Dataset.from_list(read_multiple_choice(path))


def from_hub_layout(dataset: Dataset, source: str) -> Dataset:
    """A Hub SWAG or RACE split (same fields as the files) -> our columns."""
    examples = [
        example
        for i, record in enumerate(dataset)
        for example in examples_from_record(record, f"{source}: row index {i}")
    ]
    return Dataset.from_list(examples)


def tokenize_multiple_choice(
    dataset: Dataset, tokenizer, max_seq_length: int, pad_to_max_length: bool = False
) -> tuple[Dataset, int]:
    """Encode each choice as `[CLS] context [SEP] choice [SEP]`: input_ids etc. become [num_choices][seq_len] lists.

    Long pairs are cut from the longer segment first (in RACE, the article). Returns the dataset and how many
    questions had at least one choice truncated.
    """

    def encode(batch: dict[str, list]) -> dict[str, list]:
        num_choices = [len(choices) for choices in batch["choices"]]
        contexts = [context for context, n in zip(batch["context"], num_choices) for _ in range(n)]
        choices = [choice for row in batch["choices"] for choice in row]
        encoded = tokenizer(
            contexts,
            choices,
            truncation=True,
            max_length=max_seq_length,
            padding="max_length" if pad_to_max_length else False,
            return_token_type_ids=True,
        )
        pair_truncated = find_truncated(tokenizer, [contexts, choices], encoded["attention_mask"], max_seq_length)
        # Regroup the flat list of pairs into one list of choices per question.
        starts = list(itertools.accumulate([0] + num_choices[:-1]))
        grouped = {key: [values[s : s + n] for s, n in zip(starts, num_choices)] for key, values in encoded.items()}
        grouped["truncated"] = [any(pair_truncated[s : s + n]) for s, n in zip(starts, num_choices)]
        return grouped

    fingerprint = map_fingerprint(dataset, encode, tokenizer, max_seq_length=max_seq_length, pad=pad_to_max_length)
    encoded = dataset.map(encode, batched=True, remove_columns=["context", "choices"], new_fingerprint=fingerprint)
    num_truncated = sum(encoded["truncated"]) if len(encoded) else 0
    return encoded.remove_columns("truncated"), num_truncated
