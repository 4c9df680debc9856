"""CoNLL-2003 NER data: reading the original column files or the Hub layout, and word <-> sub-token label alignment.

Every source becomes a `datasets.Dataset` of sentences with two columns:

    tokens:   list[str]  the words of the sentence
    ner_tags: list[str]  one IOB2 tag per word ("O", "B-PER", "I-PER", ...)

IOB1 input (where I-X may open an entity) is converted to IOB2 on reading; the two describe the same entities, and
converting IOB2 leaves it unchanged, so every file goes through the same conversion.

ALBERT's SentencePiece splits a word into one or more sub-tokens. The word's label goes on its first sub-token and
the others get -100 (ignored by the loss and the metric), or with `label_all_tokens` the others get the word's label
too (with B-X turned into I-X). Predictions are read back from each word's first sub-token.

How the words become the model's input (`alignment`) depends on how the language writes them:

- "words": each word is encoded as if a space preceded it (`is_split_into_words`), as English and every other
  language with spaces between words is written: one "▁" per word.
- "running_text": for scripts written without spaces (Japanese, Chinese) that would put a "▁" before every word, a
  text the model never saw in pretraining. The words are joined as the language writes them ([`join_words`]), the
  text is tokenized once with offsets, and each piece belongs to the word its first character is in: the ids are
  exactly the running text's. A piece that spans a word boundary belongs to the word it starts in; a word with no
  piece of its own (one inside such a piece, or a word that is only a space) is predicted from the piece covering
  it, or the one before it ([`running_text_positions`]), so every word gets a tag.
- "auto" (the default) chooses "running_text" where the script of the sentences is one written without spaces, as
  whole-word masking chooses its segmenter ([`unspaced_language`]), else "words": spaced text is encoded exactly as
  before.
"""

from __future__ import annotations

import bisect
import io
import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from datasets import Dataset

from ..errors import DataError, MissingFileError, UserError
from ..output_files import write_file
from .caching import map_fingerprint
from .sources import require_columns
from .text_checks import RowPlaces, check_text
from .textfiles import read_utf8
from .word_segmentation import UNSPACED_CHARACTER, unspaced_language

logger = logging.getLogger(__name__)

# The Hub's class order for conll2003 ner_tags, so integer tags from the Hub keep their meaning.
CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
# How the words of a sentence become the model's input (see the module docstring).
ALIGN_AUTO, ALIGN_RUNNING_TEXT, ALIGN_WORDS = "auto", "running_text", "words"
ALIGNMENTS = (ALIGN_AUTO, ALIGN_RUNNING_TEXT, ALIGN_WORDS)
IGNORE_INDEX = -100  # label of sub-tokens that neither the loss nor the metric sees
_TAG_PATTERN = re.compile(r"^(O|[BI]-\S+)$")
_DOCSTART = "-DOCSTART-"
# CoNLL columns are separated by ASCII spaces and tabs only: a token may be any other Unicode space (U+3000, U+00A0),
# which Japanese and Chinese corpora do hold, and is kept as a token.
_COLUMN_SEPARATOR = re.compile("[ \t]+")


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
            columns = conll_columns(line)
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
            tokens.append(check_text(columns[0], where, "the word"))  # the reader contract: no NUL byte
            tags.append(tag)
            lines.append(line_number)
    end_sentence()
    return sentences


def conll_columns(line: str) -> list[str]:
    """The columns of one CoNLL line, split on ASCII spaces and tabs only ([] for a blank line)."""
    stripped = line.rstrip("\r\n").strip(" \t")
    return _COLUMN_SEPARATOR.split(stripped) if stripped else []


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
    if not isinstance(tokens, list):
        raise DataError(f"{where}: 'tokens' must be a list of words, got {type(tokens).__name__}.")
    if len(tokens) != len(tags):
        raise DataError(f"{where}: {len(tokens)} tokens but {len(tags)} tags.")
    for number, token in enumerate(tokens, start=1):  # the reader contract: a word is a text, never empty
        check_text(token, where, f"word {number}")
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
    sentences = [_sentence_from_record(row, label_names, f"{source}: row index {i}") for i, row in enumerate(dataset)]
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
    places: RowPlaces | None = None,
) -> list[dict[str, list[str]]]:
    """Sentences of a table with a list-of-words column and a list-of-tags column (json, jsonl, parquet, a Hub dataset).

    Returns what [`read_conll`] returns (`tokens`, IOB2 `ner_tags` as names), so a job reads either the same way.
    Tags are names (B-PER), or ids into `label_names`, or ids of the column's `Sequence(ClassLabel)` feature; ids with
    no names are an error, since a model card and predictions need the names. Errors name the row by its file and
    line (`places`), else its index.
    """
    require_columns(rows, {"--tokens_column": tokens_column, "--tags_column": tags_column}, source)
    if label_names is None:
        label_names = tag_names_of_feature(rows.features.get(tags_column) if rows.features else None)
    places = places or RowPlaces(None, source)
    sentences = []
    for row, record in enumerate(rows):
        where = places.where(row)
        tokens, tags = record[tokens_column], record[tags_column]
        if not isinstance(tokens, list):
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


def label_borrowed_pieces(
    labels: list[int], word_ids: Sequence[int | None], positions: Sequence[int | None], word_label_ids: Sequence[int]
) -> list[int]:
    """Trains the pieces that predict a word without a piece of its own: a word read from another word's later piece
    (one spanning both words, or the piece before a word that is only a space) puts its label there, so the model
    learns what the word is read from. A word read from another word's first piece leaves that word's label."""
    owned = first_token_positions(word_ids, len(positions))
    taken = {position for position in owned if position is not None}
    for word, position in enumerate(positions):
        if owned[word] is None and position is not None and position not in taken:
            labels[position] = word_label_ids[word]
            taken.add(position)
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


def words_split_positions(word_ids: Sequence[int | None], num_words: int) -> list[int | None]:
    """For each word of an `is_split_into_words` encoding, the token that predicts it: its first sub-token. A word
    that has none but lies before the last word encoded (a word that is only a space, which the tokenizer drops) is
    predicted from the token before it, as in running text; only the words past the last one encoded (cut by
    truncation) get None."""
    positions = first_token_positions(word_ids, num_words)
    last = max((word for word in word_ids if word is not None), default=-1)
    for word in range(min(last, num_words)):
        if positions[word] is None:
            before = [p for p, w in enumerate(word_ids) if w is not None and w < word]
            positions[word] = before[-1] if before else next(p for p, w in enumerate(word_ids) if w is not None)
    return positions


def word_predictions(
    token_label_ids: Sequence[int],
    word_ids: Sequence[int | None],
    num_words: int,
    label_list: Sequence[str],
    positions: Sequence[int | None] | None = None,
) -> tuple[list[str], int]:
    """Word tags read from the sub-token that predicts each word: `positions` (one per word, as `tokenize_and_align`
    stores them), by default each word's first sub-token. Words without one (truncated) get "O".

    A word predicted from the same sub-token as the word before it (running text: a piece that spans both) continues
    that word's entity: B-X read there becomes I-X. Returns the tags and how many words had no sub-token, so callers
    can report them.
    """
    if positions is None:
        positions = first_token_positions(word_ids, num_words)
    tags, missing, previous = [], 0, None
    for position in positions:
        if position is None:
            tags.append("O")
            missing += 1
        else:
            tag = label_list[token_label_ids[position]]
            tags.append("I-" + tag[2:] if position == previous and tag.startswith("B-") else tag)
        previous = position
    return tags, missing


# ----------------------------------------------------------------------------------------------------------------------
# words of scripts without spaces: running text


def resolve_alignment(alignment: str, sentences: Sequence[Sequence[str]]) -> str:
    """ "running_text" or "words" (see the module's docstring); "auto" asks the script of the first 200 sentences."""
    if alignment not in ALIGNMENTS:
        raise UserError(f"alignment {alignment!r}: expected one of {', '.join(ALIGNMENTS)}.")
    if alignment != ALIGN_AUTO:
        return alignment
    texts = [join_words(words)[0] for words in sentences[:200]]
    return ALIGN_RUNNING_TEXT if unspaced_language(texts) else ALIGN_WORDS


def _spaced(character: str) -> bool:
    return not character.isspace() and not UNSPACED_CHARACTER.match(character)


def join_words(words: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The words written as running text, and each word's (start, end) in it.

    Words are joined with nothing between them, except one space between two words whose neighbouring characters are
    both of spaced scripts (Latin letters, digits, ASCII punctuation, hangul, ...): 東京 + の + Google + 社 gives
    "東京のGoogle社", New + York + に gives "New Yorkに", iPhone + 15 gives "iPhone 15". Kana, ideographs, CJK
    punctuation and full-width forms (ＡＢＣ１２３) never take a space; a word that is a space (U+3000) is kept as it is.
    """
    text, spans = "", []
    for word in words:
        if text and word and _spaced(text[-1]) and _spaced(word[0]):
            text += " "
        spans.append((len(text), len(text) + len(word)))
        text += word
    return text, spans


def entity_edges(words: Sequence[str], tags: Sequence[str]) -> tuple[str, list[int]]:
    """The running text of a sentence ([`join_words`]) and the character offsets in it where its entities (IOB2
    tags) start and end."""
    text, spans = join_words(words)
    edges = []
    for index, tag in enumerate(tags):
        if tag.startswith("B-"):
            edges.append(spans[index][0])
        following = tags[index + 1] if index + 1 < len(tags) else "O"
        if tag != "O" and following != f"I-{tag[2:]}":
            edges.append(spans[index][1])
    return text, edges


def running_text_positions(
    piece_offsets: Sequence[tuple[int, int]], word_spans: Sequence[tuple[int, int]]
) -> tuple[list[int], list[int | None]]:
    """(the word of each piece, the piece that predicts each word) for pieces at `piece_offsets` of a text whose words
    lie at `word_spans` (as [`join_words`] gives them).

    A piece belongs to the word its first character is in (a space before a word counts as that word's). A word's
    predicting piece is its first piece; for a word with no piece of its own, the last piece that starts before it
    (the one covering it, or for a word that is only a space, the piece before it), else the first piece.
    """
    ends = [end for _, end in word_spans]
    last_word = len(word_spans) - 1
    piece_words = [min(bisect.bisect_right(ends, start), last_word) for start, _ in piece_offsets]
    piece_starts = [start for start, _ in piece_offsets]
    positions: list[int | None] = first_token_positions(piece_words, len(word_spans))
    for word, (start, _) in enumerate(word_spans):
        if positions[word] is None and piece_offsets:
            positions[word] = max(0, bisect.bisect_left(piece_starts, start) - 1)
    return piece_words, positions


def encode_running_text(
    sentences: Sequence[Sequence[str]], tokenizer, max_seq_length: int, pad_to_max_length: bool = False
) -> dict[str, list]:
    """Each sentence's words joined as running text and tokenized once with offsets (truncated to `max_seq_length`):
    the tokenizer's input_ids, token_type_ids and attention_mask, with word_ids (per token) and word_positions (per
    word; None for a word cut by truncation)."""
    texts, spans = zip(*(join_words(words) for words in sentences)) if sentences else ((), ())
    encoded = tokenizer(
        list(texts),
        truncation=True,
        max_length=max_seq_length,
        padding="max_length" if pad_to_max_length else False,
        return_token_type_ids=True,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    truncated = _truncated(tokenizer, texts, encoded["special_tokens_mask"], max_seq_length)
    columns = {key: encoded[key] for key in ("input_ids", "token_type_ids", "attention_mask")}
    columns["word_ids"], columns["word_positions"] = [], []
    for offsets, special, word_spans, cut in zip(
        encoded["offset_mapping"], encoded["special_tokens_mask"], spans, truncated
    ):
        content = [position for position, is_special in enumerate(special) if not is_special]
        piece_words, positions = running_text_positions([offsets[i] for i in content], word_spans)
        word_ids: list[int | None] = [None] * len(special)
        for position, word in zip(content, piece_words):
            word_ids[position] = word
        if cut:  # words past the last kept piece lost their text to truncation
            end = offsets[content[-1]][1] if content else 0
            owned = set(piece_words)
            positions = [
                None if word not in owned and start >= end else position
                for word, (position, (start, _)) in enumerate(zip(positions, word_spans))
            ]
        columns["word_ids"].append(word_ids)
        columns["word_positions"].append([None if p is None else content[p] for p in positions])
    return columns


def _truncated(
    tokenizer, texts: Sequence[str], special_masks: Sequence[Sequence[int]], max_seq_length: int
) -> list[bool]:
    """Whether truncation cut each text: only texts that fill `max_seq_length` are tokenized again, untruncated."""
    full = [
        i
        for i, mask in enumerate(special_masks)
        if len(mask) - sum(mask) >= max_seq_length - tokenizer.num_special_tokens_to_add()
    ]
    lengths = tokenizer([texts[i] for i in full], add_special_tokens=False)["input_ids"] if full else []
    kept = {i: len(mask) - sum(mask) for i, mask in enumerate(special_masks)}
    cut = {i for i, ids in zip(full, lengths) if len(ids) > kept[i]}
    return [i in cut for i in range(len(texts))]


def tokenize_and_align(
    dataset: Dataset,
    tokenizer,
    label_list: Sequence[str],
    max_seq_length: int,
    label_all_tokens: bool = False,
    pad_to_max_length: bool = False,
    alignment: str = ALIGN_WORDS,
) -> tuple[Dataset, int]:
    """Tokenize the words of each sentence and align labels; keeps `word_ids` (per token) and `word_positions` (the
    token each word is predicted from) for reading predictions back.

    `alignment`: "words" (one "▁" per word) or "running_text" (see the module's docstring; resolve "auto" first with
    [`resolve_alignment`]). Returns the dataset (input_ids, token_type_ids, attention_mask, labels, word_ids,
    word_positions) and the number of sentences that max_seq_length truncated.
    """
    if alignment not in (ALIGN_WORDS, ALIGN_RUNNING_TEXT):
        raise ValueError(f"alignment {alignment!r}: expected 'words' or 'running_text' (resolve 'auto' first).")
    label_to_id = {label: i for i, label in enumerate(label_list)}
    continuation = continuation_label_ids(label_list)

    def word_label_ids(tags: Sequence[str]) -> list[int]:
        unknown = [tag for tag in tags if tag not in label_to_id]
        if unknown:
            raise DataError(f"tags {sorted(set(unknown))} are not in the label list {list(label_list)}.")
        return [label_to_id[tag] for tag in tags]

    def encode_words(batch: dict[str, list]) -> dict[str, list]:
        encoded = tokenizer(
            batch["tokens"],
            is_split_into_words=True,
            truncation=True,
            max_length=max_seq_length,
            padding="max_length" if pad_to_max_length else False,
            return_token_type_ids=True,
        )
        encoded["labels"], encoded["word_ids"], encoded["word_positions"] = [], [], []
        for i, (tokens, tags) in enumerate(zip(batch["tokens"], batch["ner_tags"])):
            word_ids, label_ids = encoded.word_ids(i), word_label_ids(tags)
            positions = words_split_positions(word_ids, len(tokens))
            labels = align_labels(word_ids, label_ids, label_all_tokens, continuation)
            encoded["labels"].append(label_borrowed_pieces(labels, word_ids, positions, label_ids))
            encoded["word_ids"].append(word_ids)
            encoded["word_positions"].append(positions)
        return encoded

    def encode_running(batch: dict[str, list]) -> dict[str, list]:
        encoded = encode_running_text(batch["tokens"], tokenizer, max_seq_length, pad_to_max_length)
        encoded["labels"] = []
        for word_ids, positions, tags in zip(encoded["word_ids"], encoded["word_positions"], batch["ner_tags"]):
            label_ids = word_label_ids(tags)
            labels = align_labels(word_ids, label_ids, label_all_tokens, continuation)
            encoded["labels"].append(label_borrowed_pieces(labels, word_ids, positions, label_ids))
        return encoded

    def encode(batch: dict[str, list]) -> dict[str, list]:
        encoded = (encode_running if alignment == ALIGN_RUNNING_TEXT else encode_words)(batch)
        encoded["truncated"] = [None in positions for positions in encoded["word_positions"]]
        return encoded

    settings = dict(
        labels=list(label_list),
        max_seq_length=max_seq_length,
        all=label_all_tokens,
        pad=pad_to_max_length,
        alignment=alignment,
    )
    encoded = dataset.map(encode, batched=True, new_fingerprint=map_fingerprint(dataset, encode, tokenizer, **settings))
    num_truncated = sum(encoded["truncated"]) if len(encoded) else 0
    return encoded.remove_columns("truncated"), num_truncated


def write_conll_predictions(
    path: str, tokens: Sequence[Sequence[str]], gold: Sequence[Sequence[str]] | None, predicted: Sequence[Sequence[str]]
) -> Path:
    """Word-level predictions in CoNLL format, as conlleval reads them: `word gold predicted` (or `word predicted`
    without gold tags) per line, a blank line after each sentence. Returns the path written (through
    `albert_hf.output_files`: beside a user's file of that name, never over it)."""
    lines = []
    for i, (words, tags) in enumerate(zip(tokens, predicted)):
        for j, (word, tag) in enumerate(zip(words, tags)):
            columns = [word, gold[i][j], tag] if gold is not None else [word, tag]
            lines.append(" ".join(columns) + "\n")
        lines.append("\n")
    return write_file(path, "".join(lines))
