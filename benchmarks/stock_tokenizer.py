"""How a folder's tokenizer tokenizes where albert_hf is not installed, against ALBERT's original tokenization.

A folder albert_hf saves in transformers' own format holds `tokenizer.json` (`AlbertHFTokenizer.stock_tokenizer`,
`albert_hf.tokenization.stock_pipeline`), which transformers reads with `TokenizersBackend`. This compares, on held-out
text of the shared data with the real 30k ALBERT vocabulary, per corpus:

- transformers' own `AlbertTokenizer`, loaded from a folder holding the same `spiece.model` (as every ALBERT on the Hub
  is loaded, and as albert_hf's folders were read without albert_hf before), with the rule that explains each
  difference: the first of its pipeline with `` and '' left alone ("quotes"), then with albert_hf's normalizer
  (whitespace as Python's `str.split`, accents by combining class, Python's lower-casing: "normalization"), then with
  the "<digit>," pieces out of reach ("digit-comma"), that gives the exact ids; "other" when none does;
- the stock files albert_hf writes (`TokenizersBackend` on its `tokenizer.json`),

each against albert_hf's exact tokenizer as jobs call it (special-token strings in the text are those tokens, as in
every transformers tokenizer; it equals google-research's code: benchmarks/tokenizer_agreement.py), and, with
special-token strings read as text (`split_special_tokens=True`), against google-research's code itself
(`tests/helpers/tokenization_reference.py`): WikiText-2 writes its unknown words as "<unk>", which the original's
data script reads as text.

    python benchmarks/stock_tokenizer.py [--data_dir ../shared/data] [--all]

`--all` adds every text of the shared data (GLUE, SQuAD, CoNLL-2003, the English corpora: 262,000 texts, minutes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import sentencepiece as spm
import transformers
from tokenizers import Tokenizer
from transformers import TokenizersBackend

from albert_hf.tokenization import AlbertHFTokenizer, stock_pipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.tokenization_reference import TEXT_SOURCES, reference_ids  # noqa: E402

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CAUSES = ("quotes", "normalization", "digit-comma", "other")


def held_out_corpora(data_dir: Path) -> dict[str, list[str]]:
    """WikiText-2 validation paragraphs, SQuAD contexts (once each) and questions."""
    wikitext = (data_dir / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(encoding="utf-8").splitlines()
    contexts, questions = [], []
    for path in sorted((data_dir / "squad").glob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8"))["data"]:
            for paragraph in item.get("paragraphs", [item]):
                contexts.append(paragraph["context"])
                questions += [qa["question"] for qa in paragraph.get("qas", [paragraph])]
    return {
        "WikiText-2 paragraphs": [line for line in wikitext if line.strip()],
        "SQuAD contexts": list(dict.fromkeys(contexts)),
        "SQuAD questions": questions,
    }


def without_quote_rewrite(tokenizer) -> TokenizersBackend:
    """transformers' AlbertTokenizer's own pipeline without its `` / '' -> " steps."""
    data = json.loads(tokenizer.backend_tokenizer.to_str())
    steps = data["normalizer"]["normalizers"]
    data["normalizer"]["normalizers"] = [
        step for step in steps if not (step["type"] == "Replace" and step["pattern"].get("String") in ("``", "''"))
    ]
    return backend(Tokenizer.from_str(json.dumps(data)))


def backend(rust: Tokenizer) -> TokenizersBackend:
    return TokenizersBackend(
        tokenizer_object=rust,
        **dict(unk_token="<unk>", pad_token="<pad>", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]"),
        **dict(bos_token="[CLS]", eos_token="[SEP]"),
    )


def tokenizers(model_file: Path) -> dict:
    exact = AlbertHFTokenizer(vocab_file=str(model_file))
    with tempfile.TemporaryDirectory() as folder:
        # transformers' AlbertTokenizer as it loads any ALBERT folder holding spiece.model.
        shutil.copy(model_file, Path(folder) / "spiece.model")
        transformers_class = transformers.AlbertTokenizer.from_pretrained(folder)
        # albert_hf's stock files, beside a stock config, read as transformers reads them.
        transformers.AlbertConfig(vocab_size=30000).save_pretrained(Path(folder) / "saved")
        exact.save_pretrained(Path(folder) / "saved")
        files = TokenizersBackend.from_pretrained(Path(folder) / "saved")
    rust = Tokenizer.from_str(exact.backend_tokenizer.routes["rust"].to_str())
    return {
        "exact": exact,
        "transformers": transformers_class,
        # The chain of `CAUSES`: each fixes one more rule of transformers' class.
        "quotes": without_quote_rewrite(transformers_class),
        "normalization": backend(rust),
        "digit-comma": backend(stock_pipeline(rust)),
        "files": files,
    }


def ids(tokenizer, texts: list[str], split: bool) -> list[list[int]]:
    return tokenizer(texts, add_special_tokens=False, split_special_tokens=split)["input_ids"]


def measure(tokenizers_: dict, sp, texts: list[str], batch_size: int) -> tuple[Counter, Counter, list[str]]:
    """(counts of differing texts, their causes, remaining examples of the files) over `texts`."""
    counts, causes, remaining = Counter(), Counter(), []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        exact = ids(tokenizers_["exact"], batch, False)
        original = reference_ids(sp, batch)
        encoded = {name: ids(tokenizers_[name], batch, False) for name in ("transformers", *CAUSES[:3], "files")}
        as_text = {name: ids(tokenizers_[name], batch, True) for name in ("transformers", "files")}
        for index, text in enumerate(batch):
            if encoded["transformers"][index] != exact[index]:
                counts["transformers"] += 1
                causes[next((c for c in CAUSES[:3] if encoded[c][index] == exact[index]), "other")] += 1
            if encoded["files"][index] != exact[index]:
                counts["files"] += 1
                remaining.append(text)
            counts["transformers as text"] += as_text["transformers"][index] != original[index]
            counts["files as text"] += as_text["files"][index] != original[index]
    return counts, causes, remaining


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--all", action="store_true", help="also every text of the shared data, by source")
    parser.add_argument("--batch_size", type=int, default=2000)
    args = parser.parse_args()

    model_file = args.data_dir / "spiece" / "albert-30k-clean.model"
    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    chosen = tokenizers(model_file)
    corpora = held_out_corpora(args.data_dir)
    if args.all:
        corpora.update({f"all {source}": list(read(args.data_dir)) for source, read in TEXT_SOURCES.items()})

    print(f"transformers {transformers.__version__}, real 30k ALBERT vocabulary; texts whose ids differ:")
    print()
    print(
        "| corpus | texts | transformers' AlbertTokenizer ≠ exact | its rules: quotes / normalization / digit-comma / "
        "other | stock files ≠ exact | as text: AlbertTokenizer ≠ original | as text: stock files ≠ original | s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    examples = []
    for name, texts in corpora.items():
        started = time.perf_counter()
        counts, causes, remaining = measure(chosen, sp, texts, args.batch_size)
        examples += [(name, text) for text in remaining[:3]]
        n = len(texts)

        def share(count: int) -> str:
            return f"{count:,} ({count / n:.1%})"

        print(
            f"| {name} | {n:,} | {share(counts['transformers'])} | {' / '.join(f'{causes[c]:,}' for c in CAUSES)} | "
            f"{share(counts['files'])} | {share(counts['transformers as text'])} | "
            f"{share(counts['files as text'])} | {time.perf_counter() - started:.0f} |"
        )
    for name, text in examples:
        print(f"stock files differ ({name}): {text[:160]!r}")


if __name__ == "__main__":
    main()
