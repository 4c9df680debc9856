"""Behaviour that albert_hf's Trainers keep through public transformers hooks where they once used private Trainer
names: the ALBERT schedule rebuilt by each `train()`."""

from __future__ import annotations

import pytest
import torch
from transformers import TrainerCallback

from albert_hf.configuration import AlbertConfig
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.trainer import AlbertPretrainingTrainer, PretrainingArguments


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
