"""Behaviour that albert_hf's Trainers keep through public transformers hooks where they once used private Trainer
names: the ALBERT schedule rebuilt by each `train()`, a fresh model built from its config (partitioned under
ZeRO-3, with the config's dtype and attention implementation), a finished run's checkpoint loaded in every weights
layout and the final save of gathered weights by Trainer itself, the loss the loss checks read (a forward hook, not a `training_step`
override), and the shape of the Trainer classes (no mixins)."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
from pathlib import Path

import pytest
import torch
from helpers import processes
from safetensors.torch import save_file
from transformers import Trainer, TrainerCallback, TrainingArguments

from albert_hf.arguments import ModelArguments
from albert_hf.configuration import AlbertConfig
from albert_hf.job_setup import build_model
from albert_hf.modeling import AlbertForPreTraining, AlbertForSequenceClassification
from albert_hf.pretraining.trainer import AlbertPretrainingTrainer, PretrainingArguments
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.training.transformers_internals import load_checkpoint_weights, save_weights


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class PretrainingRows(torch.utils.data.Dataset):
    """Fixed random rows with masked-token and sentence-order labels."""

    def __init__(self, rows: int = 8, length: int = 8):
        generator = torch.Generator().manual_seed(0)
        self.input_ids = torch.randint(5, 60, (rows, length), generator=generator)
        self.labels = torch.where(torch.rand(rows, length, generator=generator) < 0.3, self.input_ids, -100)
        self.labels[:, 0] = self.input_ids[:, 0]  # at least one masked token per row
        self.order = torch.randint(0, 2, (rows,), generator=generator)

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids[index],
            "labels": self.labels[index],
            "sentence_order_label": self.order[index],
        }


def tiny_pretraining_model() -> AlbertForPreTraining:
    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=16,
    )  # fmt: skip
    return AlbertForPreTraining(config)


class RecordLearningRates(TrainerCallback):
    """The learning rate each optimizer step uses (read before the step)."""

    def __init__(self):
        self.rates: list[float] = []

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        self.rates.append(optimizer.param_groups[0]["lr"])


def test_the_albert_schedule_gives_each_step_its_rate_and_is_rebuilt_by_each_train(tmp_path):
    """Warmup over 2 steps, then `lr * (1 - step / 6)` counted from step 0 (ALBERT's decay): by hand, for every one
    of the 6 steps; a second `train()` on the same Trainer starts the schedule again instead of staying at its end."""
    record = RecordLearningRates()
    args = PretrainingArguments(
        output_dir=str(tmp_path),
        max_steps=6,
        per_device_train_batch_size=2,
        learning_rate=0.01,
        warmup_steps=2,
        lr_schedule="albert",
        optimizer="adamw",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = AlbertPretrainingTrainer(
        model=tiny_pretraining_model(), args=args, train_dataset=PretrainingRows(), callbacks=[record]
    )
    expected = [0.0, 0.005, 0.01 * 4 / 6, 0.01 * 3 / 6, 0.01 * 2 / 6, 0.01 * 1 / 6]
    trainer.train()
    assert record.rates == pytest.approx(expected, rel=1e-12, abs=0)
    record.rates.clear()
    trainer.train()
    assert record.rates == pytest.approx(expected, rel=1e-12, abs=0)


# --------------------------------------------------------------------------------------------------------------------
# A fresh model built from its config: through the Auto classes' public `from_config`
# --------------------------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow  # DeepSpeed ZeRO-3 in a subprocess, which builds DeepSpeed's CPU op at first use
@pytest.mark.needs("deepspeed")
def test_a_model_built_from_its_config_under_zero3_comes_out_partitioned_and_initialized(tmp_path):
    """Every tensor partitioned as it is built (none left whole in the process), and the gathered weights are the
    model's initialization: normal(0, initializer_range 0.02) matrices, LayerNorm weights 1, zero biases. Built by
    the constructor instead, no tensor would be partitioned."""
    script = Path(__file__).parent / "distributed" / "zero3_from_config.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DS_BUILD_OPS": "0", "PYTHONPATH": str(Path(__file__).parents[1])}
    result = processes.run(
        [sys.executable, str(script), str(tmp_path), str(free_port())],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    reference = dict(AlbertForSequenceClassification(tiny_classifier_config()).named_parameters())
    assert record.keys() == reference.keys()
    for name, stats in record.items():
        assert stats["numel"] == 0 and stats["ds_numel"] == reference[name].numel(), name
        if "LayerNorm" in name or "layer_norm" in name:
            assert (stats["mean"], stats["std"]) == ((1.0, 0.0) if name.endswith("weight") else (0.0, 0.0)), name
        elif name.endswith("bias"):
            assert (stats["mean"], stats["std"]) == (0.0, 0.0), name
        else:  # at least 32 samples of normal(0, 0.02): their std lies within 0.02 x (1 +- 0.5)
            assert 0.01 < stats["std"] < 0.03, name


def tiny_classifier_config(**fields) -> AlbertConfig:
    """The config zero3_from_config.py builds its model of."""
    return AlbertConfig(
        vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=16, **fields,
    )  # fmt: skip


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_a_model_built_from_its_config_takes_its_dtype_and_attention_implementation(attn_implementation):
    config = tiny_classifier_config(dtype="bfloat16", attn_implementation=attn_implementation)
    model = build_model(AlbertForSequenceClassification, ModelArguments(), config)
    assert type(model) is AlbertForSequenceClassification
    assert {parameter.dtype for parameter in model.parameters()} == {torch.bfloat16}
    assert model.config._attn_implementation == attn_implementation


def test_a_class_of_ones_own_is_built_by_its_constructor_with_the_configs_dtype_and_attention():
    """A forked script's head (a subclass albert_hf registers with no Auto class) is built fresh too."""

    class Custom(AlbertForSequenceClassification):
        pass

    model = build_model(Custom, ModelArguments(), tiny_classifier_config(dtype="bfloat16", attn_implementation="eager"))
    assert type(model) is Custom
    assert {parameter.dtype for parameter in model.parameters()} == {torch.bfloat16}
    assert model.config._attn_implementation == "eager"


# --------------------------------------------------------------------------------------------------------------------
# A Trainer's model written and read by Trainer itself (training/transformers_internals.py: `_load_from_checkpoint`,
# `_save`), what albert_hf relies on them for
# --------------------------------------------------------------------------------------------------------------------


def trained_pretraining_model() -> AlbertForPreTraining:
    """A model whose weights differ from a fresh one's: what a finished run's checkpoint holds."""
    model = tiny_pretraining_model()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))
    return model


def checkpoint_layouts(model: AlbertForPreTraining, folder: Path) -> dict[str, Path]:
    """The weights layouts of a Trainer checkpoint: one safetensors file, shards with an index, one torch file."""
    layouts = {name: folder / name for name in ("whole", "sharded", "torch")}
    model.save_pretrained(layouts["whole"])
    model.save_pretrained(layouts["sharded"], max_shard_size="4KB")
    layouts["torch"].mkdir()
    torch.save(model.state_dict(), layouts["torch"] / "pytorch_model.bin")
    assert len(list(layouts["sharded"].glob("model-*.safetensors"))) > 1
    return layouts


def plain_trainer(model, output_dir: Path, **kwargs) -> Trainer:
    args = TrainingArguments(output_dir=str(output_dir), report_to=[], use_cpu=True)
    return Trainer(model=model, args=args, **kwargs)


def test_a_checkpoint_of_every_layout_loads_the_trained_weights(tmp_path):
    """What a finished run relaunched relies on (`load_checkpoint_weights`: Trainer's `_load_from_checkpoint`): every
    tensor of the fresh model ends equal to the trained one's, in every layout, the decoder tied to the word
    embeddings (left out of the safetensors files) included."""
    trained = trained_pretraining_model()
    for layout, folder in checkpoint_layouts(trained, tmp_path).items():
        fresh = tiny_pretraining_model()
        load_checkpoint_weights(plain_trainer(fresh, tmp_path / "run"), str(folder))
        loaded, expected = fresh.state_dict(), trained.state_dict()
        assert loaded.keys() == expected.keys()
        for name in expected:
            assert torch.equal(loaded[name], expected[name]), (layout, name)


def test_a_checkpoint_missing_a_tensor_names_it(tmp_path, caplog):
    weights = {
        k: v for k, v in trained_pretraining_model().state_dict().items() if k != "sop_classifier.classifier.bias"
    }
    weights["extra.weight"] = torch.zeros(1)
    save_file(
        {k: v.contiguous() for k, v in weights.items() if "decoder.weight" not in k}, tmp_path / "model.safetensors"
    )
    with caplog.at_level(logging.WARNING):
        load_checkpoint_weights(plain_trainer(tiny_pretraining_model(), tmp_path / "run"), str(tmp_path))
    assert "sop_classifier.classifier.bias" in caplog.text and "missing keys" in caplog.text
    assert "unexpected keys" in caplog.text and "extra.weight" in caplog.text
    with pytest.raises(ValueError, match="Can't find a valid checkpoint"):
        load_checkpoint_weights(plain_trainer(tiny_pretraining_model(), tmp_path / "run"), str(tmp_path / "missing"))


def test_the_gathered_model_is_saved_with_its_config_tokenizer_and_arguments(tmp_path, spiece_model):
    """What the final save under FSDP relies on (`save_weights`: Trainer's `_save` of given full weights, those gathered
    from the shards; tests/test_lamb_distributed.py checks them against one process): they load back equal, with the
    tokenizer and the training arguments."""
    tokenizer = AlbertHFTokenizer(vocab_file=str(spiece_model))
    trained = trained_pretraining_model()
    args = PretrainingArguments(output_dir=str(tmp_path / "run"), report_to=[], use_cpu=True)
    trainer = AlbertPretrainingTrainer(model=tiny_pretraining_model(), args=args, processing_class=tokenizer)
    save_weights(trainer, str(tmp_path / "final"), trained.state_dict())
    reloaded = AlbertForPreTraining.from_pretrained(tmp_path / "final")
    for name, tensor in trained.state_dict().items():
        assert torch.equal(reloaded.state_dict()[name], tensor), name
    assert {"config.json", "model.safetensors", "spiece.model", "tokenizer_config.json", "training_args.bin"} <= {
        path.name for path in (tmp_path / "final").iterdir()
    }
    again = AlbertHFTokenizer.from_pretrained(tmp_path / "final")
    assert again("Hello world, 1990,")["input_ids"] == tokenizer("Hello world, 1990,")["input_ids"]
    assert torch.load(tmp_path / "final" / "training_args.bin", weights_only=False).output_dir == args.output_dir


# --------------------------------------------------------------------------------------------------------------------
# The Trainers' shape, and the training loss the loss checks read
# --------------------------------------------------------------------------------------------------------------------


def test_albert_hf_trainers_are_at_most_two_classes_above_trainer_in_one_line():
    """Each albert_hf Trainer reaches `Trainer` through at most one class of its own (so it is at most two levels
    above `Trainer`), each with a single base: no mixin whose place among the bases matters. Every Trainer subclass
    the package defines is looked at, found by walking the subclasses of `Trainer` after importing every module."""
    import importlib
    import pkgutil

    import albert_hf

    for module in pkgutil.walk_packages(albert_hf.__path__, "albert_hf."):
        if ".scripts." not in module.name:
            importlib.import_module(module.name)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    ours = {cls for cls in subclasses(Trainer) if cls.__module__.startswith("albert_hf.")}
    assert {cls.__name__ for cls in ours} >= {"AlbertTrainer", "AlbertPretrainingTrainer", "SquadTrainer"}
    for trainer_class in ours:
        between = trainer_class.__mro__[1 : trainer_class.__mro__.index(Trainer)]
        assert len(between) <= 1, (trainer_class, between)
        assert all(len(cls.__bases__) == 1 for cls in (trainer_class, *between)), trainer_class


class RecordedTrainer(Trainer):
    """A plain Trainer that records what its `training_step` returns: the reference for `TrainingLosses`."""

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.returned.append(loss.clone())
        return loss


@pytest.mark.parametrize("loss_kwargs", [True, False])
def test_the_loss_read_from_the_model_output_is_what_training_step_returns(tmp_path, loss_kwargs):
    """`TrainingLosses` (a forward hook on the model) gives each training micro-batch's loss exactly as Trainer's own
    `training_step` returns it, with gradient accumulation: normalized by the global target count inside the model
    (`model_accepts_loss_kwargs`), or divided by the step's micro-batches by Trainer; evaluation passes left out."""
    from transformers import TrainingArguments

    from albert_hf.training.non_finite import TrainingLosses

    torch.manual_seed(0)
    arguments = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = RecordedTrainer(
        model=tiny_pretraining_model(),
        args=arguments,
        train_dataset=PretrainingRows(16),
        eval_dataset=PretrainingRows(4),
    )
    trainer.model_accepts_loss_kwargs = loss_kwargs
    trainer.returned, read = [], []
    losses = TrainingLosses(trainer, lambda loss, model_loss: read.append(loss.clone()))

    class Attach(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            losses.attach()

    trainer.add_callback(Attach())
    trainer.train()
    assert len(trainer.returned) == 6
    assert [loss.item() for loss in read] == [loss.item() for loss in trainer.returned]
