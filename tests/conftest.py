"""pytest's hooks and fixtures for the whole suite: the two tiers, the data fixture, derandomized property tests, a
small CPU budget per test process, the end of every process a test starts, and the optional dependencies. What tests
import lives in the `helpers` package (tests/helpers/); nothing imports from this file.

Tiers. `python -m pytest` runs the fast tier: every test not marked `slow` (a test marked `distributed`, which starts
several processes, is `slow` too). `python -m pytest --full` runs every test, the slow ones included; CI runs that
(.ci/run). A new test is in the fast tier unless it is marked; CONTRIBUTING.md says when to mark one.

Data. Tests that take `shared_data` run on the full data where `../shared/data` (or `$ALBERT_HF_SHARED_DATA`)
exists, else on the repository's excerpts (helpers/data.py); they are marked `data` (`-m data` selects them).

Processes. Every process a test starts goes through helpers/processes.py, which ends its whole tree; after each test
whatever that test started and did not end is ended, and at the end of the run any process of the run still alive
fails it.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest
import torch
from helpers import optional, processes
from helpers.data import FIXTURES, REQUIRE_DATA, SHARED_DATA, SPIECE_MODEL, data_roots
from hypothesis import HealthCheck, settings

# Two threads per test process at most, as before the tests ran on pytest-xdist's workers: the learning checks'
# float reductions (and so their trajectories) depend on the thread count.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

# Property tests draw their examples from a fixed seed, so a green (or red) run replays exactly anywhere;
# HYPOTHESIS_PROFILE=thorough draws 10x more fresh examples (failures kept in .hypothesis/) to search for new bugs.
_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
settings.register_profile("default", max_examples=25, derandomize=True, deadline=None, suppress_health_check=_HEALTH)
settings.register_profile("thorough", max_examples=250, deadline=None, suppress_health_check=_HEALTH)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_generate_tests(metafunc):
    if "shared_data" in metafunc.fixturenames:
        metafunc.parametrize("shared_data", data_roots(), indirect=True, scope="session")


def pytest_addoption(parser):
    parser.addoption(
        "--full",
        action="store_true",
        help="run the full tier: every test, the slow ones (kills and resumes, several processes, learning checks) too",
    )


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the run itself, not one of pytest-xdist's workers
        processes.mark_run()


def pytest_collection_modifyitems(config, items):
    """Mark every test that reads the data folder `data`: the only tests whose run differs between a bare clone (the
    excerpts) and a checkout beside the full folder, so `-m data` is the set a bare clone must prove (.ci/run).
    A multi-process test is slow; without --full the slow tests are deselected (the fast tier)."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.data)
        if item.get_closest_marker("distributed") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    if config.getoption("full"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def pytest_report_header(config):
    where = SHARED_DATA if SHARED_DATA.is_dir() else f"{SHARED_DATA} absent"
    tier = "full (every test)" if config.getoption("full") else "fast (the slow tests deselected; --full runs them)"
    return [
        f"albert_hf tier: {tier}",
        f"albert_hf data roots: {', '.join(data_roots())} (full data: {where}; required: {REQUIRE_DATA})",
    ]


@pytest.hookimpl(tryfirst=True)  # before the fixtures: a skipped test builds none
def pytest_runtest_setup(item):
    optional.check(item)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_CPU_AT_START] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each test's CPU seconds (this process and the processes it waited for, setup and teardown included) as the
    `cpu_s` property of its report, which the JUnit XML keeps (benchmarks/suite_times.py reads it): wall times
    depend on what else the machine runs, CPU seconds far less."""
    outcome = yield
    if call.when == "teardown" and _CPU_AT_START in item.stash:
        outcome.get_result().user_properties.append(("cpu_s", round(_cpu_seconds() - item.stash[_CPU_AT_START], 2)))


_CPU_AT_START = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@pytest.fixture(autouse=True)
def end_started_processes():
    """Whatever a test started through helpers/processes.py and did not end is ended when it finishes, passed or
    failed: its whole process tree."""
    yield
    processes.end_started()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """Fail the run if a process that one of its tests started is still alive (after pytest-xdist's workers have
    stopped): name each one and the test that started it, then end it."""
    if hasattr(session.config, "workerinput"):
        return
    deadline = time.monotonic() + 10  # a process killed a moment ago may take that long to go
    left = processes.leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = processes.leftovers()
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(left)} process(es) that tests started were still running at the end of the run:"]
    lines += [f"  {processes.describe(process)}" for process in left]
    if reporter is not None:
        reporter.write_sep("=", "processes left running", red=True)
        for line in lines:
            reporter.write_line(line)
    else:
        print("\n".join(lines))
    processes.kill(left)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


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


@pytest.fixture(autouse=True)
def release_output_folder_locks():
    """A job run in process (`main(argv)`) holds the lock of its --output_dir until its command ends, which `albert-hf`
    marks and a test does not: release the locks after each test, so a later process may write into the folder."""
    yield
    from albert_hf.training.run_folder import release_held_locks

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


@pytest.fixture
def fake_hub(monkeypatch):
    """`fake_hub(fail=None)`: a `helpers.hub.FakeHfApi` in place of transformers' Hub client, for every call Trainer
    makes (no network)."""
    import transformers.trainer as trainer_module
    from helpers.hub import FakeHfApi

    def install(**kwargs) -> FakeHfApi:
        api = FakeHfApi(**kwargs)
        if hasattr(trainer_module, "hf_api"):  # transformers >= 5.12: one client for every call
            monkeypatch.setattr(trainer_module, "hf_api", lambda: api)
        else:  # before: huggingface_hub's functions, imported into the module
            monkeypatch.setattr(trainer_module, "create_repo", api.create_repo)
            monkeypatch.setattr(trainer_module, "upload_folder", api.upload_folder)
        return api

    return install
