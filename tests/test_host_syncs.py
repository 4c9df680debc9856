"""Host syncs in the training steps of the jobs' default path: at most one per optimizer step, none per forward.

A host sync is a tensor read back by the host (`.item()`, `.tolist()`, `bool(tensor)`, `int(tensor)`,
`float(tensor)`, `tensor.__index__`): on an accelerator the host waits there for every queued kernel, and the device
then waits for the host. They are counted here by wrapping those methods of `torch.Tensor` while the steps after the
first run (the first forward of a model checks its ids' values on the host, once: `AlbertModel.check_input_values`),
in the real jobs (`albert-hf glue`, `albert-hf pretrain`), two micro-batches per step, each sync named by the innermost
frame outside torch that asked for it. The one sync left per step is the loss check's (`agree_on_step`: with several
processes, the same reduction agrees on a SIGTERM). Before, each forward read its ids twice per id tensor
(`check_inputs`), Trainer read each micro-batch's loss twice for its NaN filter, and the loss check once per step.
"""

from __future__ import annotations

import collections
import traceback
from pathlib import Path

import pytest
import torch
import transformers.trainer
from helpers.tiny import TINY_TWO_LAYER_OVERRIDES
from transformers import TrainerCallback

READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")
PACKAGE = str(Path(__file__).resolve().parents[1] / "albert_hf")


class HostSyncs(TrainerCallback):
    """Counts the host syncs of the optimizer steps after the first, by the frame that asked for each."""

    def __init__(self):
        self.counting, self.steps = False, 0
        self.by_caller: collections.Counter = collections.Counter()

    def on_step_begin(self, args, state, control, **kwargs):
        self.counting = state.global_step >= 1

    def on_step_end(self, args, state, control, **kwargs):
        self.steps += self.counting
        self.counting = False  # what follows a step's end (logs, saves) is no training step

    def record(self, name: str) -> None:
        if not self.counting:
            return
        for frame in reversed(traceback.extract_stack()[:-2]):  # without this method and the wrapper
            if f"{os_sep}torch{os_sep}" not in frame.filename:
                where = "albert_hf" if frame.filename.startswith(PACKAGE) else frame.filename.rsplit("/", 2)[-2]
                self.by_caller[f"{name} in {where}: {Path(frame.filename).name}:{frame.name}"] += 1
                return

    @property
    def per_step(self) -> float:
        return sum(self.by_caller.values()) / self.steps


os_sep = "/"


@pytest.fixture
def host_syncs(monkeypatch) -> HostSyncs:
    """A `HostSyncs` every Trainer of the test gets (appended to Trainer's default callbacks)."""
    counter = HostSyncs()
    for name in READS:
        original = getattr(torch.Tensor, name)

        def read(tensor, *args, __original=original, __name=name, **kwargs):
            counter.record(__name)
            return __original(tensor, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, read)
    monkeypatch.setattr(transformers.trainer, "DEFAULT_CALLBACKS", [*transformers.trainer.DEFAULT_CALLBACKS, counter])
    return counter


QUIET = ["--report_to", "none", "--use_cpu", "true", "--disable_tqdm", "true", "--save_strategy", "no"]
STEPS = ["--max_steps", "5", "--gradient_accumulation_steps", "2", "--per_device_train_batch_size", "4"]


def test_a_fine_tuning_step_reads_the_device_once(host_syncs, shared_data, spiece_model, tmp_path):
    from albert_hf.scripts import glue

    argv = ["--task_name", "rte", "--data_dir", str(shared_data / "glue" / "RTE"), "--do_train"]
    argv += ["--max_train_samples", "40", "--max_seq_length", "64", "--tokenizer_name_or_path", str(spiece_model)]
    argv += ["--config_overrides", TINY_TWO_LAYER_OVERRIDES, "--output_dir", str(tmp_path), *STEPS, *QUIET]
    assert glue.main(argv) == 0
    assert host_syncs.steps == 4
    assert host_syncs.per_step == 1, dict(host_syncs.by_caller)
    assert set(host_syncs.by_caller) == {"tolist in albert_hf: preemption.py:agree_on_step"}


def test_a_pretraining_step_reads_the_device_once(host_syncs, wikitext_articles, spiece_model, tmp_path):
    """With the divergence guard (the default), which judges each step's loss."""
    from albert_hf.scripts import pretrain

    argv = ["--train_files", str(wikitext_articles(3)), "--tokenizer_name_or_path", str(spiece_model)]
    argv += ["--config_overrides", TINY_TWO_LAYER_OVERRIDES, "--max_seq_length", "64", "--output_dir", str(tmp_path)]
    argv += ["--logging_steps", "100", *STEPS, *QUIET]
    assert pretrain.main(argv) == 0
    assert host_syncs.steps == 4
    assert host_syncs.per_step == 1, dict(host_syncs.by_caller)
    assert set(host_syncs.by_caller) == {"tolist in albert_hf: preemption.py:agree_on_step"}
