"""Pretraining with Trainer: exact loss normalization, metrics, LAMB selection, exact resume, script and quickstart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from helpers.tiny import TINY_TWO_LAYER_OVERRIDES
from transformers import AutoModelForPreTraining, AutoTokenizer, default_data_collator

import albert_hf  # noqa: F401 - registers the Auto classes
from albert_hf.configuration import AlbertConfig
from albert_hf.data.collator import DataCollatorForSOP
from albert_hf.data.sentence_order import build_pretraining_dataset, load_text_documents
from albert_hf.errors import OptionError
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.arguments import RECIPES, parse_pretraining_args
from albert_hf.pretraining.trainer import AlbertPretrainingTrainer, PretrainingArguments
from albert_hf.scripts.pretrain import main
from albert_hf.scripts.quickstart import main as quickstart_main
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.training.lamb import Lamb
from albert_hf.vocabulary import train_tokenizer

TINY_MODEL = f"{TINY_TWO_LAYER_OVERRIDES},classifier_dropout_prob=0.0"


@pytest.fixture(scope="module")
def corpus_file(wikitext_articles) -> Path:
    return wikitext_articles(6)


@pytest.fixture(scope="module")
def tokenizer_dir(corpus_file, tmp_path_factory) -> Path:
    """A 1,000-piece vocabulary trained on the corpus (a small MLM head keeps the tests fast)."""
    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(corpus_file, folder, vocab_size=1000, show_progress=False)
    return folder


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir) -> AlbertHFTokenizer:
    return AlbertHFTokenizer.from_pretrained(tokenizer_dir)


@pytest.fixture(scope="module")
def instances(corpus_file, tokenizer) -> Dataset:
    documents = load_text_documents(corpus_file, split_lines=True)
    return build_pretraining_dataset(documents, tokenizer, max_seq_length=64)


def tiny_model(tokenizer, **extra) -> AlbertForPreTraining:
    overrides = {
        key: float(value) if "." in value else int(value)
        for key, value in (item.split("=") for item in TINY_MODEL.split(","))
    }
    return AlbertForPreTraining(AlbertConfig.preset("base-v2", vocab_size=len(tokenizer), **{**overrides, **extra}))


def training_arguments(output_dir, **overrides) -> PretrainingArguments:
    defaults = dict(
        output_dir=str(output_dir),
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        save_strategy="no",
        seed=0,
        per_device_eval_batch_size=64,
        dataloader_num_workers=0,
    )
    return PretrainingArguments(**{**defaults, **overrides})


# ---- loss normalization and metrics --------------------------------------------------------------------------------


def premasked_dataset(instances, tokenizer) -> Dataset:
    """8 instances masked once and padded to one length; sequences carry 1, 2, 4, ... 128 MLM targets in all so
    that no two micro-batches have the same count."""
    batch = DataCollatorForSOP(tokenizer, seed=0, pad_to_multiple_of=64)([instances[i] for i in range(8)])
    labels = torch.full_like(batch["labels"], -100)
    for row, count in enumerate([1, 2, 4, 8, 16, 32, 5, 3]):
        real = torch.nonzero(batch["attention_mask"][row]).flatten()[1:-1][:count]
        labels[row, real] = batch["input_ids"][row, real]
    batch["labels"] = labels
    return Dataset.from_dict({key: value.tolist() for key, value in batch.items()})


def one_sgd_step(
    dataset, tokenizer, output_dir, per_device: int, accumulation: int, **overrides
) -> dict[str, torch.Tensor]:
    """The parameter change of one SGD step (lr 1, no clipping, no decay): minus the gradient of the step."""
    torch.manual_seed(0)
    model = tiny_model(tokenizer)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = training_arguments(
        output_dir,
        max_steps=1,
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation,
        max_grad_norm=0.0,
        weight_decay=0.0,
        lr_schedule="trainer",
        lr_scheduler_type="constant",
        learning_rate=1.0,
        **overrides,
    )
    trainer = AlbertPretrainingTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=default_data_collator,
        optimizer_cls_and_kwargs=(torch.optim.SGD, {"lr": 1.0}),
    )
    trainer.train()
    return {name: before[name] - p.detach() for name, p in model.named_parameters()}


def test_gradient_accumulation_gives_the_gradient_of_one_large_batch(instances, tokenizer, tmp_path):
    dataset = premasked_dataset(instances, tokenizer)
    large = one_sgd_step(dataset, tokenizer, tmp_path / "large", per_device=8, accumulation=1)
    accumulated = one_sgd_step(dataset, tokenizer, tmp_path / "accumulated", per_device=2, accumulation=4)
    # Logits at every position instead of the masked ones only: the same gradient.
    full_logits = one_sgd_step(
        dataset, tokenizer, tmp_path / "full", per_device=2, accumulation=4, mlm_masked_positions_only=False
    )
    assert any(g.abs().max() > 0 for g in large.values())
    for name in large:
        torch.testing.assert_close(accumulated[name], large[name], rtol=1e-4, atol=1e-7, msg=name)
        torch.testing.assert_close(full_logits[name], large[name], rtol=1e-4, atol=1e-7, msg=name)


@pytest.mark.parametrize("masked_positions_only", [True, False])
def test_logged_mlm_and_sop_metrics_add_up_to_the_loss(instances, tokenizer, tmp_path, masked_positions_only):
    torch.manual_seed(0)
    args = training_arguments(
        tmp_path,
        max_steps=4,
        per_device_train_batch_size=8,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=2,
        learning_rate=1e-3,
        mlm_masked_positions_only=masked_positions_only,
    )
    trainer = AlbertPretrainingTrainer(
        model=tiny_model(tokenizer),
        args=args,
        train_dataset=instances,
        eval_dataset=instances.select(range(48)),
        data_collator=DataCollatorForSOP(tokenizer, seed=0),
    )
    trainer.train()
    train_logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    eval_logs = [entry for entry in trainer.state.log_history if "eval_loss" in entry]
    assert len(train_logs) == 4 and len(eval_logs) == 2
    for entry in train_logs:  # one batch per log: the loss is exactly the sum of the two mean losses
        assert entry["loss"] == pytest.approx(entry["mlm_loss"] + entry["sop_loss"], rel=1e-5)
        assert 0.0 <= entry["mlm_accuracy"] <= 1.0 and 0.0 <= entry["sop_accuracy"] <= 1.0
    for entry in eval_logs:  # one evaluation batch of 48 sequences
        assert entry["eval_loss"] == pytest.approx(entry["eval_mlm_loss"] + entry["eval_sop_loss"], rel=1e-5)
    # Every evaluation masks the held-out set the same way: evaluating the final model again repeats the last one.
    assert eval_logs[0]["eval_mlm_loss"] != eval_logs[1]["eval_mlm_loss"]
    again = trainer.evaluate()
    assert again["eval_mlm_loss"] == pytest.approx(eval_logs[1]["eval_mlm_loss"], rel=1e-6)
    assert again["eval_sop_accuracy"] == eval_logs[1]["eval_sop_accuracy"]


def test_refuses_a_model_without_the_count_arguments(instances, tokenizer, tmp_path):
    from transformers import AlbertConfig as StockConfig
    from transformers import AlbertForPreTraining as StockAlbert

    stock = StockAlbert(
        StockConfig(
            vocab_size=len(tokenizer),
            embedding_size=16,
            hidden_size=32,
            num_attention_heads=2,
            intermediate_size=64,
            num_hidden_layers=1,
        )
    )
    with pytest.raises(ValueError, match="num_sequences_in_batch"):
        AlbertPretrainingTrainer(model=stock, args=training_arguments(tmp_path), train_dataset=instances)


# ---- optimizer choice ----------------------------------------------------------------------------------------------


def test_optimizer_and_schedule_are_chosen_from_the_arguments(instances, tokenizer, tmp_path):
    argv = ["--output_dir", str(tmp_path), "--report_to", "none", "--learning_rate", "0.01", "--warmup_steps", "2"]
    _, _, _, lamb_args = parse_pretraining_args(argv)
    trainer = AlbertPretrainingTrainer(model=tiny_model(tokenizer), args=lamb_args, train_dataset=instances)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    assert isinstance(trainer.optimizer, Lamb)
    decayed, excluded = trainer.optimizer.param_groups
    assert (decayed["weight_decay"], decayed["layer_adaptation"], decayed["eps"]) == (0.01, True, 1e-6)
    assert (excluded["weight_decay"], excluded["layer_adaptation"]) == (0.0, False)
    rates = []
    for _ in range(6):
        rates.append(trainer.lr_scheduler.get_last_lr()[0])
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
    assert rates == pytest.approx([0.0, 0.005, 0.008, 0.007, 0.006, 0.005])  # ALBERT: decay measured from step 0

    _, _, _, adam_args = parse_pretraining_args(
        argv + ["--optimizer", "adamw", "--optim", "adamw_torch", "--lr_schedule", "trainer"]
    )
    trainer = AlbertPretrainingTrainer(model=tiny_model(tokenizer), args=adam_args, train_dataset=instances)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    assert isinstance(trainer.optimizer, torch.optim.AdamW)
    with pytest.raises(OptionError, match="argument --optimizer: invalid choice: 'sgd'"):
        parse_pretraining_args(argv + ["--optimizer", "sgd"])


def test_recipes_are_defaults_that_the_command_line_overrides(tmp_path):
    model_args, data_args, recipe_args, args = parse_pretraining_args(
        ["--recipe", "paper", "--output_dir", str(tmp_path), "--report_to", "none", "--max_steps", "5000"]
    )
    paper = RECIPES["paper"]
    assert (args.learning_rate, args.warmup_steps, args.optimizer) == (0.00176, 3125, "lamb")
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 4096
    assert (data_args.max_seq_length, model_args.config_preset, args.max_steps) == (512, paper["config_preset"], 5000)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (32, 128)
    with pytest.raises(OptionError, match=r"--global_batch_size 100 does not split over per_device_train_batch_size"):
        parse_pretraining_args(["--recipe", "paper", "--output_dir", str(tmp_path), "--global_batch_size", "100"])


# ---- checkpoints ---------------------------------------------------------------------------------------------------


def run_lamb(instances, tokenizer, output_dir, resume_from=None) -> AlbertPretrainingTrainer:
    torch.manual_seed(0)
    args = training_arguments(
        output_dir,
        max_steps=6,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        learning_rate=5e-3,
        warmup_steps=2,
        save_strategy="steps",
        save_steps=3,
        logging_steps=1,
    )
    # With dropout: the resumed run must also restore the random state of the model, not only the data's.
    model = tiny_model(tokenizer, hidden_dropout_prob=0.1, classifier_dropout_prob=0.1)
    trainer = AlbertPretrainingTrainer(
        model=model,
        args=args,
        train_dataset=instances,
        data_collator=DataCollatorForSOP(tokenizer, seed=0),
        processing_class=tokenizer,
    )
    trainer.train(resume_from_checkpoint=resume_from)
    return trainer


def test_resuming_from_a_checkpoint_is_exact(instances, tokenizer, tmp_path):
    straight = run_lamb(instances, tokenizer, tmp_path / "straight")
    checkpoint = tmp_path / "straight" / "checkpoint-3"
    assert (checkpoint / "optimizer.pt").is_file()
    saved_state = torch.load(checkpoint / "optimizer.pt", weights_only=True)
    assert {"exp_avg", "exp_avg_sq"} <= set(next(iter(saved_state["state"].values())))

    resumed = run_lamb(instances, tokenizer, tmp_path / "resumed", resume_from=str(checkpoint))
    assert isinstance(resumed.optimizer.optimizer, Lamb)
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)

    def losses_after_the_checkpoint(trainer) -> list[float]:
        return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry and entry["step"] > 3]

    assert losses_after_the_checkpoint(resumed) == losses_after_the_checkpoint(straight)


# ---- the command and the quickstart --------------------------------------------------------------------------------


def test_pretrain_command_end_to_end(corpus_file, tokenizer_dir, tmp_path):
    output_dir = tmp_path / "model"
    argv = [
        "--train_files",
        str(corpus_file),
        "--lines_are_paragraphs",
        "--validation_documents",
        "2",
        "--tokenizer_name_or_path",
        str(tokenizer_dir),
        "--config_overrides",
        TINY_MODEL,
        "--max_seq_length",
        "64",
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "8",
        "--logging_steps",
        "1",
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
    assert main(argv) == 0
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert {"eval_mlm_accuracy", "eval_sop_accuracy", "eval_mlm_loss", "eval_sop_loss"} <= set(results)
    # transformers' own ALBERT (stock by default): its Auto class loads transformers' class, albert_hf's class loads it too.
    model = AutoModelForPreTraining.from_pretrained(output_dir)
    assert type(model).__module__ == "transformers.models.albert.modeling_albert" and model.config.vocab_size == 1000
    assert isinstance(AlbertForPreTraining.from_pretrained(output_dir), AlbertForPreTraining)
    reloaded = AutoTokenizer.from_pretrained(output_dir)
    assert reloaded("a test.")["input_ids"] == AlbertHFTokenizer.from_pretrained(tokenizer_dir)("a test.")["input_ids"]


def test_pretrain_command_names_bad_arguments(corpus_file, tokenizer_dir, tmp_path):
    base = ["--tokenizer_name_or_path", str(tokenizer_dir), "--output_dir", str(tmp_path), "--report_to", "none"]
    with pytest.raises(ValueError, match="--train_files"):
        main(base)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        main(base + ["--train_files", str(corpus_file), "--config_overrides", TINY_MODEL, "--max_seq_length", "128"])
    with pytest.raises(FileNotFoundError, match="nowhere.txt"):
        main(base + ["--train_files", str(tmp_path / "nowhere.txt")])


def test_quickstart_fast(tmp_path, capsys):
    assert quickstart_main(["--fast", "--output_dir", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    assert "MLM accuracy" in report and "SOP accuracy" in report
    assert (tmp_path / "learning_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    model = AutoModelForPreTraining.from_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    batch = tokenizer("The assert statement.", "It raises AssertionError.", return_tensors="pt")
    assert model(**batch).sop_logits.shape == (1, 2)
