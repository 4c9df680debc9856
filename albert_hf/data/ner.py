"""CoNLL-2003 NER data: reading the original column files or the Hub layout, and word <-> sub-token label alignment.

Every source becomes a `datasets.Dataset` of sentences with two columns:

    tokens:   list[str]  the words of the sentence
    ner_tags: list[str]  one IOB2 tag per word ("O", "B-PER", "I-PER", ...)

IOB1 input (where I-X may open an entity) is converted to IOB2 on reading; the two describe the same entities, and
converting IOB2 leaves it unchanged, so every file goes through the same conversion.

ALBERT's SentencePiece splits a word into one or more sub-tokens. The word's label goes on its first sub-token and
the others get -100 (ignored by the loss and the metric), or with `label_all_tokens` the others get the word's label
too (with B-X turned into I-X). Predictions are read back from each word's first sub-token.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections.abc import Sequence

from datasets import Dataset

from ..errors import DataError, MissingFileError
from .caching import map_fingerprint
from .sources import require_columns
from .textfiles import read_utf8

logger = logging.getLogger(__name__)

# The Hub's class order for conll2003 ner_tags, so integer tags from the Hub keep their meaning.
CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
IGNORE_INDEX = -100  # label of sub-tokens that neither the loss nor the metric sees
_TAG_PATTERN = re.compile(r"^(O|[BI]-\S+)$")
_DOCSTART = "-DOCSTART-"


# ----------------------------------------------------------------------------------------------------------------------
# reading


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 -> IOB2: an I-X that does not continue an X entity opens one, so it becomes B-X. IOB2 is unchanged."""
    converted = []
    for position, tag in enumerate(tags):
        previous = converted[position - 1] if position else "O"
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        converted.append(tag)
    return converted


def read_conll(path: str, tag_column: int = -1) -> list[dict[str, list[str]]]:
    """Sentences of a CoNLL column file (`word POS chunk NER`; blank lines between sentences, `-DOCSTART-` lines
    between documents). The tag is read from `tag_column` (default: the last column)."""
    return [sentence for sentence, _ in read_conll_with_lines(path, tag_column)]


def read_conll_with_lines(path: str, tag_column: int = -1) -> list[tuple[dict[str, list[str]], list[int]]]:
    """`read_conll`'s sentences, each with the line number of each of its words.

    Every row must have the column count of the file's first row: a row that lacks one (its NER tag, say) would
    otherwise read another column (the chunk tag B-NP) as its tag, and a token holding a tab or a space would lose
    its second half. Either raises an error naming the file, the line and both counts.
    """
    sentences, tokens, tags, lines = [], [], [], []
    expected = None  # (column count, line number) of the file's first row

    def end_sentence():
        if tokens:
            sentences.append(({"tokens": list(tokens), "ner_tags": iob1_to_iob2(tags)}, list(lines)))
        for words in (tokens, tags, lines):
            words.clear()

    with io.StringIO(read_utf8(path), newline=None) as handle:  # bad bytes: the error names file and line
        for line_number, line in enumerate(handle, start=1):
            columns = line.split()
            if not columns:
                end_sentence()
                continue
            if columns[0] == _DOCSTART:
                end_sentence()
                continue
            where = f"{path}:{line_number}"
            if len(columns) < 2:
                raise DataError(f"{where}: expected a word and a tag separated by spaces, got {line!r}.")
            if expected is None:
                expected = (len(columns), line_number, "\t" in line.rstrip("\n"))
            elif len(columns) != expected[0]:
                raise DataError(_column_count_problem(where, line, len(columns), expected))
            try:
                tag = columns[tag_column]
            except IndexError:
                raise DataError(f"{where}: no column {tag_column} in {line.rstrip()!r}.") from None
            if not _TAG_PATTERN.match(tag):
                raise DataError(f"{where}: {tag!r} is not an IOB tag (O, B-TYPE or I-TYPE).")
            tokens.append(columns[0])
            tags.append(tag)
            lines.append(line_number)
    end_sentence()
    return sentences


def _column_count_problem(where: str, line: str, found: int, expected: tuple[int, int, bool]) -> str:
    count, first_line, tab_separated = expected
    problem = (
        f"{where}: {found} columns, but the rows of this file have {count} (line {first_line}): {line.rstrip()!r}."
    )
    if "\t" in line.rstrip("\n") and not tab_separated:
        problem += " A token holds a tab (the columns of this file are separated by spaces)."
    elif found < count:
        problem += " A column is missing (its NER tag?): every row needs all of the file's columns."
    else:
        problem += " A token holds a space or a tab: tokens cannot contain the column separator."
    return problem


def read_ner_json(path: str, label_names: Sequence[str] = CONLL2003_LABELS) -> list[dict[str, list[str]]]:
    """Sentences of a json-lines file in the Hub layout: `tokens` (or `words`) and `ner_tags` (or `ner`), the tags
    as strings or as integer ids into `label_names` (the Hub's conll2003 order by default)."""
    sentences = []
    with io.StringIO(read_utf8(path), newline=None) as handle:  # bad bytes: the error names file and line
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataError(f"{path}:{line_number}: not a json object ({error.msg}).") from None
            sentences.append(_sentence_from_record(record, label_names, f"{path}:{line_number}"))
    return sentences


def _sentence_from_record(record: dict, label_names: Sequence[str], where: str) -> dict[str, list[str]]:
    tokens = record.get("tokens", record.get("words"))
    tags = record.get("ner_tags", record.get("ner"))
    if tokens is None or tags is None:
        raise DataError(f"{where}: expected 'tokens' (or 'words') and 'ner_tags' (or 'ner'), got {sorted(record)}.")
    if len(tokens) != len(tags):
        raise DataError(f"{where}: {len(tokens)} tokens but {len(tags)} tags.")
    tags = [_tag_name(tag, label_names, where) for tag in tags]
    return {"tokens": list(tokens), "ner_tags": iob1_to_iob2(tags)}


def _tag_name(tag: int | str, label_names: Sequence[str], where: str) -> str:
    if isinstance(tag, int):
        if not 0 <= tag < len(label_names):
            raise DataError(f"{where}: tag id {tag} is outside the label list {list(label_names)}.")
        return label_names[tag]
    if not _TAG_PATTERN.match(tag):
        raise DataError(f"{where}: {tag!r} is not an IOB tag (O, B-TYPE or I-TYPE).")
    return tag


def load_ner_file(path: str, tag_column: int = -1) -> Dataset:
    """A CoNLL column file, or a .json/.jsonl file in the Hub layout, as a Dataset of sentences."""
    if not os.path.isfile(path):
        raise MissingFileError(f"NER data file {path} does not exist.")
    if path.endswith((".json", ".jsonl")):
        sentences = read_ner_json(path)
    else:
        sentences = read_conll(path, tag_column)
    if not sentences:
        raise DataError(f"{path}: no sentences found.")
    return Dataset.from_list(sentences)


def from_hub_layout(dataset: Dataset, source: str) -> Dataset:
    """A Hub NER dataset (tokens + ClassLabel ner_tags) -> our columns, with string tags."""
    feature = dataset.features.get("ner_tags")
    label_names = getattr(getattr(feature, "feature", None), "names", CONLL2003_LABELS)
    sentences = [_sentence_from_record(row, label_names, f"{source} row {i}") for i, row in enumerate(dataset)]
    return Dataset.from_list(sentences)


def tag_names_of_feature(feature) -> list[str] | None:
    """The tag names a `datasets` feature of a tags column carries: those of a List/Sequence of ClassLabel, else None."""
    names = getattr(getattr(feature, "feature", None), "names", None)
    return list(names) if names is not None else None


def ner_sentences_from_rows(
    rows: Dataset,
    source: str,
    tokens_column: str = "tokens",
    tags_column: str = "ner_tags",
    label_names: Sequence[str] | None = None,
) -> list[dict[str, list[str]]]:
    """Sentences of a table with a list-of-words column and a list-of-tags column (json, jsonl, parquet, a Hub dataset).

    Returns what [`read_conll`] returns (`tokens`, IOB2 `ner_tags` as names), so a job reads either the same way.
    Tags are names (B-PER), or ids into `label_names`, or ids of the column's `Sequence(ClassLabel)` feature; ids with
    no names are an error, since a model card and predictions need the names.
    """
    require_columns(rows, {"--tokens_column": tokens_column, "--tags_column": tags_column}, source)
    if label_names is None:
        label_names = tag_names_of_feature(rows.features.get(tags_column) if rows.features else None)
    sentences = []
    for row, record in enumerate(rows):
        where = f"{source} row {row}"
        tokens, tags = record[tokens_column], record[tags_column]
        if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
            raise DataError(f"{where}: column {tokens_column!r} (--tokens_column) must be a list of words.")
        if not isinstance(tags, list):
            raise DataError(f"{where}: column {tags_column!r} (--tags_column) must be a list of tags.")
        if label_names is None and any(isinstance(tag, int) for tag in tags):
            raise DataError(
                f"{where}: the tags of {tags_column!r} are ids, and the data names no tags for them (no ClassLabel "
                "feature). Give the tags as names (B-PER, I-PER, O, ...) or the tag names in id order."
            )
        sentences.append(_sentence_from_record({"tokens": tokens, "ner_tags": tags}, label_names or (), where))
    return sentences


def check_tags_seen_in_training(
    splits: dict[str, Dataset], files: dict[str, str] | None = None, tag_column: int = -1
) -> None:
    """Every tag of the evaluation and test splits occurs in the training split (when there is one), else an error
    naming the tag and where it first occurs (file and line for a CoNLL file).

    Such a tag (a typo, a type only the dev file has) would become a label the model never trained on, and every
    word carrying it an error the metric counts against the model. `files`: split -> the file it was read from.
    """
    if "train" not in splits:
        return
    seen = {tag for tags in splits["train"]["ner_tags"] for tag in tags}
    files = files or {}
    for split, dataset in splits.items():
        for index, tags in enumerate(dataset["ner_tags"]):
            unseen = next((tag for tag in tags if tag not in seen), None)
            if unseen is not None:
                where = _sentence_location(files.get(split), split, index, tags.index(unseen), tag_column)
                raise DataError(
                    f"{where}: tag {unseen!r} of the {split} data never occurs in the training data"
                    f"{' (' + files['train'] + ')' if 'train' in files else ''}: the model would have a label it "
                    "never trained on. Correct the tag, or train on data that has it."
                )


def _sentence_location(path: str | None, split: str, index: int, word: int, tag_column: int) -> str:
    """'file:line' of word `word` of sentence `index` of a CoNLL file; else the file (or split) and the sentence."""
    if path is None:
        return f"the {split} data, sentence {index + 1}"
    if path.endswith((".json", ".jsonl")):
        return f"{path}: sentence {index + 1}"
    _, lines = read_conll_with_lines(path, tag_column)[index]
    return f"{path}:{lines[word]}"


def build_label_list(*datasets: Dataset) -> list[str]:
    """The labels of the data: CoNLL-2003's nine in the Hub's order when they cover it, else "O" then sorted."""
    seen = {tag for dataset in datasets for tags in dataset["ner_tags"] for tag in tags}
    if seen <= set(CONLL2003_LABELS):
        return list(CONLL2003_LABELS)
    return ["O"] + sorted(seen - {"O"}, key=lambda tag: (tag[2:], tag[0]))


# ----------------------------------------------------------------------------------------------------------------------
# alignment between words and sub-tokens


def align_labels(
    word_ids: Sequence[int | None],
    word_label_ids: Sequence[int],
    label_all_tokens: bool = False,
    continuation_ids: Sequence[int] | None = None,
) -> list[int]:
    """Per-sub-token labels from per-word labels.

    word_ids: the word of each sub-token (None for [CLS], [SEP], padding), as `BatchEncoding.word_ids()` gives it.
    continuation_ids: label id -> the id to use on later sub-tokens with `label_all_tokens` (B-X -> I-X).
    """
    labels, previous_word = [], None
    for word in word_ids:
        if word is None:
            labels.append(IGNORE_INDEX)
        elif word != previous_word:
            labels.append(word_label_ids[word])
        elif label_all_tokens:
            label = word_label_ids[word]
            labels.append(continuation_ids[label] if continuation_ids is not None else label)
        else:
            labels.append(IGNORE_INDEX)
        previous_word = word
    return labels


def continuation_label_ids(label_list: Sequence[str]) -> list[int]:
    """For each label id, the id of the label that continues it (B-X -> I-X when I-X exists; others unchanged)."""
    index = {label: i for i, label in enumerate(label_list)}
    return [index.get("I-" + label[2:], i) if label.startswith("B-") else i for i, label in enumerate(label_list)]


def first_token_positions(word_ids: Sequence[int | None], num_words: int) -> list[int | None]:
    """For each word, the position of its first sub-token; None where the word has none (cut by truncation)."""
    positions: list[int | None] = [None] * num_words
    for position, word in enumerate(word_ids):
        if word is not None and positions[word] is None:
            positions[word] = position
    return positions


def word_predictions(
    token_label_ids: Sequence[int], word_ids: Sequence[int | None], num_words: int, label_list: Sequence[str]
) -> tuple[list[str], int]:
    """Word tags read from each word's first sub-token; words without a sub-token (truncated) get "O".

    Returns the tags and how many words had no sub-token, so callers can report them.
    """
    tags, missing = [], 0
    for position in first_token_positions(word_ids, num_words):
        if position is None:
            tags.append("O")
            missing += 1
        else:
            tags.append(label_list[token_label_ids[position]])
    return tags, missing


def tokenize_and_align(
    dataset: Dataset,
    tokenizer,
    label_list: Sequence[str],
    max_seq_length: int,
    label_all_tokens: bool = False,
    pad_to_max_length: bool = False,
) -> tuple[Dataset, int]:
    """Tokenize pre-split words and align labels; keeps `word_ids` for reading predictions back.

    Returns the dataset (input_ids, token_type_ids, attention_mask, labels, word_ids) and the number of sentences
    that max_seq_length truncated.
    """
    label_to_id = {label: i for i, label in enumerate(label_list)}
    continuation = continuation_label_ids(label_list)

    def encode(batch: dict[str, list]) -> dict[str, list]:
        encoded = tokenizer(
            batch["tokens"],
            is_split_into_words=True,
            truncation=True,
            max_length=max_seq_length,
            padding="max_length" if pad_to_max_length else False,
            return_token_type_ids=True,
        )
        encoded["labels"], encoded["word_ids"], encoded["truncated"] = [], [], []
        for i, (tokens, tags) in enumerate(zip(batch["tokens"], batch["ner_tags"])):
            unknown = [tag for tag in tags if tag not in label_to_id]
            if unknown:
                raise DataError(f"tags {sorted(set(unknown))} are not in the label list {list(label_list)}.")
            word_ids = encoded.word_ids(i)
            word_label_ids = [label_to_id[tag] for tag in tags]
            encoded["labels"].append(align_labels(word_ids, word_label_ids, label_all_tokens, continuation))
            encoded["word_ids"].append(word_ids)
            encoded["truncated"].append(None in first_token_positions(word_ids, len(tokens)))
        return encoded

    settings = dict(labels=list(label_list), max_seq_length=max_seq_length, all=label_all_tokens, pad=pad_to_max_length)
    encoded = dataset.map(encode, batched=True, new_fingerprint=map_fingerprint(dataset, encode, tokenizer, **settings))
    num_truncated = sum(encoded["truncated"]) if len(encoded) else 0
    return encoded.remove_columns("truncated"), num_truncated


def write_conll_predictions(
    path: str, tokens: Sequence[Sequence[str]], gold: Sequence[Sequence[str]] | None, predicted: Sequence[Sequence[str]]
) -> None:
    """Word-level predictions in CoNLL format, as conlleval reads them: `word gold predicted` (or `word predicted`
    without gold tags) per line, a blank line after each sentence."""
    with open(path, "w", encoding="utf-8") as handle:
        for i, (words, tags) in enumerate(zip(tokens, predicted)):
            for j, (word, tag) in enumerate(zip(words, tags)):
                columns = [word, gold[i][j], tag] if gold is not None else [word, tag]
                handle.write(" ".join(columns) + "\n")
            handle.write("\n")
