"""The repository's data fixtures are what tests/fixtures/README.md says: exact excerpts of the full data folder,
small, with the real ALBERT vocabulary."""

from __future__ import annotations

import hashlib
import json

from fixtures import make_fixtures
from helpers.data import FIXTURES, SPIECE_MODEL, is_full

# sha256 of albert-base-v2's spiece.model (= Google's 30k-clean.model), from the full data folder's provenance.
ALBERT_SPIECE_SHA256 = "fefb02b667a6c5c2fe27602d28e5fb3428f66ab89c7d6f388e7c8d44a02d0336"


def test_fixture_vocabulary_is_the_real_albert_model():
    assert hashlib.sha256(SPIECE_MODEL.read_bytes()).hexdigest() == ALBERT_SPIECE_SHA256


def test_fixtures_stay_small_and_documented():
    files = [path for path in FIXTURES.rglob("*") if path.is_file() and "__pycache__" not in path.parts]
    assert sum(path.stat().st_size for path in files) < 3_000_000
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for path in files:
        if path.suffix not in (".md", ".py"):
            top = path.relative_to(FIXTURES).parts[0]
            assert f"`{top}/" in readme, f"{path} is not described in tests/fixtures/README.md"


def test_fixtures_are_the_documented_excerpts(shared_data):
    """On the excerpts: the documented sizes. With the full folder: each is an exact head of its full file."""
    if not is_full(shared_data):
        for task in make_fixtures.GLUE_TASKS:
            for split, rows in make_fixtures.GLUE_ROWS.items():
                lines = (FIXTURES / "glue" / task / split).read_text(encoding="utf-8").splitlines()
                header = 0 if split in make_fixtures.HEADERLESS.get(task, ()) else 1
                assert len(lines) == (71 + header if (task, split) == ("WNLI", "dev.tsv") else rows + header)
        squad = json.loads((FIXTURES / "squad" / "dev-v1.1-part-a.json").read_text(encoding="utf-8"))["data"]
        assert [article["title"] for article in squad] == ["Super_Bowl_50", "Warsaw"]
        wikitext = (FIXTURES / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(encoding="utf-8")
        assert len(wikitext.strip("\n").split("\n\n")) == make_fixtures.WIKITEXT_ARTICLES
        novel = (FIXTURES / "corpus" / "ja" / "wagahai_wa_neko_de_aru.txt").read_text(encoding="utf-8")
        assert len(novel.splitlines()) == make_fixtures.JAPANESE_LINES
        return
    for path in sorted(FIXTURES.rglob("*")):
        relative = path.relative_to(FIXTURES)
        if (
            not path.is_file()
            or path.suffix in (".md", ".py", ".pyc")
            or relative.parts[0] in ("conll2003", "tokenizer")
        ):
            continue  # conll2003: transformers' sample in CoNLL layout (checked below); tokenizer: recorded ties
        full = shared_data / relative
        if relative.name == "dev-v1.1-part-a.json":  # the first articles of the official JSON
            articles = json.loads(path.read_text(encoding="utf-8"))["data"]
            assert articles == json.loads(full.read_text(encoding="utf-8"))["data"][: len(articles)]
        elif relative.name == "gutenberg_paragraphs.txt":  # the head of each of the first books
            books = path.read_text(encoding="utf-8").strip("\n").split("\n\n")
            full_books = full.read_text(encoding="utf-8").split("\n\n")
            assert all(full_book.startswith(book) for book, full_book in zip(books, full_books, strict=False))
        else:
            assert full.read_bytes().startswith(path.read_bytes().rstrip(b"\n")), relative
    sample = (shared_data / "hf-samples" / "conll" / "sample.json").read_text(encoding="utf-8").splitlines()
    words = [line.split()[0] for line in (FIXTURES / "conll2003" / "valid.txt").read_text().splitlines()[2:] if line]
    assert words == [word for line in sample for word in json.loads(line)["words"]]
