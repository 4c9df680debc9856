"""`albert-hf --help`, `--version` and `albert-hf <command> --help` answer without importing torch or transformers,
and list exactly the options the command's real parser accepts (besides Trainer's); `--help-all` adds Trainer's.

The light help is compared with the real parser the command runs with: the parser a command builds is captured where
argparse is asked to parse (`parse_known_args`), in process, and its option strings, minus those of a plain
`HfArgumentParser(TrainingArguments)`, are the command's own. The defaults the help shows are compared with the
values the real parse gives (the quickstart's recipe applied). argparse formats help strings with `%`, so a bare `%`
in any option's help only fails when --help is asked for: every command and example script is asked here.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import runpy
import sys
from pathlib import Path

import pytest
from helpers import processes

from albert_hf.cli import COMMANDS, main
from albert_hf.job_help import ARGPARSE_COMMANDS, HELP_ALL, JOBS

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_SCRIPTS = sorted(REPO_ROOT.glob("examples/*/run_*.py"))
HEAVY = ("torch", "transformers")
# pip's console script for `albert-hf = "albert_hf.cli:main"`, which reports at exit the heavy modules it imported.
CONSOLE_SCRIPT = f"""import atexit, re, sys
atexit.register(lambda: print("imported:", [m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr))
from albert_hf.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""
# A command line each command's parser accepts (the work never starts: the parse is captured).
MINIMAL_ARGV = {
    "pretrain": ["--output_dir", "out"],
    "quickstart": [],
    "glue": ["--task_name", "rte", "--output_dir", "out"],
    "classify": ["--output_dir", "out"],
    "ner": ["--output_dir", "out"],
    "squad": ["--output_dir", "out"],
    "multiple-choice": ["--output_dir", "out"],
    "train-tokenizer": ["corpus.txt", "--output_dir", "out"],
    "export": ["--model_name_or_path", "model", "--output_dir", "out"],
    "import": ["checkpoint", "--output_dir", "out"],
}
HELP_FLAGS = {"-h", "--help", HELP_ALL}


@pytest.fixture(scope="module")
def console_script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bin") / "albert-hf"
    path.write_text(CONSOLE_SCRIPT, encoding="utf-8")
    return path


def run_console_script(script: Path, *argv: str) -> processes.CompletedProcess:
    """`albert-hf <argv>` in a fresh process, on a wide terminal (one line per option)."""
    environment = {**os.environ, "COLUMNS": "2000"}
    return processes.run(
        [sys.executable, str(script), *argv], capture_output=True, text=True, timeout=300, env=environment
    )


def heavy_imports(result: processes.CompletedProcess) -> list[str]:
    line = [line for line in result.stderr.splitlines() if line.startswith("imported:")]
    assert len(line) == 1, result.stderr[-3000:]
    return eval(line[0].removeprefix("imported:"))  # the list the script printed


def listed_options(text: str) -> set[str]:
    """The option strings of an argparse help text: the invocation column of each option's line."""
    options = set()
    for line in text.splitlines():
        if re.match(r"^  -", line):
            invocation = re.split(r"\s{2,}", line.strip())[0]
            options |= {part.split()[0] for part in invocation.split(", ")}
    return options


def canonical(options: set[str]) -> set[str]:
    """Option strings with hyphens inside the name read as underscores (`HfArgumentParser` accepts both)."""
    return {"--" + option[2:].replace("-", "_") if option.startswith("--") else option for option in options}


class Captured(BaseException):
    """The parser a command built, stopped where it parses (past `albert-hf`'s error boundary)."""

    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__()
        self.parser = parser


def real_parser(command: str, monkeypatch, tmp_path: Path) -> argparse.ArgumentParser:
    """The parser `albert-hf <command>` runs with."""

    def capture(self, *args, **kwargs):
        raise Captured(self)

    monkeypatch.chdir(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
        with pytest.raises(Captured) as captured:
            main([command, *MINIMAL_ARGV[command]])
    return captured.value.parser


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def trainer_option_strings() -> set[str]:
    from transformers import HfArgumentParser, TrainingArguments

    return option_strings(HfArgumentParser(TrainingArguments))


def test_every_command_has_its_help():
    assert set(JOBS) | set(ARGPARSE_COMMANDS) == set(COMMANDS)
    assert not set(JOBS) & set(ARGPARSE_COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_imports_neither_torch_nor_transformers_and_lists_the_commands_own_options(
    command, console_script, monkeypatch, tmp_path
):
    result = run_console_script(console_script, command, "--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert heavy_imports(result) == []
    out = result.stdout
    assert out.startswith(f"usage: albert-hf {command} "), out[:300]
    if command in JOBS:
        assert " ".join(JOBS[command].description.split()) in " ".join(out.split())
        assert f"`albert-hf {command} {HELP_ALL}`" in " ".join(out.split())
    else:
        assert " ".join(ARGPARSE_COMMANDS[command]().description.split()) in " ".join(out.split())

    real = option_strings(real_parser(command, monkeypatch, tmp_path))
    own = real - trainer_option_strings() if command in JOBS else real
    listed = listed_options(out) - HELP_FLAGS
    assert canonical(listed) == canonical(own) - HELP_FLAGS
    assert listed <= own  # each as the real parser spells it
    assert "--adam_beta1" not in listed and "--per_device_train_batch_size" not in listed


@pytest.mark.parametrize("command", sorted(JOBS))
def test_help_all_lists_trainer_options_after_the_jobs_own(command, capsys):
    assert main([command, HELP_ALL]) == 0
    out = capsys.readouterr().out
    own, heading, trainer = out.partition("\nTrainer options (transformers.TrainingArguments")
    assert heading and own.startswith(f"usage: albert-hf {command} ")
    assert {"--adam_beta1", "--output_dir", "--learning_rate"} <= listed_options(trainer)
    assert "--adam_beta1" not in listed_options(own)
    assert canonical(listed_options(trainer)) == canonical(trainer_option_strings()) - HELP_FLAGS


def shown_defaults(text: str) -> dict[str, str]:
    """Option -> the default its help shows, on a wide terminal (no help text wrapped)."""
    entries, found = [], {}
    for line in text.splitlines():
        if line.startswith("  -"):
            entries.append(line)
        elif entries and line.startswith(" " * 4):
            entries[-1] += " " + line.strip()
    for entry in entries:
        match = re.match(r"^  (--\w+).*\(default: (.*?)(, from the \w+ recipe)?\)$", entry)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def as_typed(value) -> str:
    """A value as the command line types it: lists space-separated ("none" when empty), enums by their value."""
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) if value else "none"
    return str(getattr(value, "value", value))


def value_of(job, name: str):
    """The parsed value of option `name` in the part of `job` that declares it."""
    part = next(part for part in job.parts() if name in {f.name for f in dataclasses.fields(part)})
    return getattr(part, name)


@pytest.mark.parametrize("command", ["quickstart", "pretrain"])
def test_shown_defaults_are_the_values_of_a_real_parse(command, console_script, tmp_path, monkeypatch):
    """What `--help` says a job uses when an option is not given is what the job's parse gives (the recipe applied),
    for its own options and the Trainer options it sets."""
    from albert_hf.pretraining.arguments import parse_pretraining_args, parse_quickstart_args

    monkeypatch.chdir(tmp_path)
    out = run_console_script(console_script, command, "--help").stdout
    parse = parse_quickstart_args if command == "quickstart" else parse_pretraining_args
    job = parse(MINIMAL_ARGV[command])
    defaults = shown_defaults(out)
    assert len(defaults) >= 15, out
    if command == "quickstart":
        assert "--vocab_size" in defaults and "--config_overrides" in defaults
    for option, shown in defaults.items():
        assert as_typed(value_of(job, option[2:])) == shown, option
    trainer_line = re.search(r"Trainer options this job sets.*?unless given: (.*?)\.\n", out).group(1)
    for item in trainer_line.split(", "):
        option, shown = item.split(" ", 1)
        assert as_typed(getattr(job.training, option[2:])) == shown, option


def test_version_imports_neither_torch_nor_transformers(console_script):
    result = run_console_script(console_script, "--version")
    assert result.returncode == 0 and result.stdout.startswith("albert-hf ")
    assert heavy_imports(result) == []


def test_python_m_cli_help_imports_neither(tmp_path):
    """`python -m albert_hf.cli` is the command too: `-X importtime` names every module the process imports."""
    for argv in (["--help"], ["glue", "--help"]):
        result = processes.run(
            [sys.executable, "-X", "importtime", "-m", "albert_hf.cli", *argv],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
        assert imported and not {name for name in imported if name.split(".")[0] in HEAVY}


def test_a_job_run_by_the_command_registers_the_auto_classes():
    """The command imports the package lazily; before a job runs, `albert_hf.cli` loads it as `import albert_hf`
    does anywhere else, the Auto classes registered."""
    code = (
        "import sys; sys.argv = ['albert-hf']\n"
        "import albert_hf, transformers\n"
        "assert 'albert_hf' not in transformers.CONFIG_MAPPING\n"
        "from albert_hf.cli import _load_package\n"
        "_load_package()\n"
        "assert 'albert_hf' in transformers.CONFIG_MAPPING\n"
        "print('ok')\n"
    )
    result = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "ok", result.stderr[-3000:]


def test_import_albert_hf_elsewhere_registers_the_auto_classes():
    code = "import albert_hf, transformers; print('albert_hf' in transformers.CONFIG_MAPPING)"
    result = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "True", result.stderr[-3000:]


def test_every_example_script_is_listed():
    assert len(EXAMPLE_SCRIPTS) >= 5, EXAMPLE_SCRIPTS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_command_help(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: albert-hf {command} ") and "--help" in out, out[:500]


@pytest.mark.parametrize("script", EXAMPLE_SCRIPTS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_example_script_help(script, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(script), run_name="__main__")
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "--help" in out, out[:500]


def test_console_script_lists_every_command():
    result = processes.run(
        [sys.executable, "-m", "albert_hf.cli", "--help"], capture_output=True, text=True, timeout=120, check=True
    )
    for command in COMMANDS:
        assert command in result.stdout
