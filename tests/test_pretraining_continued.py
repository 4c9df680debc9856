"""Continued pretraining: `albert-hf pretrain --model_name_or_path DIR` starts from the checkpoint's weights (an
albert_hf one, or a folder of transformers' own AlbertForPreTraining) and keeps its tokenizer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import transformers
from conftest import TINY_TWO_LAYER_OVERRIDES
from safetensors.torch import load_file

from albert_hf.pretraining.arguments import parse_pretraining_args
from albert_hf.pretraining.run import build_run, main

STOCK_SHAPE = dict(
    embedding_size=16, hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=2,
    max_position_embeddings=64,
)  # fmt: skip


def continued_argv(checkpoint: Path, corpus: Path, output_dir: Path, *extra: str) -> list[str]:
    return [
        "--model_name_or_path", str(checkpoint), "--train_files", str(corpus), "--lines_are_paragraphs",
        "--max_seq_length", "64", "--max_steps", "2", "--per_device_train_batch_size", "4", "--learning_rate", "1e-3", "--warmup_steps", "0",
        "--output_dir", str(output_dir), "--report_to", "none", "--use_cpu", "--disable_tqdm", "true",
        "--save_strategy", "no", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def stock_checkpoint(spiece_model, tmp_path_factory) -> Path:
    """A folder as transformers' AlbertForPreTraining saves it (model_type "albert"), with ALBERT's spiece.model."""
    torch.manual_seed(0)
    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(vocab_size=30000, **STOCK_SHAPE))
    folder = tmp_path_factory.mktemp("stock")
    model.save_pretrained(folder)
    shutil.copy(spiece_model, folder / "spiece.model")
    return folder


def test_a_stock_checkpoint_is_loaded_with_its_weights_and_tokenizer(stock_checkpoint, wikitext_articles, tmp_path):
    run = build_run(parse_pretraining_args(continued_argv(stock_checkpoint, wikitext_articles(2), tmp_path / "out")))
    stock = transformers.AlbertForPreTraining.from_pretrained(stock_checkpoint).eval()
    batch = run.trainer.data_collator([run.train_dataset[i] for i in range(4)])
    inputs = {key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    ours = run.model.eval()
    with torch.no_grad():
        expected, got = stock(**inputs), ours(**inputs)
    torch.testing.assert_close(got.prediction_logits, expected.prediction_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.sop_logits, expected.sop_logits, rtol=1e-5, atol=1e-5)
    assert len(run.tokenizer) == 30000 and run.tokenizer.convert_ids_to_tokens(4) == "[MASK]"


def test_an_albert_hf_checkpoint_is_loaded_as_saved_with_its_tokenizer(spiece_model, wikitext_articles, tmp_path):
    corpus = wikitext_articles(3)
    scratch = ["--tokenizer_name_or_path", str(spiece_model), "--config_overrides", TINY_TWO_LAYER_OVERRIDES]
    first = tmp_path / "first"
    assert main([*continued_argv(spiece_model, corpus, first)[2:], *scratch]) == 0  # from scratch
    saved = load_file(first / "model.safetensors")

    continued = build_run(
        parse_pretraining_args(
            continued_argv(first, corpus, tmp_path / "second", "--recipe", "tiny", "--logging_steps", "1")
        )
    )
    loaded = continued.model.state_dict()
    for name, tensor in saved.items():  # every saved tensor, as saved: not re-initialized
        torch.testing.assert_close(loaded[name], tensor, rtol=0, atol=0, msg=name)
    assert continued.model.config.hidden_size == 32  # the recipe's architecture does not replace the checkpoint's
    assert Path(continued.tokenizer.vocab_file).parent == first  # the checkpoint's own tokenizer
