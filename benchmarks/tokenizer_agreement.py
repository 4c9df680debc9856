"""Agreement of `albert_hf.AlbertHFTokenizer` with the original ALBERT algorithm and with transformers' AlbertTokenizer.

Every text of the shared data folder (all GLUE sentences, SQuAD contexts and questions, CoNLL-2003 sentences, the
pretraining corpora and transformers' text samples) is encoded, without special tokens, by:

- google-research's own code (`tests/helpers/tokenization_reference.py`: the albert-tensorflow wheel's `preprocess_text`
  with lower=True and `FullTokenizer.tokenize`, as run_classifier.py runs them),
- albert_hf's AlbertHFTokenizer with `split_special_tokens=True` (text is text, as in the original),
- transformers' AlbertTokenizer (v5, Rust backend) on the same spiece.model, also with `split_special_tokens=True`.

The table gives, per source, the examples checked and the examples whose ids differ. Differences from the original are
split into the listed float32 ties (`tests/fixtures/tokenizer/known_ties.json`: the same text cut into pieces of equal
or near-equal score; SentencePiece sums scores in float32 over the whole text) and others (expected 0, each printed).
Differences of transformers' tokenizer are sorted by their first explaining cause:

- user-defined symbols: transformers 5 turns the model's user-defined pieces ( ) " - . – £ € into special added
  tokens, split out before normalization, so the word after them gets a "▁" ("(hello" -> "(" "▁hello" instead of
  "▁" "(" "hello");
- digit-comma re-split: transformers keeps pieces like "▁1990," that the original splits into "▁1990" ",";
- other: anything else (whitespace and accent handling).

    python benchmarks/tokenizer_agreement.py [--data_dir ../shared/data]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import sentencepiece as spm
from transformers import AlbertTokenizer as TransformersAlbertTokenizer

from albert_hf.tokenization import AlbertHFTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.tokenization_reference import TEXT_SOURCES, preprocess_text, reference_pieces  # noqa: E402

KNOWN_TIES_FILE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tokenizer" / "known_ties.json"

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
USER_DEFINED = ("(", ")", '"', "-", ".", "–", "£", "€")


def transformers_difference_kind(sp, text: str) -> str:
    """The first cause that explains why transformers' ids differ on `text`."""
    normalized = preprocess_text(text)
    if any(symbol in normalized for symbol in USER_DEFINED):
        return "user-defined symbols"
    raw_pieces = sp.encode(normalized, out_type=str)
    if any(len(p) > 1 and p[-1] == "," and p[-2].isdigit() for p in raw_pieces):
        return "digit-comma re-split"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--batch_size", type=int, default=2000)
    args = parser.parse_args()

    model_file = args.data_dir / "spiece" / "albert-30k-clean.model"
    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    ours = AlbertHFTokenizer(vocab_file=str(model_file))
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(model_file, Path(folder) / "spiece.model")
        theirs = TransformersAlbertTokenizer.from_pretrained(folder)

    known_ties = {entry["key"] for entry in json.loads(KNOWN_TIES_FILE.read_text(encoding="utf-8"))}
    rows, examples = [], Counter()
    for source, read_texts in TEXT_SOURCES.items():
        started = time.perf_counter()
        texts = list(read_texts(args.data_dir))
        counts, kinds = Counter(), Counter()
        for start in range(0, len(texts), args.batch_size):
            batch = texts[start : start + args.batch_size]
            reference = [[sp.piece_to_id(p) for p in pieces] for pieces in reference_pieces(sp, batch)]
            our_ids = ours(batch, add_special_tokens=False, split_special_tokens=True)["input_ids"]
            their_ids = theirs(batch, add_special_tokens=False, split_special_tokens=True)["input_ids"]
            for text, expected, mine, other in zip(batch, reference, our_ids, their_ids):
                if mine != expected:
                    listed = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] in known_ties
                    counts["near-tie" if listed else "ours other"] += 1
                    if not listed:
                        examples[f"{source}: {text[:120]!r}"] += 1
                if other != expected:
                    counts["transformers"] += 1
                    kinds[transformers_difference_kind(sp, text)] += 1
        rows.append((source, len(texts), counts, kinds, time.perf_counter() - started))

    print(
        "| source | examples | ≠ original (listed ties / other) | transformers ≠ original | transformers: "
        "user-defined / digit-comma / other | seconds |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    total, total_counts, total_kinds = 0, Counter(), Counter()
    for source, n, counts, kinds, seconds in rows:
        total, total_counts, total_kinds = total + n, total_counts + counts, total_kinds + kinds
        print(
            f"| {source} | {n:,} | {counts['near-tie']} / {counts['ours other']} | "
            f"{counts['transformers']:,} ({counts['transformers'] / n:.1%}) | "
            f"{kinds['user-defined symbols']:,} / {kinds['digit-comma re-split']:,} / {kinds['other']:,} | "
            f"{seconds:.0f} |"
        )
    print(
        f"| all | {total:,} | {total_counts['near-tie']} / {total_counts['ours other']} | "
        f"{total_counts['transformers']:,} ({total_counts['transformers'] / total:.1%}) | "
        f"{total_kinds['user-defined symbols']:,} / {total_kinds['digit-comma re-split']:,} / "
        f"{total_kinds['other']:,} | |"
    )
    for example in examples:
        print("differs from the original (not a near-tie):", example)


if __name__ == "__main__":
    main()
