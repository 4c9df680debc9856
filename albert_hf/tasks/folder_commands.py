"""`albert-hf train-tokenizer` and `albert-hf export`: the two commands that write a folder without training.

Their work lives with the library (`albert_hf.vocabulary`, `albert_hf.onnx_export`, which build on the model and the
data and import nothing of the jobs); here each command parses its options, then opens its `--output_dir` through the
same guard as every training job (`albert_hf.training.run_folder.open_output_folder`: one writer at a time, and a folder
holding finished work, a model or the files the command would write, is refused unless `--overwrite_output_dir`),
and only then does the work. A tokenizer trained into a model's folder would replace the `spiece.model` the model's
embeddings were trained with, and an export would replace the config beside its weights.
"""

from __future__ import annotations

import argparse

from ..errors import OptionError
from ..options import export_parser, train_tokenizer_parser

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
    from ..training.run_folder import open_output_folder
    from ..vocabulary import run_train_tokenizer

    args = train_tokenizer_command_parser().parse_args(argv)
    open_output_folder(args.output_dir, args.overwrite_output_dir, writes=TOKENIZER_FILES)
    return run_train_tokenizer(args)


def export_main(argv: list[str] | None = None) -> int:
    """`albert-hf export`: ONNX (and int8) files of a saved model, into a guarded folder (never the model's own)."""
    from ..onnx_export import export_file_names, run_export
    from ..training.checkpoints import check_finite_weights, check_pretrained_source
    from ..training.run_folder import open_output_folder

    args = export_command_parser().parse_args(argv)
    sentence_transformers = args.format == "sentence-transformers"
    if sentence_transformers and args.quantize:
        raise OptionError("--quantize is for --format onnx; a sentence-transformers export writes the fp32 model.")
    check_pretrained_source(args.model_name_or_path, option="--model_name_or_path")
    check_finite_weights(args.model_name_or_path, option="--model_name_or_path")
    if sentence_transformers:
        from ..convert import export_sentence_transformer

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
