"""Whole-word masking statistics before/after word segmentation: SentencePiece's "▁" rule vs real word boundaries.

For each corpus, 1,000 sentence-order instances (length 128, 20 predictions at most) are masked by `DataCollatorForSOP` twice: with the word
starts of the "▁" rule (the original's), and with those of the corpus' word segmenter (`--word_segmenter auto`:
fugashi/unidic-lite for Japanese, jieba for Chinese, the "▁" rule itself for English). Printed side by side: the share
of tokens masked, the pieces per word (mean, median, max), the punctuation share of the masked tokens against that of
the text, and the lengths of the n-gram spans the sampler places while the budget could still hold any 3-gram (the
paper's p(n) = 6/11, 3/11, 2/11 = 0.545, 0.273, 0.182).

    python benchmarks/masking_stats.py                       # the Japanese novel, the Chinese fixture, Botchan
    python benchmarks/masking_stats.py --corpus ja --character_coverage 0.9995

Vocabularies: the Japanese novel's by `train_tokenizer`'s defaults at 8,000 pieces (as measured in docs/japanese.md),
the Chinese fixture's by its defaults at 1,000 pieces (a 3,900-character text holds no more than 1,065), ALBERT's 30k for English.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

from albert_hf.data.collator import DataCollatorForSOP, sample_ngram_spans
from albert_hf.data.masking_stats import masking_statistics
from albert_hf.data.sentence_order import build_pretraining_dataset, load_text_documents
from albert_hf.data.word_segmentation import describe_word_segmenter, resolve_word_segmenter
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.vocabulary import train_tokenizer

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("ALBERT_HF_SHARED_DATA", ROOT.parent / "shared" / "data"))
CORPORA = {
    # name: (text file, lines are paragraphs, vocabulary size to train or None for ALBERT's 30k)
    "ja": (SHARED / "corpus" / "ja" / "wagahai_wa_neko_de_aru.txt", False, 8000),
    "zh": (ROOT / "tests" / "data" / "chinese_lu_xun_nahan.txt", True, 1000),
    "en": (SHARED / "corpus" / "botchan.txt", False, None),
}
NGRAM_PROBS = np.array([6 / 11, 3 / 11, 2 / 11])


def tokenizer_for(name: str, work_dir: Path, character_coverage: float | None) -> AlbertHFTokenizer:
    path, _, vocab_size = CORPORA[name]
    if vocab_size is None:
        return AlbertHFTokenizer(vocab_file=str(SHARED / "spiece" / "albert-30k-clean.model"))
    options = {} if character_coverage is None else {"character_coverage": character_coverage}
    # Pieces as SentencePiece learns them from the raw text (across words), as the tables of docs/japanese.md were
    # measured; benchmarks/word_bounded_vocabulary.py measures the word-bounded vocabularies.
    options["word_segmenter"] = "none"
    return train_tokenizer(path, work_dir / f"{name}-tokenizer", vocab_size=vocab_size, show_progress=False, **options)


def span_length_shares(collator: DataCollatorForSOP, features: list[dict], draws: int = 4) -> np.ndarray:
    """Shares of 1-, 2- and 3-word spans placed while the remaining budget could hold any 3-gram (the collator's
    distribution test), over `draws` independent samplings of each instance."""
    rng, lengths = np.random.default_rng(0), []
    for feature in features:
        ids = np.asarray(feature["input_ids"])
        starts = feature.get("word_starts")
        _, word_lengths, word_segments = collator.words(ids, None if starts is None else np.asarray(starts))
        if len(word_lengths) < 3:
            continue
        pieces_before = np.concatenate([[0], np.cumsum(word_lengths)])
        largest_trigram = (pieces_before[3:] - pieces_before[:-3]).max()
        budget = collator.budget(len(ids))
        for _ in range(draws):
            remaining = budget
            for first, n in sample_ngram_spans(word_lengths, word_segments, budget, NGRAM_PROBS, rng):
                if remaining >= largest_trigram:
                    lengths.append(n)
                remaining -= pieces_before[first + n] - pieces_before[first]
    lengths = np.array(lengths)
    return np.array([(lengths == n).mean() if len(lengths) else np.nan for n in (1, 2, 3)]), len(lengths)


def measure(name: str, work_dir: Path, args: argparse.Namespace) -> list[tuple[str, ...]]:
    path, paragraphs, _ = CORPORA[name]
    tokenizer = tokenizer_for(name, work_dir, args.character_coverage)
    documents = load_text_documents(path, split_lines=paragraphs)
    sample = [
        sentence for document in documents.select(range(min(200, len(documents))))["sentences"] for sentence in document
    ]
    segmenter = resolve_word_segmenter("auto", sample)
    rows = []
    for label, chosen in (("piece rule", None), ("word segmenter", segmenter)):
        dataset = build_pretraining_dataset(
            documents, tokenizer, max_seq_length=args.max_seq_length, dupe_factor=10, word_segmenter=chosen
        )
        features = [dataset[i] for i in range(min(args.instances, len(dataset)))]
        collator = DataCollatorForSOP(tokenizer, max_predictions_per_seq=args.max_predictions_per_seq, seed=0)
        stats = masking_statistics(collator, features, describe_word_segmenter(chosen))
        word_lengths = np.concatenate(
            [
                collator.words(
                    np.asarray(f["input_ids"]), np.asarray(f["word_starts"]) if "word_starts" in f else None
                )[1]
                for f in features
            ]
        )
        shares, spans = span_length_shares(collator, features)
        rows.append(
            (
                f"{name} {label}",
                stats.source,
                f"{len(features)}",
                f"{stats.masked_share:.1%}",
                f"{word_lengths.mean():.2f} / {np.median(word_lengths):.0f} / {word_lengths.max()}",
                f"{stats.punctuation_share_of_masks:.1%} / {stats.punctuation_share_of_text:.1%}",
                " ".join(f"{share:.3f}" for share in shares) + f" ({spans})",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", nargs="+", choices=sorted(CORPORA), default=["ja", "zh", "en"])
    parser.add_argument("--character_coverage", type=float, help="for the trained vocabularies (default: ALBERT's)")
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--work_dir", help="where the trained vocabularies go (default: a temporary folder)")
    args = parser.parse_args()
    header = (
        "corpus / rule",
        "word boundaries",
        "instances",
        "masked",
        "pieces per word (mean / median / max)",
        "punctuation: masks / text",
        "span lengths 1 2 3 (spans)",
    )
    with tempfile.TemporaryDirectory() as temporary:
        work_dir = Path(args.work_dir or temporary)
        rows = [row for name in args.corpus for row in measure(name, work_dir, args)]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
