"""`albert-hf` command line: one subcommand per job, each the `main` of its module, run inside the one error boundary.

`albert-hf <job>` runs exactly the job's script, `albert_hf/scripts/<job>.py` (`COMMANDS` names each command's
module, imported only when it runs); the example scripts in `examples/` call `main` with their command. Subcommands
are imported lazily, and the `albert-hf` process imports the package lazily (albert_hf/__init__.py): `albert-hf
--help`, `--version` and `albert-hf <command> --help` import neither torch nor transformers (`albert_hf.job_help`);
`albert-hf <command> --help-all` adds Trainer's options. What each failure becomes (a line and an exit status per
family) is `albert_hf.error_boundary`, which a copied job script calls as well.
"""

from __future__ import annotations

import importlib
import sys

from . import job_help
from .error_boundary import DEBUG_FLAG, debug_wanted, run_command

# subcommand -> (module, function taking argv and returning an exit code or None, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "quickstart": ("albert_hf.scripts.quickstart", "main", "train a tokenizer and pretrain a small ALBERT"),
    "pretrain": ("albert_hf.scripts.pretrain", "main", "pretrain ALBERT (MLM + SOP) with Trainer"),
    "train-tokenizer": ("albert_hf.folder_commands", "train_tokenizer_main", "train a SentencePiece vocabulary"),
    "glue": ("albert_hf.scripts.glue", "main", "fine-tune on a GLUE task"),
    "squad": ("albert_hf.scripts.squad", "main", "fine-tune on SQuAD v1.1 / v2.0"),
    "ner": ("albert_hf.scripts.ner", "main", "fine-tune on CoNLL-2003 NER"),
    "multiple-choice": ("albert_hf.scripts.multiple_choice", "main", "fine-tune on SWAG/RACE-style multiple choice"),
    "classify": (
        "albert_hf.scripts.classify",
        "main",
        "fine-tune to classify or score the texts of any labelled table",
    ),
    "export": (
        "albert_hf.folder_commands",
        "export_main",
        "export a saved model to ONNX (optionally int8) or as a sentence-transformers model",
    ),
    "import": (
        "albert_hf.folder_commands",
        "import_main",
        "import an original TensorFlow ALBERT checkpoint (no TensorFlow needed)",
    ),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: albert-hf <command> [options]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "`albert-hf <command> --help` lists each command's own options; --help-all adds Trainer's."]
    lines += [f"{DEBUG_FLAG} (anywhere) or ALBERT_HF_DEBUG=1: show the traceback of an error in what was given."]
    lines += ["--version: the installed albert_hf's version."]
    lines += ["Exit status: 0 done, 2 an error in what was given, 3 the machine's state (disk, permissions, network),"]
    lines += ["4 an optional dependency missing (the line says what to install), 1 a fault of albert_hf."]
    return "\n".join(lines)


def installed_version() -> str:
    """The version pip installed (the distribution's metadata, as `pip show albert_hf` reads it), so the answer is
    the one of the package that runs, whatever the checkout holds."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("albert_hf")
    except PackageNotFoundError:
        return "unknown (albert_hf runs from a checkout that pip did not install)"


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
    if job_help.wants_help(rest):
        print(job_help.job_help(command, everything=job_help.HELP_ALL in rest), end="")
        return 0
    _load_package()
    module_name, function_name, _ = COMMANDS[command]
    return run_command(command, getattr(importlib.import_module(module_name), function_name), rest, debug)


def _load_package() -> None:
    """Do what `import albert_hf` does in any other process (the Auto classes registered) before a job runs: the
    `albert-hf` process imports the package lazily, for --help and --version."""
    import albert_hf

    albert_hf._register()


if __name__ == "__main__":
    sys.exit(main())
