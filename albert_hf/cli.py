"""`albert-hf` command line: one subcommand per job, each a thin call into the library.

The example scripts in `examples/` call the very same `main` functions, so the CLI and the scripts share one
implementation. Subcommands are imported lazily: `albert-hf --help` does not import torch.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module, function taking argv and returning an exit code or None, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "quickstart": ("albert_hf.pretraining.run", "quickstart_main", "train a tokenizer and pretrain a small ALBERT"),
    "pretrain": ("albert_hf.pretraining.run", "main", "pretrain ALBERT (MLM + SOP) with Trainer"),
    "train-tokenizer": ("albert_hf.vocabulary", "train_tokenizer_main", "train a SentencePiece vocabulary"),
    "glue": ("albert_hf.tasks.glue", "main", "fine-tune on a GLUE task"),
    "squad": ("albert_hf.tasks.squad", "main", "fine-tune on SQuAD v1.1 / v2.0"),
    "ner": ("albert_hf.tasks.ner", "main", "fine-tune on CoNLL-2003 NER"),
    "multiple-choice": ("albert_hf.tasks.multiple_choice", "main", "fine-tune on SWAG/RACE-style multiple choice"),
    "export": ("albert_hf.onnx_export", "export_main", "export a saved model to ONNX, optionally int8-quantized"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: albert-hf <command> [options]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "`albert-hf <command> --help` lists each command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"albert-hf: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, function_name, _ = COMMANDS[command]
    function = getattr(importlib.import_module(module_name), function_name)
    result = function(rest)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
