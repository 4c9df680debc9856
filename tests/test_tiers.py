"""The two tiers of tests/conftest.py: without `--full` a test marked `slow` or `distributed` is deselected (the fast
tier), with it every test runs; an unmarked test is in the fast tier."""

from __future__ import annotations

import os
import sys

import pytest
from helpers import processes
from helpers.data import REPO_ROOT

TESTS = """
import pytest

def test_unmarked():
    pass

@pytest.mark.slow
def test_slow():
    pass

@pytest.mark.distributed
def test_distributed():
    pass

@pytest.mark.data
def test_data():
    pass

@pytest.mark.slow
@pytest.mark.data
def test_slow_data():
    pass
"""


def collected(tmp_path, *options: str) -> list[str]:
    """The test names a run with this suite's conftest.py collects in a file of [`TESTS`]."""
    (tmp_path / "test_tiny.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "tests"), str(REPO_ROOT)])}
    command = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "--collect-only"]
    command += ["--rootdir", str(tmp_path), *options, str(tmp_path / "test_tiny.py")]
    result = processes.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return sorted(line.split("::")[1] for line in result.stdout.splitlines() if "::" in line)


@pytest.mark.slow
def test_the_fast_tier_leaves_out_slow_and_distributed_tests_and_full_runs_all(tmp_path):
    assert collected(tmp_path) == ["test_data", "test_unmarked"]
    assert collected(tmp_path, "--full") == sorted(
        ["test_data", "test_distributed", "test_slow", "test_slow_data", "test_unmarked"]
    )
