"""Word boundaries for whole-word masking in scripts written without spaces (Japanese, Chinese).

ALBERT masks whole words, and finds them where a SentencePiece piece starts with "▁" (or is punctuation); with a BERT
WordPiece vocabulary (the Chinese ALBERTs'), at every piece but a "##" continuation, as BERT does. Japanese
and Chinese put no space between words, so there a "word" is a whole clause of a dozen pieces or more: whole clauses
rarely fit the budget of 15%, and the words that do fit are disproportionately punctuation. The Japanese and Chinese
BERTs mask the words a segmenter finds instead: MeCab through fugashi with unidic-lite for Japanese, as transformers'
`BertJapaneseTokenizer` does; for Chinese, transformers' whole-word recipe (`run_chinese_ref.py`) uses LTP, a neural
segmenter with a model to download, where jieba, a dictionary segmenter that installs with its dictionary, is used
here.

Here the words are found once, when the data is prepared: each sentence is segmented, and every piece is marked as
starting a word or not ("word_starts", aligned with the ids, stored with the instances); [`DataCollatorForSOP`] reads
the marks instead of the "▁" rule. A piece starts a word when the word that its first character belongs to is not
the word of the piece before it (a piece that crosses a boundary belongs to the word it starts in), or when the
original rule says it does (a "▁" piece, ASCII punctuation): the text is segmented after the tokenizer's own
preprocessing, on the characters SentencePiece aligns its pieces with, so lower-casing or NFKC cannot shift a word.

The segmenter is chosen from the script of the text (`script_language`, as the card's language is): fugashi for
Japanese, jieba for Chinese, and for everything else none: spaced text keeps the original rule, read off the ids by
the collator, so its instances and masks are exactly the original's. `--word_segmenter package.module:function`
plugs in any other (a function from a text to its words, in order), `pieces` asks for the "▁" rule on any text.
A word-bounded tokenizer (its pieces stop at a segmenter's words, `albert_hf.vocabulary.train_tokenizer`) decides
instead: whole-word masking reads its segmenter's words, on the text the tokenizer segmented, so every word it masks
is a whole number of the tokenizer's pieces. The segmenters themselves live in albert_hf/tokenization.py, which such
a tokenizer carries as remote code.

`edges_inside_pieces` measures what a vocabulary whose pieces run across words costs a span task: the share of the
answers' or entities' edges that fall inside a piece, which `albert-hf squad` and `albert-hf ner` log for text
without spaces.
"""

from __future__ import annotations

import bisect
import dataclasses
import importlib
import logging
import re
from collections.abc import Callable, Sequence

import numpy as np

from ..tokenization import WORD_SEGMENTERS, segment_word_ends
from .sentences import import_function, script_language

logger = logging.getLogger(__name__)

WORD_START_MARKER = "\u2581"  # SentencePiece's "▁": a piece that starts with it starts a word
# The original create_pretraining_data.py's `_is_start_piece`: punctuation pieces start a word of their own.
START_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')


def is_start_piece(piece: str) -> bool:
    """Whether a SentencePiece piece starts a word for whole-word / n-gram masking (the original's rule)."""
    return piece.startswith(WORD_START_MARKER) or piece.startswith("<") or piece in START_PUNCTUATION


def continuation_prefix(tokenizer) -> str | None:
    """The prefix of a WordPiece tokenizer's pieces that continue a word ("##": BERT's vocabularies, the Chinese
    ALBERTs'), or None for any other tokenizer (SentencePiece marks where words start instead)."""
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    return getattr(model, "continuing_subword_prefix", None) if type(model).__name__ == "WordPiece" else None


PIECE_RULE = "pieces"
PIECE_RULE_DESCRIPTION = 'SentencePiece\'s "▁" (the original rule)'
WORDPIECE_RULE_DESCRIPTION = "WordPiece's \"##\" continuations (BERT's rule)"
WordSegmentation = Callable[[str], list[str]]


@dataclasses.dataclass(frozen=True)
class Segmenter:
    """A segmenter that ships with albert_hf: its --word_segmenter value, its name in the log, its function, the
    modules it imports and the extra that installs them, the language it is chosen for."""

    option: str
    name: str
    segment: WordSegmentation
    modules: tuple[str, ...]
    extra: str
    language: str


# The segmenters are those a word-bounded tokenizer can carry (albert_hf.tokenization's WORD_SEGMENTERS): one
# definition of each, so that whole-word masking and the tokenizer read the same words.
SEGMENTERS = {
    language: Segmenter(name, spec.label, spec.segment, spec.modules, spec.extra, language_name)
    for language, name, language_name in (("ja", "fugashi", "Japanese"), ("zh", "jieba", "Chinese"))
    for spec in (WORD_SEGMENTERS[name],)
}


@dataclasses.dataclass(frozen=True)
class WordSegmenter:
    """Finds the words of sentences and marks the pieces that start one (see the module's docstring).

    `name` is what the log and the data's cache fingerprint call it; `segment` takes a text and returns its words in
    order (whitespace between them may be left out).
    """

    name: str
    segment: WordSegmentation

    def encode(self, tokenizer, sentences: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """(ids, word starts) of each sentence: the ids of `encode_sentences`, and 1 or 0 per id."""
        if continuation_prefix(tokenizer) is not None:
            return self._encode_wordpiece(tokenizer, sentences)
        if not hasattr(tokenizer, "encode_plain_texts_with_starts"):
            raise ValueError(
                f"word segmenter {self.name}: needs where each piece starts in its text, which "
                f"{type(tokenizer).__name__} does not give (albert_hf's AlbertHFTokenizer does, and every WordPiece "
                "tokenizer with offsets)."
            )
        rule = piece_rule_table(tokenizer)
        ids, starts = [], []
        for text, text_ids, piece_starts in tokenizer.encode_plain_texts_with_starts(sentences):
            ids.append(text_ids)
            starts.append(self.word_starts(text, piece_starts, rule[np.asarray(text_ids, dtype=np.int64)]))
        return ids, starts

    def _encode_wordpiece(self, tokenizer, sentences: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """A WordPiece tokenizer's ids with the word starts of Chinese whole-word masking (BERT-wwm, transformers'
        `run_chinese_ref.py`): a piece starts a word when it starts another word of the segmenter than the piece
        before it, and never when it is a "##" continuation. BERT's basic tokenization makes every CJK character a
        word of its own, which the segmenter's words join; the offsets are into the raw text, which is segmented."""
        encoded = tokenizer(
            list(sentences), add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False
        )
        continues = continuation_table(tokenizer)
        ids, starts = [], []
        for text, text_ids, offsets in zip(sentences, encoded["input_ids"], encoded["offset_mapping"]):
            ends = self.word_ends(text)
            words = [bisect.bisect_right(ends, start) for start, _ in offsets]
            ids.append(list(text_ids))
            starts.append(
                [
                    int(index == 0 or (not continues[token] and words[index] != words[index - 1]))
                    for index, token in enumerate(text_ids)
                ]
            )
        return ids, starts

    def word_starts(self, text: str, piece_starts: Sequence[int], by_rule: np.ndarray) -> list[int]:
        """1 for each piece that starts a word of `text`: its first character is in another word than the previous
        piece's, or the original rule (`by_rule`) says it starts one."""
        ends = self.word_ends(text)
        words = [bisect.bisect_right(ends, start) for start in piece_starts]
        return [int(index == 0 or by_rule[index] or words[index] != words[index - 1]) for index in range(len(words))]

    def word_ends(self, text: str) -> list[int]:
        """The end offset of each word of `text`, spaces before a word counted in it; the text must be the words'."""
        return segment_word_ends(self.segment, text, self.name)


def piece_rule_table(tokenizer) -> np.ndarray:
    """Per id, whether the tokenizer's own rule makes the piece start a word (special pieces do): for SentencePiece
    the original ALBERT's ([`is_start_piece`]), for WordPiece BERT's (every piece but a "##" continuation)."""
    if continuation_prefix(tokenizer) is not None:
        table = ~continuation_table(tokenizer)
    else:
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        table = np.array([is_start_piece(piece) for piece in pieces], dtype=bool)
    table[sorted(set(tokenizer.all_special_ids))] = True
    return table


def continuation_table(tokenizer) -> np.ndarray:
    """Per id, whether the piece continues a word: a WordPiece "##" piece (all False for other tokenizers)."""
    prefix = continuation_prefix(tokenizer)
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return np.array([bool(prefix) and piece.startswith(prefix) for piece in pieces], dtype=bool)


def unspaced_language(texts: Sequence[str]) -> str | None:
    """The language of `texts` when its script writes no spaces between words (Japanese, Chinese: the languages a
    segmenter ships for), else None. Whole-word masking and token classification ask the same question."""
    language = script_language(texts)
    return language if language in SEGMENTERS else None


# Characters of scripts written without spaces between words: CJK radicals, symbols and punctuation (the
# ideographic space included), kana, bopomofo, the ideographs and their extensions, compatibility forms, and the
# full-width and half-width forms Japanese and Chinese text uses for Latin letters, digits and kana. Hangul is not
# among them: Korean separates its words with spaces.
UNSPACED_CHARACTER = re.compile(
    "[\u2e80-\u2fff\u3000-\u30ff\u3100-\u312f\u31a0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]"
)


def resolve_word_segmenter(
    word_segmenter: str | WordSegmentation | None, texts: Sequence[str] = (), tokenizer=None
) -> WordSegmenter | None:
    """The segmenter for a corpus, or None for the original "▁" rule.

    `word_segmenter` is None or "auto" (the segmenter `tokenizer` carries, for a word-bounded vocabulary: its pieces
    stop at those words; otherwise chosen from the script of `texts`: Japanese -> fugashi/unidic-lite, Chinese ->
    jieba, anything else -> the "▁" rule), "pieces" (the "▁" rule), "fugashi" or "jieba", a function, or the
    "package.module:function" name of one. A shipped segmenter whose package is missing is an error that says what
    to install: masking Japanese by pieces is what whole-word masking exists to avoid, so it is never done silently.
    """
    carried = getattr(tokenizer, "word_segmenter", None)
    by_option = {segmenter.option: segmenter for segmenter in SEGMENTERS.values()}
    if carried is not None and word_segmenter not in (None, "auto", carried, PIECE_RULE):
        logger.warning(
            "--word_segmenter %s: the tokenizer's pieces stop at the words of %s, so whole-word masking by other "
            "words masks pieces of them",
            word_segmenter if isinstance(word_segmenter, str) else getattr(word_segmenter, "__qualname__", "?"),
            carried,
        )
    if carried is not None and word_segmenter in (None, "auto"):
        return _shipped(by_option[carried], "the tokenizer's words")
    if word_segmenter is None or word_segmenter == "auto":
        segmenter = SEGMENTERS.get(script_language(texts))
        return None if segmenter is None else _shipped(segmenter, f"{segmenter.language} text")
    if word_segmenter == PIECE_RULE:
        return None
    if callable(word_segmenter):
        return WordSegmenter(f"{word_segmenter.__module__}:{word_segmenter.__qualname__}", word_segmenter)
    if word_segmenter in by_option:
        return _shipped(by_option[word_segmenter], f"--word_segmenter {word_segmenter}")
    function = import_function(word_segmenter, "word segmenter", "'auto', 'pieces', 'fugashi', 'jieba'")
    return WordSegmenter(word_segmenter, function)


def _shipped(segmenter: Segmenter, reason: str) -> WordSegmenter:
    for module in segmenter.modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ImportError(
                f"{reason}: whole-word masking finds its words with {segmenter.name}, which is not installed "
                f'({error}). Install it with `pip install "albert_hf[{segmenter.extra}]"`, or pass --word_segmenter '
                "package.module:function (your own segmenter) or --word_segmenter pieces (mask by SentencePiece "
                "pieces: most masked words are then punctuation)."
            ) from error
    return WordSegmenter(segmenter.name, segmenter.segment)


def describe_word_segmenter(segmenter: WordSegmenter | None, tokenizer=None) -> str:
    """What the log says word boundaries come from: the segmenter, else the tokenizer's own rule."""
    if segmenter is not None:
        return segmenter.name
    return WORDPIECE_RULE_DESCRIPTION if continuation_prefix(tokenizer) is not None else PIECE_RULE_DESCRIPTION


# ---- what a vocabulary whose pieces run across words costs a span task ------------------------------------------------


def edges_inside_pieces(tokenizer, texts: Sequence[str], edges: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(how many of `edges` fall strictly inside a piece of `tokenizer`, how many there are): `edges[i]` are
    character offsets into `texts[i]` where a span starts or ends (an answer, an entity). A span with such an edge
    can never be a whole number of pieces, so a span head cannot predict it exactly, whatever it learns."""
    inside = total = 0
    if not texts:
        return inside, total
    encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    for offsets, text_edges in zip(encoded["offset_mapping"], edges):
        starts = [start for start, _ in offsets]
        for edge in text_edges:
            total += 1
            piece = bisect.bisect_right(starts, edge) - 1  # the last piece that starts at or before the edge
            inside += piece >= 0 and starts[piece] < edge < offsets[piece][1]
    return inside, total


def log_edges_inside_pieces(
    tokenizer, split: str, spans: tuple[str, str], texts: Sequence[str], edges: Sequence[Sequence[int]]
) -> tuple[int, int]:
    """Logs once, for a split of text written without spaces, the share of its spans' edges that fall inside a piece
    ([`edges_inside_pieces`]), and for a vocabulary whose pieces may run across words, what to do about it.
    `spans` names them in the message, singular and plural (("answer", "answers")). Returns (inside, total)."""
    span, plural = spans
    inside, total = edges_inside_pieces(tokenizer, texts, edges)
    if not total:
        return inside, total
    carried = getattr(tokenizer, "word_segmenter", None)
    share = f"{inside} of the {total} {span} edges ({inside / total:.1%}) of the {split} split fall inside a piece"
    if not inside:
        logger.info("None of the %d %s edges of the %s split falls inside a piece.", total, span, split)
    elif carried is None:
        logger.warning(
            "%s of this vocabulary, whose pieces run across words: those %s can never be predicted exactly. A "
            "word-bounded vocabulary stops its pieces at words (albert-hf train-tokenizer, the default for Japanese "
            "and Chinese where fugashi or jieba is installed).",
            share,
            plural,
        )
    else:
        logger.info("%s: those %s start or end inside a word of %s.", share, plural, carried)
    return inside, total
