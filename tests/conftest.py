"""Shared test fixtures: the real data beside the project, and a small CPU budget per test process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
SPIECE_MODEL = SHARED_DATA / "spiece" / "albert-30k-clean.model"
SMALL_SPIECE_MODEL = SHARED_DATA / "spiece" / "test_sentencepiece.model"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (or $ALBERT_HF_SHARED_DATA); tests needing it skip with the reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is not present (set ALBERT_HF_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def spiece_model(shared_data) -> Path:
    """The real ALBERT 30k SentencePiece model."""
    return shared_data / "spiece" / "albert-30k-clean.model"


@pytest.fixture(scope="session")
def wikitext_articles(shared_data, tmp_path_factory):
    """`write(n)`: a file with the first n WikiText-2 validation articles (one paragraph per line, a blank line
    between articles), the small real corpus the pretraining tests train on."""
    text = (shared_data / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(encoding="utf-8")

    def write(articles: int) -> Path:
        path = tmp_path_factory.mktemp("corpus") / f"wikitext_head_{articles}.txt"
        path.write_text("\n\n".join(text.split("\n\n")[:articles]) + "\n", encoding="utf-8")
        return path

    return write
