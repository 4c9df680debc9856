"""Running the real `albert-hf` command line in a subprocess, and what a user error must look like there.

Shared by the test modules that check refusals through the CLI (tests/test_run_folder.py, tests/test_bad_data.py) and
by benchmarks/bad_inputs.py: one message line `albert-hf <command>: error: ...` on stderr, exit status 2, no traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import processes

REPO_ROOT = Path(__file__).resolve().parents[2]
# The working tree's albert_hf (not an installed copy), offline as the tests are.
CLI_ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run_cli(argv: list[str], timeout: float = 600, **env: str) -> processes.CompletedProcess:
    """`albert-hf <argv>` in a fresh process (`python -m albert_hf.cli`), its output captured."""
    return processes.run(
        [sys.executable, "-m", "albert_hf.cli", *argv],
        capture_output=True,
        text=True,
        env={**CLI_ENV, **env},
        timeout=timeout,
    )


def error_lines(result: processes.CompletedProcess, command: str) -> list[str]:
    """The `albert-hf <command>: error: ...` lines of a run's stderr."""
    return [line for line in result.stderr.splitlines() if line.startswith(f"albert-hf {command}: error: ")]


def assert_one_line_error(result: processes.CompletedProcess, command: str, *fragments: str) -> str:
    """The run stopped with exit status 2 and one error line holding every fragment, without a traceback; returns
    that line."""
    assert result.returncode == 2, result.stderr[-3000:]
    errors = error_lines(result, command)
    assert len(errors) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]
