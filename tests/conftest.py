"""Shared test fixtures: the real data (the repository's small excerpts, and the full folder beside the project when
present), derandomized property tests, and a small CPU budget per test process.

Data. `tests/fixtures/` holds exact excerpts of the full data folder in the same layout (sources and licences in its
README.md), so every test runs from a bare clone. Tests that take `shared_data` run on the full data where `../shared/data`
(or `$ALBERT_HF_SHARED_DATA`) exists, else on the excerpts. With `ALBERT_HF_REQUIRE_DATA=1`
(set by CI) a missing full data folder fails those runs instead of leaving them out.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
SHARED_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
REQUIRE_DATA = os.environ.get("ALBERT_HF_REQUIRE_DATA", "") not in ("", "0")
# The real ALBERT 30k SentencePiece model (a byte-identical copy of the full folder's).
SPIECE_MODEL = FIXTURES / "spiece" / "albert-30k-clean.model"

# Property tests draw their examples from a fixed seed, so a green (or red) run replays exactly anywhere;
# HYPOTHESIS_PROFILE=thorough draws 10x more fresh examples (failures kept in .hypothesis/) to search for new bugs.
_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
settings.register_profile("default", max_examples=25, derandomize=True, deadline=None, suppress_health_check=_HEALTH)
settings.register_profile("thorough", max_examples=250, deadline=None, suppress_health_check=_HEALTH)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


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


def pytest_generate_tests(metafunc):
    if "shared_data" in metafunc.fixturenames:
        metafunc.parametrize("shared_data", data_roots(), indirect=True, scope="session")


def pytest_collection_modifyitems(config, items):
    """Mark every test that reads the data folder `data`: the only tests whose run differs between a bare clone (the
    excerpts) and a checkout beside the full folder, so `-m data` is the set a bare clone must prove (.ci/run)."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.data)


def pytest_report_header(config):
    where = SHARED_DATA if SHARED_DATA.is_dir() else f"{SHARED_DATA} absent"
    return f"albert_hf data roots: {', '.join(data_roots())} (full data: {where}; required: {REQUIRE_DATA})"


@pytest.fixture(scope="session")
def shared_data(request) -> Path:
    """The real data folder: the repository's excerpts ("fixtures"), or the full folder ("full")."""
    if request.param == "fixtures":
        return FIXTURES
    if not SHARED_DATA.is_dir():
        pytest.fail(f"ALBERT_HF_REQUIRE_DATA is set but the full data folder {SHARED_DATA} is missing.")
    return SHARED_DATA


@pytest.fixture(scope="session")
def spiece_model() -> Path:
    """The real ALBERT 30k SentencePiece model."""
    return SPIECE_MODEL


@pytest.fixture(scope="module")
def tokenizer(spiece_model):
    """albert_hf's tokenizer on the real ALBERT 30k vocabulary (one per test module)."""
    from albert_hf.tokenization import AlbertHFTokenizer

    return AlbertHFTokenizer(vocab_file=str(spiece_model))


@pytest.fixture(scope="session")
def wikitext_articles(tmp_path_factory):
    """`write(n)`: a file with the first n WikiText-2 validation articles (one paragraph per line, a blank line
    between articles), the small real corpus the pretraining tests train on."""
    text = (FIXTURES / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(encoding="utf-8")
    articles = text.split("\n\n")

    def write(count: int) -> Path:
        if count > len(articles):
            raise ValueError(f"the WikiText fixture holds {len(articles)} articles, not {count}")
        path = tmp_path_factory.mktemp("corpus") / f"wikitext_head_{count}.txt"
        path.write_text("\n\n".join(articles[:count]).rstrip("\n") + "\n", encoding="utf-8")
        return path

    return write


# --------------------------------------------------------------------------------------------------------------------
# Tiny models
# --------------------------------------------------------------------------------------------------------------------

# The tiny ALBERT of the model-level tests: one shared layer group applied 4 times, an embedding size E below the
# hidden size H (so the E -> H projection is exercised), H split over several heads, and odd sizes (vocabulary 99,
# feed-forward 37) so that no two dimensions can be confused. Files that need other fields override them by name.
TINY_CONFIG = dict(
    vocab_size=99,
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
)

# `--config_overrides` of the job tests, on top of a real preset, so that a whole job runs in seconds on a CPU: one
# layer for the fine-tuning jobs (GLUE, NER, SQuAD, multiple choice); two layer applications for pretraining and the
# crash/resume tests, which add their own dropout settings.
TINY_ONE_LAYER_OVERRIDES = (
    "hidden_size=32,num_attention_heads=2,intermediate_size=64,num_hidden_layers=1,embedding_size=16"
)
TINY_TWO_LAYER_OVERRIDES = (
    "embedding_size=16,hidden_size=32,num_attention_heads=2,intermediate_size=64,num_hidden_layers=2,"
    "max_position_embeddings=64"
)


def tiny_config(**overrides):
    """`AlbertConfig` of [`TINY_CONFIG`] with `overrides`."""
    from albert_hf import AlbertConfig

    return AlbertConfig(**{**TINY_CONFIG, **overrides})


@pytest.fixture(autouse=True)
def release_output_folder_locks():
    """A job run in process (`main(argv)`) holds the lock of its --output_dir until its command ends, which `albert-hf`
    marks and a test does not: release the locks after each test, so a later process may write into the folder."""
    yield
    from albert_hf.run_folder import release_held_locks

    release_held_locks()


@pytest.fixture(autouse=True)
def restore_logger_settings():
    """Jobs run in process set the levels of albert_hf's and the libraries' loggers (and a library may turn on its
    propagation to the root logger, where `caplog` listens): put every logger back as it was, so that what a test
    sees in its logs does not depend on which tests ran before it."""
    loggers = [logger for logger in logging.root.manager.loggerDict.values() if isinstance(logger, logging.Logger)]
    saved = [(logger, logger.level, logger.propagate, logger.disabled, list(logger.handlers)) for logger in loggers]
    root_level = logging.root.level
    yield
    for logger, level, propagate, disabled, handlers in saved:
        logger.setLevel(level)
        logger.propagate, logger.disabled, logger.handlers = propagate, disabled, handlers
    logging.root.setLevel(root_level)
