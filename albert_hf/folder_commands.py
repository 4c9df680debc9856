"""`albert-hf train-tokenizer`, `albert-hf export` and `albert-hf import`: the commands that write a folder without
training.

Their work lives with the library (`albert_hf.vocabulary`, `albert_hf.onnx_export`, `albert_hf.tf_import`, which build
on the model and the data and import nothing of the jobs); here each command parses its options, then opens its
`--output_dir` through the same guard as every training job (`albert_hf.training.run_folder.open_output_folder`: one writer at a time, and a folder
holding finished work, a model or the files the command would write, is refused unless `--overwrite_output_dir`),
and only then does the work. A tokenizer trained into a model's folder would replace the `spiece.model` the model's
embeddings were trained with, and an export would replace the config beside its weights. An import reads an
original TensorFlow ALBERT checkpoint (google-research's, a TF-Hub module, brightmart's) without TensorFlow
(`albert_hf.tf_checkpoint`) into a complete albert_hf model folder; the checkpoint's own folder is refused as
`--output_dir` even with `--overwrite_output_dir`: the release's files are the user's.
"""

from __future__ import annotations

import argparse
import os

from .errors import OptionError
from .options import RefusingParser, export_parser, train_tokenizer_parser

# What `train-tokenizer` writes (`vocabulary.train_tokenizer`): the SentencePiece model and vocabulary, the settings,
# the tokenizer in transformers' format; and the remote code that older versions wrote instead of the latter.
TOKENIZER_FILES = ("spiece.model", "spiece.vocab", "tokenizer_config.json", "tokenizer.json", "tokenization.py")
# What `export` writes besides the copied config, tokenizer and card (`onnx_export.export`), and what `export --format
# sentence-transformers` adds to a model folder (`convert.export_sentence_transformer`); the names of one ONNX
# export are `onnx_export.export_file_names` of its options.
EXPORT_FILES = ("model.onnx", "model.int8.onnx", "pytorch_model.int8.pt")
SENTENCE_TRANSFORMERS_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling",
    "2_Normalize",
)
OVERWRITE_HELP = (
    "use an --output_dir holding a model, checkpoints or the files this command writes: remove those first "
    "(each removal logged; other files stay)"
)


def _with_overwrite_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--overwrite_output_dir", action="store_true", help=OVERWRITE_HELP)
    return parser


# The parsers import nothing the work needs (the run folder's guard, the tokenizer, the model), so that
# `albert-hf train-tokenizer --help` and `albert-hf export --help` answer at once.
def train_tokenizer_command_parser() -> argparse.ArgumentParser:
    """Every option of `albert-hf train-tokenizer`."""
    return _with_overwrite_option(train_tokenizer_parser())


def export_command_parser() -> argparse.ArgumentParser:
    """Every option of `albert-hf export`."""
    return _with_overwrite_option(export_parser())


def train_tokenizer_main(argv: list[str] | None = None) -> int:
    """`albert-hf train-tokenizer`: train a SentencePiece vocabulary with the ALBERT recipe into a guarded folder."""
    from .training.run_folder import open_output_folder
    from .vocabulary import run_train_tokenizer

    args = train_tokenizer_command_parser().parse_args(argv)
    open_output_folder(args.output_dir, args.overwrite_output_dir, writes=TOKENIZER_FILES)
    return run_train_tokenizer(args)


def export_main(argv: list[str] | None = None) -> int:
    """`albert-hf export`: ONNX (and int8) files of a saved model, into a guarded folder (never the model's own)."""
    from .onnx_export import export_file_names, run_export
    from .training.checkpoints import check_finite_weights, check_pretrained_source
    from .training.run_folder import open_output_folder

    args = export_command_parser().parse_args(argv)
    sentence_transformers = args.format == "sentence-transformers"
    if sentence_transformers and args.quantize:
        raise OptionError("--quantize is for --format onnx; a sentence-transformers export writes the fp32 model.")
    check_pretrained_source(args.model_name_or_path, option="--model_name_or_path")
    check_finite_weights(args.model_name_or_path, option="--model_name_or_path")
    if sentence_transformers:
        from .convert import export_sentence_transformer

        open_output_folder(
            args.output_dir,
            args.overwrite_output_dir,
            model_source=args.model_name_or_path,
            writes=SENTENCE_TRANSFORMERS_FILES,
        )
        folder = export_sentence_transformer(
            args.model_name_or_path, args.output_dir, args.pooling, args.normalize, args.max_seq_length
        )
        print(f"sentence-transformers: {folder} (SentenceTransformer({str(folder)!r}) loads it)")
        return 0
    # Every file this export writes, known before any work (a user's README.md stays, the card going beside it).
    names = export_file_names(args.model_name_or_path, args.quantize, pytorch_int8=not args.no_pytorch_int8)
    writes = tuple(dict.fromkeys([*EXPORT_FILES, *(name for name in names if name != "README.md")]))
    open_output_folder(args.output_dir, args.overwrite_output_dir, model_source=args.model_name_or_path, writes=writes)
    return run_export(args)


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
    from .tf_checkpoint import find_checkpoint
    from .tf_import import import_tf_checkpoint
    from .training.run_folder import OutputFolderError, open_output_folder

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
