"""Every `albert-hf <command> --help` and every examples/*/run_*.py --help prints its options and exits 0.

argparse formats help strings with `%`, so a bare `%` in any option's help only fails when --help is asked for: each
command is asked here, in process (fast), and the installed console script once through a subprocess.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from albert_hf.cli import COMMANDS, main

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_SCRIPTS = sorted(REPO_ROOT.glob("examples/*/run_*.py"))


def test_every_example_script_is_listed():
    assert len(EXAMPLE_SCRIPTS) >= 5, EXAMPLE_SCRIPTS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_command_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "--help" in out, out[:500]


@pytest.mark.parametrize("script", EXAMPLE_SCRIPTS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_example_script_help(script, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(script), run_name="__main__")
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "--help" in out, out[:500]


def test_console_script_lists_every_command():
    result = subprocess.run(
        [sys.executable, "-m", "albert_hf.cli", "--help"], capture_output=True, text=True, timeout=120, check=True
    )
    for command in COMMANDS:
        assert command in result.stdout
