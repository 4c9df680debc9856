"""Test helpers for the tokenizer: google-research's ALBERT tokenization, and every text of the shared data by source.

The reference is google-research/albert's own `tokenization.py`, from the albert-tensorflow 1.1 wheel (a test
dependency), imported with a stand-in for tensorflow (`helpers/tensorflow_stand_in.py`). It is run as `run_classifier.py`
runs it: `preprocess_text(text, lower=do_lower_case)`, then `FullTokenizer(None, spm_model_file=...).tokenize`,
whose SentencePiece step is `encode_pieces(sp_model, text)` (EncodeAsPieces, then the re-split of "<digit>," pieces),
then `PieceToId` of each piece. It shares no code with `albert_hf.tokenization`, which reproduces the same result
with Rust `tokenizers` components. The benchmarks import this module too (`benchmarks/tokenizer_agreement.py`).

Two options have no counterpart in google-research's code, so they are applied to the text before it:
`keep_accents=True` runs its whitespace clean-up and lower-casing without the NFKD accent stripping (the same
`preprocess_text` as XLNet's and transformers' `keep_accents`), and `replace_quotes=True` turns `` and '' into "
first, as XLNet's and transformers v4's tokenizers do.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import sentencepiece as spm
from hypothesis import strategies as st

from .tensorflow_stand_in import import_google_tokenization

google = import_google_tokenization()


def preprocess_text(
    text: str, remove_space: bool = True, lower: bool = True, keep_accents: bool = False, replace_quotes: bool = False
) -> str:
    """The text google-research's code hands to SentencePiece (`preprocess_text`, plus the two options above)."""
    if replace_quotes:
        text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        return google.preprocess_text(text, remove_space=remove_space, lower=lower)
    if remove_space:
        text = " ".join(text.strip().split())
    return text.lower() if lower else text


def reference_pieces(sp: spm.SentencePieceProcessor, texts: list[str], **preprocess) -> list[list[str]]:
    """Pieces of each text as google-research's `FullTokenizer.tokenize` produces them."""
    return [google.encode_pieces(sp, preprocess_text(text, **preprocess), return_unicode=False) for text in texts]


def reference_ids(sp: spm.SentencePieceProcessor, texts: list[str], **preprocess) -> list[list[int]]:
    """Ids of each text (no special tokens): `FullTokenizer.convert_tokens_to_ids` of its pieces."""
    return [
        [sp.PieceToId(google.printable_text(piece)) for piece in pieces]
        for pieces in reference_pieces(sp, texts, **preprocess)
    ]


# ----------------------------------------------------------------------------------------------------------------------
# All the text of the shared data folder, by source
# ----------------------------------------------------------------------------------------------------------------------

GLUE_TEXT_COLUMNS = ("sentence", "sentence1", "sentence2", "#1 String", "#2 String", "question")


def glue_texts(data_dir: Path) -> Iterator[str]:
    """Every sentence of every GLUE tsv (CoLA train/dev have no header: the sentence is the 4th column)."""
    for path in sorted((data_dir / "glue").glob("*/*.tsv")):
        with path.open(encoding="utf-8-sig", newline="") as file:
            rows = list(csv.reader(file, delimiter="\t", quoting=csv.QUOTE_NONE))
        if path.parent.name == "CoLA" and path.stem != "test":
            header, columns = None, [3]
        else:
            header = rows[0]
            columns = [index for index, name in enumerate(header) if name in GLUE_TEXT_COLUMNS]
        for line_number, row in enumerate(rows[1:] if header else rows, 2 if header else 1):
            for column in columns:
                if column >= len(row):
                    raise ValueError(f"{path}:{line_number}: {len(row)} columns, expected more than {column}")
                yield row[column]


def squad_texts(data_dir: Path) -> Iterator[str]:
    """Contexts (once each) and questions of every SQuAD file, nested or flattened layout."""
    for path in sorted((data_dir / "squad").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
        for item in data:
            if "paragraphs" in item:  # official layout
                for paragraph in item["paragraphs"]:
                    yield paragraph["context"]
                    for qa in paragraph["qas"]:
                        yield qa["question"]
            else:  # flattened layout: one question per record
                yield item["context"]
                yield item["question"]


def conll_texts(data_dir: Path) -> Iterator[str]:
    """CoNLL-2003 sentences, their words joined by spaces (train and valid)."""
    for path in sorted((data_dir / "conll2003").glob("*.txt")):
        words: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("-DOCSTART-"):
                if words:
                    yield " ".join(words)
                words = []
            else:
                words.append(line.split(" ")[0])
        if words:
            yield " ".join(words)


def corpus_texts(data_dir: Path) -> Iterator[str]:
    """Every non-empty line of the pretraining corpora and of transformers' text samples."""
    paths = sorted((data_dir / "corpus").glob("*.txt")) + sorted((data_dir / "corpus" / "gutenberg").glob("*.txt"))
    paths += [data_dir / "hf-samples" / "sample_text.txt", data_dir / "hf-samples" / "wiki_text" / "wiki_00"]
    for path in paths:
        for line in _read_text(path).splitlines():
            if line.strip():
                yield line
    for path in (data_dir / "hf-samples" / "conll" / "sample.json", data_dir / "hf-samples" / "swag" / "sample.json"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            yield from (
                " ".join(value) if isinstance(value, list) else value
                for key, value in record.items()
                if key in ("words", "sent1", "sent2", "ending0", "ending1", "ending2", "ending3")
            )


def _read_text(path: Path) -> str:
    """UTF-8, or Latin-1 for the two NLTK Gutenberg files stored that way (chesterton-ball, shakespeare-caesar)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return path.read_text(encoding="latin-1")


TEXT_SOURCES = {"glue": glue_texts, "squad": squad_texts, "conll2003": conll_texts, "corpus": corpus_texts}


# ----------------------------------------------------------------------------------------------------------------------
# Generated text, and every public way transformers offers to encode it (tests/test_tokenization.py runs these on the
# tokenizer as built, pickled, and loaded by AutoTokenizer as remote code in a process without albert_hf)
# ----------------------------------------------------------------------------------------------------------------------

# Pieces of generated text: words with accents, ligatures and other scripts; numbers with digit-commas (the original's
# re-split); strings that normalize into control pieces ("<UNK>" lowercases to the control piece "<unk>", which
# SentencePiece never matches in text); separators of every kind of whitespace, or none (glued pieces).
WORDS = ["the", "Team", "won", "naïve", "Crème", "brûlée", "İstanbul", "ΟΔΟΣ", "façade", "ﬁve", "½", "²", "Ångström",
         "東京", "x1", "(a)", '"q"', "-", ".", "''", "``"]  # fmt: skip
NUMBERS = ["1,000", "12,345,678", "1990,", "3,", "0,5", "x1,y", "4,666", "2,500.", "1,2,3", "1²,5"]
CONTROL_LIKE = ["<UNK>", "<Pad>", "[cls]", "[Sep]", "[mask]", "<unk", "pad>", "<Unk>,", "<PAD>1,0"]
SPECIAL_STRINGS = ["<unk>", "<pad>", "[CLS]", "[SEP]", "[MASK]", "x<unk>", "[MASK]1,000"]  # added tokens as written
SPACES = [" ", " ", " ", "", "  ", "\t", "\n", "\u00a0", "\u3000", "\x1c", "\u2009", "\x85", " \u0301", "\r\n "]


@st.composite
def generated_texts(draw, special_strings: bool = False, min_parts: int = 0, max_parts: int = 10) -> str:
    """A text of words, numbers, control-like strings and random letters, marks, punctuation and symbols, separated
    by whitespace of every kind (or glued). `special_strings` adds the special tokens as written ("<unk>", "[MASK]")."""
    piece = st.one_of(
        st.sampled_from(WORDS),
        st.sampled_from(NUMBERS),
        st.sampled_from(CONTROL_LIKE + (SPECIAL_STRINGS if special_strings else [])),
        st.text(st.characters(categories=("L", "M", "P", "S")), min_size=1, max_size=4),
    )
    parts = draw(st.lists(piece, min_size=min_parts, max_size=max_parts))
    separators = draw(st.lists(st.sampled_from(SPACES), min_size=len(parts) + 1, max_size=len(parts) + 1))
    return separators[0] + "".join(part + separator for part, separator in zip(parts, separators[1:]))


def original_ids(sp, text: str) -> list[int]:
    return reference_ids(sp, [text])[0]


def original_single(tokenizer, sp, text: str) -> list[int]:
    return [tokenizer.cls_token_id, *original_ids(sp, text), tokenizer.sep_token_id]


def original_pair(tokenizer, sp, first: str, second: str) -> list[int]:
    return [*original_single(tokenizer, sp, first), *original_ids(sp, second), tokenizer.sep_token_id]


def original_words(tokenizer, sp, words: list[str]) -> list[int]:
    """Pre-tokenized words: each word as a text of its own (a "▁" before each), as the original encodes words that
    spaces separate."""
    return [tokenizer.cls_token_id, *(i for word in words for i in original_ids(sp, word)), tokenizer.sep_token_id]


ENTRY_POINTS = [
    "__call__ text", "__call__ batch", "__call__ pair", "__call__ text_pair batch", "__call__ is_split_into_words",
    "__call__ is_split_into_words pairs", "encode", "encode pair", "return_offsets_mapping",
    "return_overflowing_tokens stride", "pad", "split_special_tokens",
]  # fmt: skip


def encode_through(tokenizer, sp, way: str, texts: list[str], pairs: list[str]) -> tuple[list, list]:
    """(ids the entry point gives, ids of the original algorithm) for the texts and their pair texts."""
    single = [original_single(tokenizer, sp, text) for text in texts]
    paired = [original_pair(tokenizer, sp, a, b) for a, b in zip(texts, pairs)]
    words, pair_words = [text.split(" ") for text in texts], [text.split(" ") for text in pairs]
    if way == "__call__ text":
        return [tokenizer(text)["input_ids"] for text in texts], single
    if way == "__call__ batch":
        return tokenizer(texts)["input_ids"], single
    if way == "__call__ pair":
        return [tokenizer(a, b)["input_ids"] for a, b in zip(texts, pairs)], paired
    if way == "__call__ text_pair batch":
        encoding = tokenizer(texts, text_pair=pairs)
        for ids, types in zip(encoding["input_ids"], encoding["token_type_ids"]):
            first_sep = ids.index(tokenizer.sep_token_id)
            assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        return encoding["input_ids"], paired
    if way == "__call__ is_split_into_words":
        return tokenizer(words, is_split_into_words=True)["input_ids"], [
            original_words(tokenizer, sp, text_words) for text_words in words
        ]
    if way == "__call__ is_split_into_words pairs":
        return tokenizer(words, pair_words, is_split_into_words=True)["input_ids"], [
            [*original_words(tokenizer, sp, a), *original_words(tokenizer, sp, b)[1:]]
            for a, b in zip(words, pair_words)
        ]
    if way == "encode":
        return [tokenizer.encode(text) for text in texts], single
    if way == "encode pair":
        return [tokenizer.encode(a, b) for a, b in zip(texts, pairs)], paired
    if way == "return_offsets_mapping":
        encoding = tokenizer(texts, pairs, return_offsets_mapping=True)
        for index, (a, b) in enumerate(zip(texts, pairs)):
            sequences = encoding.sequence_ids(index)
            for sequence, (start, end) in zip(sequences, encoding["offset_mapping"][index]):
                if sequence is None:
                    assert (start, end) == (0, 0)
                else:
                    assert 0 <= start < end <= len((a, b)[sequence]), ((a, b)[sequence], start, end)
            for sequence in (0, 1):
                starts = [span[0] for span, s in zip(encoding["offset_mapping"][index], sequences) if s == sequence]
                assert starts == sorted(starts)
        return encoding["input_ids"], paired
    if way == "pad":
        features = [tokenizer(text) for text in texts]
        padded = tokenizer.pad(features, padding=True)
        longest = max(map(len, single))
        assert padded["attention_mask"] == [[1] * len(ids) + [0] * (longest - len(ids)) for ids in single]
        return padded["input_ids"], [ids + [tokenizer.pad_token_id] * (longest - len(ids)) for ids in single]
    if way == "split_special_tokens":  # the special tokens as written are plain text, as the original always has it
        return tokenizer(texts, pairs, split_special_tokens=True)["input_ids"], paired
    raise ValueError(way)


def draw_and_encode(tokenizer, sp, way: str, data) -> tuple[list, list]:
    """Draws texts for `way` from hypothesis' `data`; returns (ids the entry point gives, the original's ids)."""
    if way == "return_overflowing_tokens stride":
        question = data.draw(generated_texts(max_parts=4), label="question")
        context = data.draw(generated_texts(min_parts=8, max_parts=30), label="context")
        window = data.draw(st.integers(2, 12), label="window")
        stride = data.draw(st.integers(0, window - 1), label="stride")
        return overflow_windows(tokenizer, sp, question, context, window, stride)
    special = way == "split_special_tokens"
    texts = data.draw(st.lists(generated_texts(special_strings=special), min_size=1, max_size=4), label="texts")
    # Not empty: transformers takes `text_pair=""` of a single input for no pair at all.
    pair_texts = generated_texts(special_strings=special, min_parts=1)
    pairs = data.draw(st.lists(pair_texts, min_size=len(texts), max_size=len(texts)), label="pairs")
    return encode_through(tokenizer, sp, way, texts, pairs)


def overflow_windows(tokenizer, sp, question: str, context: str, window: int, stride: int) -> tuple[list, list]:
    """`return_overflowing_tokens` with a stride over the second text, and what it must give: every window is [CLS]
    question [SEP] a slice of the context's original ids [SEP], each slice `window` ids long (the last one shorter)
    and starting `stride` ids before the end of the previous one."""
    question_ids, context_ids = original_ids(sp, question), original_ids(sp, context)
    encoding = tokenizer(
        question,
        context,
        truncation="only_second",
        max_length=len(question_ids) + 3 + window,
        stride=stride,
        return_overflowing_tokens=True,
    )
    assert encoding["overflow_to_sample_mapping"] == [0] * len(encoding["input_ids"])
    expected, start = [], 0
    while True:
        part = context_ids[start : start + window]
        expected.append([tokenizer.cls_token_id, *question_ids, tokenizer.sep_token_id, *part, tokenizer.sep_token_id])
        if start + window >= len(context_ids):
            break
        start += window - stride
    return encoding["input_ids"], expected


def assert_original_ids(sp, ours: list[list[int]], original: list[list[int]]) -> None:
    """Every sequence equals the original's, except where SentencePiece breaks a tie differently, as documented in
    albert_hf/tokenization.py: one span cut into other pieces of the same text whose scores sum to within 1e-3
    ("66" "6" against "6" "66"; SentencePiece adds scores in float32 along the whole text). Nothing else passes."""
    assert len(ours) == len(original), (len(ours), len(original))
    for our_ids, original_ids_ in zip(ours, original):
        if our_ids == original_ids_:
            continue
        start = 0
        while start < min(len(our_ids), len(original_ids_)) and our_ids[start] == original_ids_[start]:
            start += 1
        end = 0
        while end < min(len(our_ids), len(original_ids_)) - start and our_ids[-1 - end] == original_ids_[-1 - end]:
            end += 1
        our_span, original_span = our_ids[start : len(our_ids) - end], original_ids_[start : len(original_ids_) - end]
        message = (
            f"ours {[sp.id_to_piece(i) for i in our_ids]} != original {[sp.id_to_piece(i) for i in original_ids_]}"
        )
        assert our_span and original_span, message
        assert "".join(map(sp.id_to_piece, our_span)) == "".join(map(sp.id_to_piece, original_span)), message
        scores = [sum(map(sp.get_score, span)) for span in (our_span, original_span)]
        assert abs(scores[0] - scores[1]) <= 1e-3, message
