"""Where the tests' data lives.

`tests/fixtures/` holds exact excerpts of the full data folder in the same layout (sources and licences in its
README.md), so every test runs from a bare clone. Tests that take the `shared_data` fixture (tests/conftest.py) run on
the full data where `../shared/data` (or `$ALBERT_HF_SHARED_DATA`) exists, else on the excerpts. With
`ALBERT_HF_REQUIRE_DATA=1` (set by CI) a missing full data folder fails those runs instead of leaving them out.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
SHARED_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
REQUIRE_DATA = os.environ.get("ALBERT_HF_REQUIRE_DATA", "") not in ("", "0")
# The real ALBERT 30k SentencePiece model (a byte-identical copy of the full folder's).
SPIECE_MODEL = FIXTURES / "spiece" / "albert-30k-clean.model"


def data_roots() -> list[str]:
    """ "full" where the full data folder exists or is required, else the repository's excerpts ("fixtures").

    One root per run keeps the suite's time that of one pass over the data; `ALBERT_HF_DATA_ROOTS=fixtures,full` runs
    the data tests on both (the excerpts are then checked beside a full folder too)."""
    chosen = os.environ.get("ALBERT_HF_DATA_ROOTS")
    if chosen:
        return [root.strip() for root in chosen.split(",") if root.strip()]
    return ["full"] if SHARED_DATA.is_dir() or REQUIRE_DATA else ["fixtures"]


def is_full(root: Path) -> bool:
    return root != FIXTURES
