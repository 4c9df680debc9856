"""`albert-hf import`: an original TensorFlow ALBERT checkpoint (google-research's, a TF-Hub module, brightmart's)
as a complete albert_hf model folder: config, weights, tokenizer and a model card naming the source.

The work is `albert_hf.tf_import.import_tf_checkpoint` (reading the checkpoint with `albert_hf.tf_checkpoint`, no
TensorFlow needed); here the command parses its options, finds the checkpoint, and opens its `--output_dir` through
the guard every command uses (`albert_hf.training.run_folder.open_output_folder`: one writer at a time; a folder holding a
model, checkpoints or the files this command writes is refused unless `--overwrite_output_dir`). The checkpoint's own
folder is refused as `--output_dir` even with `--overwrite_output_dir`: the release's files are the user's.
"""

from __future__ import annotations

import argparse
import os

from ..options import RefusingParser
from .folder_commands import OVERWRITE_HELP

# The heads `--head` builds (albert_hf.tf_import.HEAD_CHOICES, kept here so that --help imports neither torch nor
# transformers; tests/test_tf_import.py checks that the two agree).
HEAD_CHOICES = (
    "auto",
    "base",
    "pretraining",
    "masked-lm",
    "sequence-classification",
    "multiple-choice",
    "question-answering",
)
# What an import writes (`hub.save_for_hub` of the model and tokenizer): each already in --output_dir is finished work.
IMPORT_FILES = (
    "config.json",
    "model.safetensors",
    "modeling.py",
    "configuration.py",
    "tokenization.py",
    "spiece.model",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "README.md",
)
IMPORT_DESCRIPTION = (
    "Import an original TensorFlow ALBERT checkpoint (google-research/albert's, incl. its fine-tuned classifier and "
    "SQuAD heads and Google's Chinese models, a TF-Hub module, brightmart/albert_zh's) as an albert_hf model folder: "
    "config, weights, tokenizer and model card. Reads the checkpoint without TensorFlow."
)


def import_command_parser() -> argparse.ArgumentParser:
    """Every option of `albert-hf import`."""
    parser = RefusingParser(prog="albert-hf import", description=IMPORT_DESCRIPTION)
    parser.add_argument(
        "checkpoint",
        help="the checkpoint: its folder (the `checkpoint` file's choice, else the newest *.index), a prefix "
        "(model.ckpt-best), its .index or data file, a `checkpoint` file, or a TF-Hub module's folder",
    )
    parser.add_argument("--output_dir", required=True, help="folder to write the albert_hf model into")
    parser.add_argument(
        "--config_file", help="the original albert_config.json (default: the one beside the checkpoint or in assets/)"
    )
    parser.add_argument(
        "--vocab_file",
        help="the SentencePiece model (30k-clean.model) or WordPiece vocab.txt (default: the one beside the checkpoint)",
    )
    parser.add_argument(
        "--no_lowercase", action="store_true", help="keep case (the released ALBERTs, Chinese ones too, are uncased)"
    )
    parser.add_argument(
        "--head",
        choices=HEAD_CHOICES,
        default="auto",
        help="the albert_hf class to build (default auto: the head the checkpoint holds; run_squad_v2's, which has "
        "no AlbertForQuestionAnswering counterpart, gives the backbone)",
    )
    parser.add_argument(
        "--no_verify_checksums", action="store_true", help="skip the CRC32C check of each tensor read (faster)"
    )
    parser.add_argument("--overwrite_output_dir", action="store_true", help=OVERWRITE_HELP)
    return parser


def checkpoint_folders(prefix: str) -> list[str]:
    """The folders of the release a checkpoint prefix belongs to: its own, and a TF-Hub module's (the parent of
    `variables/`)."""
    folder = os.path.dirname(os.path.abspath(prefix))
    return [folder, os.path.dirname(folder)] if os.path.basename(folder) == "variables" else [folder]


def import_main(argv: list[str] | None = None) -> int:
    """`albert-hf import`: write the albert_hf folder of an original TensorFlow checkpoint into a guarded folder."""
    from ..tf_checkpoint import find_checkpoint
    from ..tf_import import import_tf_checkpoint
    from ..training.run_folder import OutputFolderError, open_output_folder

    args = import_command_parser().parse_args(argv)
    prefix = find_checkpoint(args.checkpoint)
    output = os.path.realpath(os.path.expanduser(args.output_dir))
    if output in [os.path.realpath(folder) for folder in checkpoint_folders(prefix)]:
        raise OutputFolderError(
            f"--output_dir {args.output_dir} is the folder of the checkpoint {prefix}: pass another --output_dir (the "
            "release's files stay as they are)"
        )
    open_output_folder(args.output_dir, args.overwrite_output_dir, writes=IMPORT_FILES)
    report = import_tf_checkpoint(
        prefix,
        args.output_dir,
        config_file=args.config_file,
        vocab_file=args.vocab_file,
        do_lower_case=not args.no_lowercase,
        head=args.head,
        verify_checksums=not args.no_verify_checksums,
        replace=args.overwrite_output_dir,
    )
    print(report.summary())
    print(
        f"wrote {args.output_dir}: {report.model_class} with its tokenizer ({os.path.basename(report.tokenizer_file)})"
    )
    return 0
