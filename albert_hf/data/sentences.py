"""Sentences and scripts of running text: where a text's sentences end (English, Japanese and Chinese, or a splitter
of your own) and which script a corpus is written in. The sentence-order data (`albert_hf.data.sentence_order`), the
word segmenters (`albert_hf.data.word_segmentation`), the quickstart's corpus and the model card's language ask it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence

from ..errors import UserError

# A sentence ends at . ! or ? (plus closing quotes/brackets) followed by whitespace and an upper-case letter or a
# digit, unless the word before the period is a common abbreviation ("Mr. Knightley", "e.g. this").
_SENTENCE_BOUNDARY = re.compile(
    r"(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bDr)(?<!\bSt)(?<!\bJr)(?<!\bSr)(?<!\bvs)(?<!\be\.g)(?<!\bi\.e)(?<!\betc)"
    r"""([.!?]["')\]]*)\s+(?=["'(\[]*[A-Z0-9])"""
)
# Japanese and Chinese write no space between sentences and have no capitals, so the rule above never fires there.
# A sentence ends at 。 ！ ？ (and the half-width ｡, the full-width ．), or at a half-width . ! ? written right after a
# CJK character, then takes any further end marks or ellipsis and the closing brackets and quotes after them
# (「…。」, 『…！』, （…。）, “…。”). It does not end where the quotation runs on into the sentence, as in
# 「行くぞ！」と叫んだ (the quotative と / って follows), and a period between digits (３．５) is no end. One quotation
# right after another (「…だろう」「…」: two speakers) is two sentences even without end punctuation.
_CJK_CHARACTER = "\u3005\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\uac00-\ud7af"
_CJK_END = "。｡！？"
_CJK_MORE_END = "。｡！？．.!?…‥"
_CJK_CLOSERS = "」』）】〕〉》〗〙〛”’］｝\"')\\]"
_CJK_BOUNDARY = re.compile(
    rf"((?:[{_CJK_END}]|(?<=[{_CJK_CHARACTER}])[.!?．](?![0-9０-９]))[{_CJK_MORE_END}]*"
    rf"(?:[{_CJK_CLOSERS}]+(?![{_CJK_MORE_END}{_CJK_CLOSERS}]|と|って)|(?![{_CJK_MORE_END}{_CJK_CLOSERS}])))\s*"
    rf"|([」』])\s*(?=[「『])"
)
_BLANK_LINE = re.compile(r"\n\s*\n")
_WHITESPACE = re.compile(r"\s+")

SentenceSplitter = Callable[[str], list[str]]


def split_sentences(text: str) -> list[str]:
    """Split running text into sentences: paragraphs at blank lines, then sentences at end punctuation.

    A rule-based splitter (no model to download): good on edited English prose and on Japanese and Chinese running
    text, and its mistakes only move a sentence boundary, which costs SOP a little signal but loses no text.
    Another splitter (e.g. a wrapper around a language's own segmenter) plugs in wherever this one is used: the
    `sentence_splitter` argument of [`load_text_documents`] and [`documents_from_texts`], `--sentence_splitter
    module:function` on the command line. It takes a text and returns its sentences.
    """
    sentences = []
    for paragraph in _BLANK_LINE.split(text):
        paragraph = _WHITESPACE.sub(" ", paragraph).strip()
        if paragraph:
            marked = _SENTENCE_BOUNDARY.sub("\\1\n", paragraph)
            marked = _CJK_BOUNDARY.sub(lambda match: (match[1] or match[2]) + "\n", marked)
            sentences.extend(s.strip() for s in marked.split("\n") if s.strip())
    return sentences


_CJK_TEXT = re.compile(f"[{_CJK_CHARACTER}]")


def cjk_character_share(texts: Sequence[str]) -> float:
    """The share of non-space characters that are kana, CJK ideographs or hangul: how much of a corpus is written
    in Chinese, Japanese or Korean (no model needed, and these scripts ask for other tokenizer settings)."""
    cjk = sum(len(_CJK_TEXT.findall(text)) for text in texts)
    return cjk / max(1, sum(len("".join(text.split())) for text in texts))


_KANA = re.compile("[\u3040-\u30ff\uff66-\uff9f]")
_HANGUL = re.compile("[\uac00-\ud7af]")


def script_language(texts: Sequence[str]) -> str | None:
    """The language a corpus' script names: "ja" (kana among the CJK text), "ko" (mostly hangul) or "zh" (ideographs
    alone) for text that is mostly Chinese, Japanese or Korean (see [`cjk_character_share`]); None otherwise, since a
    Latin or Cyrillic script does not tell one language from another."""
    if cjk_character_share(texts) < 0.3:
        return None
    kana = sum(len(_KANA.findall(text)) for text in texts)
    hangul = sum(len(_HANGUL.findall(text)) for text in texts)
    cjk = sum(len(_CJK_TEXT.findall(text)) for text in texts)
    if hangul > cjk / 2:
        return "ko"
    # Japanese writes its grammatical words in kana: a tenth of the CJK characters at least, in any real text.
    return "ja" if kana >= cjk / 10 else "zh"


def resolve_sentence_splitter(splitter: str | SentenceSplitter | None) -> SentenceSplitter:
    """A splitter from its name: None or "default" is [`split_sentences`]; "package.module:function" imports one.

    The named function must be importable in every process that reads text (datasets' workers re-import it).
    """
    if splitter is None or splitter == "default":
        return split_sentences
    if callable(splitter):
        return splitter
    return import_function(splitter, "sentence splitter", "'default'")


def import_function(name: str, what: str, alternatives: str) -> Callable:
    """The function a "package.module:function" name points to: how text-processing steps plug in (sentence
    splitters, word segmenters). `what` and `alternatives` name the option and its other values in errors."""
    module_name, _, function_name = name.partition(":")
    if not module_name or not function_name:
        raise UserError(f"{what} {name!r}: expected {alternatives} or 'package.module:function'.")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as error:
        raise UserError(f"{what} {name!r} cannot be imported: {error}") from error
    if not callable(function):
        raise UserError(f"{what} {name!r} is not a function.")
    return function
