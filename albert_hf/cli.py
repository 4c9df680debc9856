"""`albert-hf` command line: one subcommand per job, each a thin call into the library.

The example scripts in `examples/` call the very same `main` functions, so the CLI and the scripts share one
implementation. Subcommands are imported lazily: `albert-hf --help` does not import torch.

A [`UserError`](albert_hf.errors.UserError) (a bad option, a missing file, bad data, a folder in use) is printed as
`albert-hf <command>: error: <message>` with exit status 2, like argparse's own errors: the message names what to fix,
and a traceback would only bury it. `--debug` (anywhere on the command line) or `ALBERT_HF_DEBUG=1` shows the
traceback too. Any other exception is a fault of albert_hf or a library below it, and keeps its traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

from .errors import UserError

DEBUG_FLAG = "--debug"
USER_ERROR_STATUS = 2  # argparse's status for a bad command line

# subcommand -> (module, function taking argv and returning an exit code or None, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "quickstart": ("albert_hf.pretraining.run", "quickstart_main", "train a tokenizer and pretrain a small ALBERT"),
    "pretrain": ("albert_hf.pretraining.run", "main", "pretrain ALBERT (MLM + SOP) with Trainer"),
    "train-tokenizer": ("albert_hf.tasks.folder_commands", "train_tokenizer_main", "train a SentencePiece vocabulary"),
    "glue": ("albert_hf.tasks.glue", "main", "fine-tune on a GLUE task"),
    "squad": ("albert_hf.tasks.squad", "main", "fine-tune on SQuAD v1.1 / v2.0"),
    "ner": ("albert_hf.tasks.ner", "main", "fine-tune on CoNLL-2003 NER"),
    "multiple-choice": ("albert_hf.tasks.multiple_choice", "main", "fine-tune on SWAG/RACE-style multiple choice"),
    "classify": ("albert_hf.tasks.classify", "main", "fine-tune to classify or score the texts of any labelled table"),
    "export": (
        "albert_hf.tasks.folder_commands",
        "export_main",
        "export a saved model to ONNX, optionally int8-quantized",
    ),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: albert-hf <command> [options]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "`albert-hf <command> --help` lists each command's options."]
    lines += [f"{DEBUG_FLAG} (anywhere) or ALBERT_HF_DEBUG=1: show the traceback of an error in what was given."]
    lines += ["--version: the installed albert_hf's version."]
    return "\n".join(lines)


def installed_version() -> str:
    """The version pip installed (the distribution's metadata, as `pip show albert_hf` reads it), so the answer is
    the one of the package that runs, whatever the checkout holds."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("albert_hf")
    except PackageNotFoundError:
        return "unknown (albert_hf runs from a checkout that pip did not install)"


def debug_wanted(argv: list[str]) -> tuple[bool, list[str]]:
    """(whether tracebacks of user errors are wanted, argv without the global --debug flag), so that no command
    sees the flag; ALBERT_HF_DEBUG=1 asks for them too.

    TrainingArguments has a `--debug <options>` of its own (`--debug underflow_overflow`): after the command, a
    `--debug` followed by a value is that option and stays.
    """
    rest = []
    for position, arg in enumerate(argv):
        following = argv[position + 1] if position + 1 < len(argv) else "--"
        if arg == DEBUG_FLAG and (position == 0 or following.startswith("-")):
            continue
        rest.append(arg)
    return len(rest) < len(argv) or os.environ.get("ALBERT_HF_DEBUG", "") not in ("", "0"), rest


def main(argv: list[str] | None = None) -> int:
    debug, argv = debug_wanted(list(sys.argv[1:] if argv is None else argv))
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if argv[0] == "--version":
        print(f"albert-hf {installed_version()}")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"albert-hf: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, function_name, _ = COMMANDS[command]
    function = getattr(importlib.import_module(module_name), function_name)
    from .run_folder import release_held_locks

    try:
        result = function(rest)
    except UserError as error:
        if debug:
            raise
        print(f"albert-hf {command}: error: {error}", file=sys.stderr)
        return USER_ERROR_STATUS
    finally:
        release_held_locks()
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
