"""Continued pretraining: `albert-hf pretrain --model_name_or_path DIR` on new text, from a checkpoint saved by
albert_hf or by transformers' own `AlbertForPreTraining`, keeping the checkpoint's tokenizer.

Every job runs through the public command line (`albert_hf.cli.main(["pretrain", ...])`) for one step at learning rate
0, so the weights it saves are the weights it loaded. The checkpoints are not fresh initializations: their MLM bias is
the log unigram frequency of the new text's pieces, which gives them a held-out MLM loss well below a fresh model's.
References computed here, independently of the job: the checkpoint's own forward (transformers' model for the
transformers checkpoints) on a batch masked by this file, and the bytes of the checkpoint's `spiece.model`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
import torch
import transformers
from helpers.data import FIXTURES
from helpers.tiny import TINY_TWO_LAYER_OVERRIDES
from transformers import AutoModelForPreTraining

import albert_hf
from albert_hf.cli import main as albert_hf_cli
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.vocabulary import train_tokenizer

TINY = {key: int(value) for key, value in (item.split("=") for item in TINY_TWO_LAYER_OVERRIDES.split(","))}
VOCAB_SIZE = 1000


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> tuple[Path, Path]:
    """(the text the tokenizer was trained on, the new text of the continued pretraining): different WikiText-2
    articles, one paragraph per line, a blank line between articles."""
    articles = (FIXTURES / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(encoding="utf-8").split("\n\n")
    folder = tmp_path_factory.mktemp("corpora")
    old, new = folder / "old.txt", folder / "new.txt"
    old.write_text("\n\n".join(articles[:4]).rstrip("\n") + "\n", encoding="utf-8")
    new.write_text("\n\n".join(articles[4:7]).rstrip("\n") + "\n", encoding="utf-8")
    return old, new


@pytest.fixture(scope="module")
def tokenizer_dir(corpora, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(corpora[0], folder, vocab_size=VOCAB_SIZE, show_progress=False)
    return folder


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir) -> AlbertHFTokenizer:
    return AlbertHFTokenizer.from_pretrained(tokenizer_dir)


@pytest.fixture(scope="module")
def unigram_bias(corpora, tokenizer) -> torch.Tensor:
    """Log frequencies (add-one) of the new text's pieces: an MLM bias that a fresh model does not have."""
    counts = Counter()
    for line in corpora[1].read_text(encoding="utf-8").splitlines():
        counts.update(tokenizer(line, add_special_tokens=False)["input_ids"])
    frequencies = torch.tensor([counts[i] + 1.0 for i in range(len(tokenizer))])
    return (frequencies / frequencies.sum()).log()


@pytest.fixture(scope="module")
def held_out_batch(corpora, tokenizer) -> dict[str, torch.Tensor]:
    """Sentence pairs of the new text's last paragraphs, every 5th piece masked (the test's own masking)."""
    paragraphs = [line for line in corpora[1].read_text(encoding="utf-8").splitlines() if line.strip()][-16:]
    halves = [paragraph.split(". ", 1) for paragraph in paragraphs if ". " in paragraph]
    batch = tokenizer(
        [a for a, _ in halves],
        [b for _, b in halves],
        truncation=True,
        max_length=64,
        padding=True,
        return_tensors="pt",
    )
    labels = torch.full_like(batch["input_ids"], -100)
    for row in range(batch["input_ids"].shape[0]):
        ids = batch["input_ids"][row]
        candidates = [
            i
            for i, token in enumerate(ids.tolist())
            if token not in tokenizer.all_special_ids and batch["attention_mask"][row, i]
        ]
        for i in candidates[::5]:
            labels[row, i] = ids[i]
            batch["input_ids"][row, i] = tokenizer.mask_token_id
    assert (labels != -100).sum() > 50
    return {**batch, "labels": labels}


def mlm_loss(model, batch) -> float:
    """Mean cross-entropy of the masked pieces, from the model's logits (any ALBERT pretraining class)."""
    model.eval()
    with torch.no_grad():
        logits = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
        ).prediction_logits
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten()).item()


def special_ids(tokenizer) -> dict[str, int]:
    return dict(
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id
    )


def albert_hf_checkpoint(folder: Path, tokenizer, unigram_bias) -> albert_hf.AlbertForPreTraining:
    """An albert_hf AlbertForPreTraining saved with `save_pretrained`, its tokenizer beside it."""
    torch.manual_seed(1)
    config = albert_hf.AlbertConfig.preset(
        "base-v2", vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id, **special_ids(tokenizer), **TINY
    )
    model = albert_hf.AlbertForPreTraining(config)
    with torch.no_grad():
        model.predictions.bias.copy_(unigram_bias)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


def transformers_checkpoint(folder: Path, tokenizer_dir: Path, unigram_bias, beside: str | None):
    """transformers' own AlbertForPreTraining (model_type "albert") saved with `save_pretrained`; its tokenizer saved
    beside it by albert_hf (spiece.model), by transformers' AlbertTokenizer (tokenizer.json only), or not at all."""
    tokenizer = AlbertHFTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(2)
    config = transformers.AlbertConfig(vocab_size=len(tokenizer), **special_ids(tokenizer), **TINY)
    model = transformers.AlbertForPreTraining(config)
    with torch.no_grad():
        model.predictions.bias.copy_(unigram_bias)  # the decoder's bias is the same tensor
    model.save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["model_type"] == "albert"
    if beside == "albert_hf":
        tokenizer.save_pretrained(folder)
    elif beside == "transformers":
        # Through from_pretrained: in transformers 5, AlbertTokenizer(vocab_file=...) does not read the file.
        transformers.AlbertTokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder)
        assert not (folder / "spiece.model").exists()
    return model


def pretrain_argv(output_dir: Path, new_text: Path, *options: str) -> list[str]:
    """One step of `albert-hf pretrain` at learning rate 0 on the new text (one article held out)."""
    return [
        "pretrain",
        *options,
        "--train_files",
        str(new_text),
        "--lines_are_paragraphs",
        "--validation_documents",
        "1",
        "--max_seq_length",
        "64",
        "--max_steps",
        "1",
        "--learning_rate",
        "0",
        "--per_device_train_batch_size",
        "8",
        "--per_device_eval_batch_size",
        "64",
        "--seed",
        "0",
        "--output_dir",
        str(output_dir),
        "--report_to",
        "none",
        "--use_cpu",
        "--disable_tqdm",
        "true",
        "--save_strategy",
        "no",
    ]


def pretrain(output_dir: Path, new_text: Path, *options: str) -> dict:
    """`pretrain_argv`'s job run through the command line; its eval results."""
    assert albert_hf_cli(pretrain_argv(output_dir, new_text, *options)) == 0
    return json.loads((output_dir / "eval_results.json").read_text())


@pytest.fixture(scope="module")
def fresh_run(corpora, tokenizer_dir, tmp_path_factory) -> dict:
    """The same job from a fresh model of the same size (no --model_name_or_path): what a re-initialization gives."""
    output_dir = tmp_path_factory.mktemp("fresh")
    results = pretrain(
        output_dir,
        corpora[1],
        "--tokenizer_name_or_path",
        str(tokenizer_dir),
        "--config_overrides",
        TINY_TWO_LAYER_OVERRIDES,
    )
    return {"eval": results, "model": AutoModelForPreTraining.from_pretrained(output_dir)}


def check_continued_run(checkpoint_dir, output_dir, results, reference_model, fresh_run, held_out_batch, tokenizer):
    """The job loaded the checkpoint's weights and config, kept them at learning rate 0, and saved a loadable model."""
    # Loaded, not re-initialized: the job's held-out MLM loss is the checkpoint's, well below a fresh model's.
    assert results["eval_mlm_loss"] < fresh_run["eval"]["eval_mlm_loss"] - 0.5
    assert fresh_run["eval"]["eval_mlm_loss"] == pytest.approx(math.log(VOCAB_SIZE), abs=0.3)
    # The saved model is transformers' own ALBERT (stock by default), loads back into albert_hf's class and computes
    # what the checkpoint computes (the reference's own forward).
    assert json.loads((output_dir / "config.json").read_text())["model_type"] == "albert"
    saved = albert_hf.AlbertForPreTraining.from_pretrained(output_dir)
    assert saved.config.model_type == "albert_hf"
    expected = mlm_loss(reference_model, held_out_batch)
    assert mlm_loss(saved, held_out_batch) == pytest.approx(expected, abs=1e-5)
    assert mlm_loss(fresh_run["model"], held_out_batch) > expected + 0.5
    # Learning rate 0: every weight is the checkpoint's, bit for bit.
    loaded = albert_hf.AlbertForPreTraining.from_pretrained(checkpoint_dir).state_dict()
    for name, value in saved.state_dict().items():
        torch.testing.assert_close(value, loaded[name], rtol=0, atol=0, msg=name)
    # The checkpoint's config is kept.
    for field in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads"):
        assert getattr(saved.config, field) == getattr(reference_model.config, field), field
    # The tokenizer saved beside the model is the checkpoint's.
    reloaded = AlbertHFTokenizer.from_pretrained(output_dir)
    text = "The new text, in 1990: résumés and Kōji's 3,000 pieces."
    assert reloaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert len(reloaded) == len(tokenizer)


def test_continues_from_an_albert_hf_checkpoint(
    corpora, tokenizer_dir, tokenizer, unigram_bias, held_out_batch, fresh_run, tmp_path
):
    checkpoint_dir = tmp_path / "checkpoint"
    reference = albert_hf_checkpoint(checkpoint_dir, tokenizer, unigram_bias)
    results = pretrain(tmp_path / "out", corpora[1], "--model_name_or_path", str(checkpoint_dir))
    check_continued_run(checkpoint_dir, tmp_path / "out", results, reference, fresh_run, held_out_batch, tokenizer)
    assert (tmp_path / "out" / "spiece.model").read_bytes() == (tokenizer_dir / "spiece.model").read_bytes()


@pytest.mark.parametrize("tokenizer_source", ["saved beside", "--tokenizer_name_or_path"])
def test_continues_from_a_transformers_checkpoint(
    corpora, tokenizer_dir, tokenizer, unigram_bias, held_out_batch, fresh_run, tmp_path, tokenizer_source
):
    checkpoint_dir = tmp_path / "checkpoint"
    beside = "albert_hf" if tokenizer_source == "saved beside" else None
    reference = transformers_checkpoint(checkpoint_dir, tokenizer_dir, unigram_bias, beside)
    options = ["--model_name_or_path", str(checkpoint_dir)]
    if beside is None:
        options += ["--tokenizer_name_or_path", str(tokenizer_dir)]
    results = pretrain(tmp_path / "out", corpora[1], *options)
    check_continued_run(checkpoint_dir, tmp_path / "out", results, reference, fresh_run, held_out_batch, tokenizer)
    assert (tmp_path / "out" / "spiece.model").read_bytes() == (tokenizer_dir / "spiece.model").read_bytes()


def test_continues_from_a_transformers_checkpoint_with_its_own_tokenizer_json(
    corpora, tokenizer_dir, tokenizer, unigram_bias, held_out_batch, fresh_run, tmp_path
):
    """A folder written entirely by transformers 5: model and AlbertTokenizer (tokenizer.json, no spiece.model)."""
    checkpoint_dir = tmp_path / "checkpoint"
    reference = transformers_checkpoint(checkpoint_dir, tokenizer_dir, unigram_bias, beside="transformers")
    results = pretrain(tmp_path / "out", corpora[1], "--model_name_or_path", str(checkpoint_dir))
    check_continued_run(checkpoint_dir, tmp_path / "out", results, reference, fresh_run, held_out_batch, tokenizer)
    stock_tokenizer = transformers.AlbertTokenizer.from_pretrained(checkpoint_dir)
    text = "Continued pretraining keeps the pieces."
    assert AlbertHFTokenizer.from_pretrained(tmp_path / "out")(text)["input_ids"] == stock_tokenizer(text)["input_ids"]


@pytest.mark.parametrize("recipe", ["tiny", "laptop"])
def test_a_recipe_keeps_the_checkpoint_architecture(
    corpora, tokenizer_dir, tokenizer, unigram_bias, held_out_batch, fresh_run, tmp_path, recipe
):
    """--recipe tiny/laptop size a model trained from scratch (their --config_overrides): a checkpoint keeps its own
    config, and takes the recipe's training hyperparameters only."""
    checkpoint_dir = tmp_path / "checkpoint"
    reference = albert_hf_checkpoint(checkpoint_dir, tokenizer, unigram_bias)
    results = pretrain(
        tmp_path / "out",
        corpora[1],
        "--recipe",
        recipe,
        "--warmup_steps",
        "0",
        "--model_name_or_path",
        str(checkpoint_dir),
    )
    check_continued_run(checkpoint_dir, tmp_path / "out", results, reference, fresh_run, held_out_batch, tokenizer)
    assert AutoModelForPreTraining.from_pretrained(tmp_path / "out").config.hidden_size == TINY["hidden_size"]


def test_refuses_a_tokenizer_of_another_vocabulary(corpora, tokenizer, unigram_bias, tmp_path, capsys):
    checkpoint_dir = tmp_path / "checkpoint"
    albert_hf_checkpoint(checkpoint_dir, tokenizer, unigram_bias)
    other = tmp_path / "other-tokenizer"
    train_tokenizer(corpora[1], other, vocab_size=600, show_progress=False)
    output_dir = tmp_path / "out"
    options = ("--model_name_or_path", str(checkpoint_dir), "--tokenizer_name_or_path", str(other))
    # A user error: one message and exit status 2 (albert_hf.errors), raised before any model is written.
    assert albert_hf_cli(pretrain_argv(output_dir, corpora[1], *options)) == 2
    assert re.search(r"has 600 pieces but the config of .*checkpoint has vocab_size 1000", capsys.readouterr().err)
    assert not (output_dir / "model.safetensors").exists()
