"""Preemption: SIGTERM (or SIGUSR1) during training writes a complete checkpoint of that step and stops non-zero.

Real signals to real processes: `albert-hf pretrain` and `albert-hf glue` run in a subprocess, and the test sends
SIGTERM once the child has logged its first step; a plain `transformers.Trainer` with `CheckpointOnSignal` runs in a
subprocess that waits inside step 4 until the test has sent the signal, so the step the checkpoint must hold is known.
Each is compared with what an uninterrupted run writes: the same weights (bit for bit) after a resume, or in the
checkpoint of the same step. The subprocesses use the threads of the test's own process, so float reductions, and
with them the weights, are the same.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
from helpers import processes
from helpers.command_line import CLI_ENV
from helpers.trainer import (
    LAMB_RECIPE,
    REPO_ROOT,
    TINY_MODEL,
    RandomSequences,
    assert_same_run,
    tiny_arguments,
    tiny_classifier,
)
from safetensors.torch import load_file
from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

from albert_hf.errors import StoppedBySignal, UserError
from albert_hf.training.callbacks import resume_training
from albert_hf.training.preemption import CheckpointOnSignal
from albert_hf.training.reliability import checkpoint_problem

# What a job writes only when it finished: none of it may be in the output folder of a stopped one.
FINAL_FILES = ("model.safetensors", "config.json", "README.md", "train_results.json", "all_results.json")
# The first logged training step: pretraining's progress line, or Trainer's printed log dictionary (fine-tuning).
FIRST_STEP_LOGGED = re.compile(r"step 1/\d+: loss|\{'loss'")
QUIET = ["--report_to", "none", "--use_cpu", "--disable_tqdm", "true", "--logging_steps", "1"]
QUIET += ["--dataloader_num_workers", "0", "--save_strategy", "steps", "--save_steps", "100"]  # no periodic save


@pytest.fixture(autouse=True)
def one_thread():
    """One thread here and in every child (`child_environment`): with more, the BLAS may use fewer threads on a busy
    machine than on an idle one, and a reduction summed in another order is not bit for bit the run it is compared
    with."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def child_environment() -> dict[str, str]:
    # Unbuffered, so the first step's line arrives when it is written; the threads of this process (`one_thread`).
    return {**CLI_ENV, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(torch.get_num_threads())}


class SignalledCommand:
    """`albert-hf <argv>` in a subprocess, sent SIGTERM as soon as it logs its first training step; its output is
    read in a thread, so that the test can run the reference meanwhile."""

    def __init__(self, argv: list[str]):
        self.process = processes.start(
            [sys.executable, "-m", "albert_hf.cli", *argv],
            env=child_environment(),
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.signalled = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)
            if not self.signalled and FIRST_STEP_LOGGED.search(line):
                os.kill(self.process.pid, signal.SIGTERM)
                self.signalled = True

    def finish(self) -> tuple[int, str]:
        self.reader.join(timeout=600)
        return self.process.wait(timeout=60), "".join(self.lines)


def assert_stopped_with_a_checkpoint(status: int, output: str, command: str, output_dir: Path, max_steps: int) -> int:
    """Exit status 143, one line naming checkpoint-N, that checkpoint complete at step N and nothing final written;
    returns N."""
    assert status == 128 + signal.SIGTERM, f"exit status {status}:\n{output[-3000:]}"
    stopped = re.findall(rf"^albert-hf {command}: stopped by SIGTERM at step (\d+): (\S+) written; resume with "
                         r"--resume_from_checkpoint latest$", output, flags=re.MULTILINE)  # fmt: skip
    assert len(stopped) == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    step, checkpoint = int(stopped[0][0]), stopped[0][1]
    assert 1 <= step < max_steps, output[-3000:]
    assert checkpoint == str(output_dir / f"checkpoint-{step}")
    assert get_last_checkpoint(str(output_dir)) == checkpoint  # transformers' own answer to "latest"
    assert checkpoint_problem(checkpoint, marked=True) is None  # complete, and marked so by the job's callbacks
    assert json.loads((Path(checkpoint) / "trainer_state.json").read_text())["global_step"] == step
    assert sorted(os.listdir(output_dir)) == [f"checkpoint-{step}"], "no final file beside it"
    return step


def assert_same_weights(first: Path, second: Path) -> None:
    one, other = load_file(first), load_file(second)
    assert one.keys() == other.keys()
    unequal = [name for name in one if not torch.equal(one[name], other[name])]
    assert not unequal, f"{first} and {second} differ in {unequal}"


# --------------------------------------------------------------------------------------------------------------------
# The jobs: exit status 143, checkpoint of the step, nothing final, exact resume
# --------------------------------------------------------------------------------------------------------------------


def pretraining_argv(corpus: Path, spiece_model: Path, output_dir: Path, cache_dir: Path) -> list[str]:
    return [
        *("--train_files", str(corpus), "--lines_are_paragraphs", "--cache_dir", str(cache_dir)),
        *("--tokenizer_name_or_path", str(spiece_model), "--config_overrides", TINY_MODEL),
        *("--max_seq_length", "64", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2"),
        *("--max_steps", "12", *LAMB_RECIPE, "--output_dir", str(output_dir), *QUIET),
    ]


@pytest.mark.slow  # a tiny pretraining run in a subprocess beside one in this process, then the resume: about 30 s
def test_pretrain_stopped_by_sigterm_checkpoints_its_step_and_resumes_exactly(
    wikitext_articles, spiece_model, tmp_path
):
    from albert_hf.scripts import pretrain as pretraining

    corpus = wikitext_articles(3)
    stopped_dir, reference_dir = tmp_path / "stopped", tmp_path / "reference"
    child = SignalledCommand(["pretrain", *pretraining_argv(corpus, spiece_model, stopped_dir, tmp_path / "cache-1")])
    argv = pretraining_argv(corpus, spiece_model, reference_dir, tmp_path / "cache")
    assert pretraining.main(argv) == 0  # the uninterrupted run, meanwhile
    status, output = child.finish()
    step = assert_stopped_with_a_checkpoint(status, output, "pretrain", stopped_dir, max_steps=12)

    argv = pretraining_argv(corpus, spiece_model, stopped_dir, tmp_path / "cache")
    assert pretraining.main([*argv, "--resume_from_checkpoint", "latest"]) == 0
    assert_same_weights(reference_dir / "model.safetensors", stopped_dir / "model.safetensors")
    assert_same_run(reference_dir, stopped_dir, final_step=12, context=f"stopped by SIGTERM at step {step}")


@pytest.mark.slow  # one tiny GLUE run in a subprocess: about 20 s
def test_glue_stopped_by_sigterm_checkpoints_its_step_and_writes_no_results(shared_data, spiece_model, tmp_path):
    output_dir = tmp_path / "rte"
    argv = [
        *("glue", "--task_name", "rte", "--data_dir", str(shared_data / "glue" / "RTE"), "--do_train", "--do_eval"),
        *("--max_train_samples", "20", "--max_eval_samples", "8", "--max_seq_length", "64"),
        *("--per_device_train_batch_size", "4", "--max_steps", "20", "--learning_rate", "1e-3", "--seed", "11"),
        *("--tokenizer_name_or_path", str(spiece_model), "--config_overrides", TINY_MODEL),
        *("--output_dir", str(output_dir), *QUIET),
    ]
    status, output = SignalledCommand(argv).finish()
    assert_stopped_with_a_checkpoint(status, output, "glue", output_dir, max_steps=20)
    assert "eval_loss" not in output, "no evaluation after the signal"


# --------------------------------------------------------------------------------------------------------------------
# A plain transformers.Trainer with the callback
# --------------------------------------------------------------------------------------------------------------------

# The child: a plain Trainer with the callback, one process or one per rank under torchrun. Each rank says, inside
# step 4 (before its batch), its pid, then waits until the test has sent the signal; after train() it writes what it
# saw to rank<N>.json and exits with the status of the StoppedBySignal (0 without one).
# The same Trainer run uninterrupted, with a checkpoint at step 4: the reference of the stopped run's checkpoint.
REFERENCE_CHILD = """
    import sys

    sys.path.insert(0, {tests!r})
    from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier
    from transformers import Trainer

    Trainer(
        model=tiny_classifier(),
        args=tiny_arguments({output_dir!r}, max_steps=8, save_steps=4),
        train_dataset=RandomSequences(),
    ).train()
"""

TRAINER_CHILD = """
    import json, os, sys, time
    from pathlib import Path

    sys.path.insert(0, {tests!r})
    import torch
    from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier
    from transformers import Trainer, TrainerCallback

    from albert_hf.errors import StoppedBySignal
    from albert_hf.training.preemption import CheckpointOnSignal

    output_dir, go_on = Path({output_dir!r}), Path({go_on!r})


    class WaitInStep4(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 3:
                # One write per line: the ranks share the pipe, and print's text and newline are two writes.
                os.write(1, f"rank {{args.process_index}} pid {{os.getpid()}} waiting in step 4\\n".encode())
                deadline = time.monotonic() + 120
                while not go_on.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)


    stop_on_signal = CheckpointOnSignal()
    trainer = Trainer(
        model=tiny_classifier(),
        args=tiny_arguments(output_dir, max_steps=8, save_steps=100),
        train_dataset=RandomSequences(),
        callbacks=[WaitInStep4(), stop_on_signal],
    )
    trainer.train()
    try:
        stop_on_signal.raise_if_stopped()
        status, stopped = 0, None
    except StoppedBySignal as stop:
        status, stopped = stop.exit_status, str(stop)
    if not stopped:
        trainer.save_model()
    record = {{"world_size": trainer.args.world_size, "stopped": stopped, "received": stop_on_signal.received}}
    (output_dir / f"rank{{trainer.args.process_index}}.json").write_text(json.dumps(record))
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    os._exit(status)
"""


def signal_trainer_child(tmp_path: Path, launcher: list[str], rank: int, **env: str) -> tuple[int, str, Path]:
    """Run [`TRAINER_CHILD`] under `launcher` (in a session of its own), send SIGTERM to `rank` alone while every rank
    waits in step 4, then let them go on: (exit status, output, output folder). If the ranks disagree they hang in
    a collective: the test then ends them all and fails."""
    output_dir, go_on, script = tmp_path / "stopped", tmp_path / "signal-sent", tmp_path / "trainer_child.py"
    paths = dict(tests=str(REPO_ROOT / "tests"), output_dir=str(output_dir), go_on=str(go_on))
    script.write_text(textwrap.dedent(TRAINER_CHILD.format(**paths)))
    environment = {**child_environment(), **env}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU"):
        environment.pop(name, None)
    child = processes.start(
        [*launcher, str(script)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines = []
    for line in child.stdout:
        lines.append(line)
        waiting = re.search(rf"rank {rank} pid (\d+) waiting in step 4", line)
        if waiting:
            os.kill(int(waiting.group(1)), signal.SIGTERM)
            go_on.touch()
            break
    try:
        output = "".join(lines) + child.communicate(timeout=240)[0]
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        pytest.fail("the ranks did not stop together (hung in a collective):\n" + "".join(lines)[-3000:])
    return child.returncode, output, output_dir


@pytest.mark.slow  # a run signalled in a subprocess, its reference in another
def test_a_plain_trainer_writes_its_own_checkpoint_of_the_step_the_signal_arrived_in(tmp_path):
    status, output, output_dir = signal_trainer_child(tmp_path, [sys.executable], rank=0)
    assert status == 143, output[-3000:]
    checkpoint = output_dir / "checkpoint-4"
    record = json.loads((output_dir / "rank0.json").read_text())
    assert record["stopped"].startswith(f"stopped by SIGTERM at step 4: {checkpoint} written"), record
    assert get_last_checkpoint(str(output_dir)) == str(checkpoint)
    assert checkpoint_problem(checkpoint) is None
    assert not (output_dir / "model.safetensors").exists()

    # The uninterrupted run's checkpoint of step 4 holds the same model and optimizer state. It runs in a fresh
    # process too, like the stopped one: what earlier tests left in this process (global torch settings) cannot
    # make the two differ.
    reference = tmp_path / "reference"
    script = tmp_path / "reference_child.py"
    script.write_text(
        textwrap.dedent(REFERENCE_CHILD.format(tests=str(REPO_ROOT / "tests"), output_dir=str(reference)))
    )
    finished = processes.run([sys.executable, str(script)], env=child_environment(), capture_output=True, text=True)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert_same_weights(reference / "checkpoint-4" / "model.safetensors", checkpoint / "model.safetensors")
    optimizers = [
        torch.load(run / "optimizer.pt", weights_only=True) for run in (reference / "checkpoint-4", checkpoint)
    ]
    for index, state in optimizers[0]["state"].items():
        for key, value in state.items():
            assert torch.equal(value, optimizers[1]["state"][index][key]), (index, key)


# --------------------------------------------------------------------------------------------------------------------
# In this process: when the handlers are there, SIGUSR1, a signal after the last step
# --------------------------------------------------------------------------------------------------------------------


class SendSignal(TrainerCallback):
    """Send `number` to this process as step `step` begins (noting the handler at each step's beginning), or after
    the last step's end when no step is given."""

    def __init__(self, number: int, step: int | None = None):
        self.number, self.step = number, step
        self.handlers: list = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.handlers.append(signal.getsignal(self.number))
        if state.global_step + 1 == self.step:
            os.kill(os.getpid(), self.number)

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.step is None and state.global_step == state.max_steps:
            os.kill(os.getpid(), self.number)


@pytest.fixture
def recorded_sigterm():
    """SIGTERM handled by a recorder during the test (the previous handler back afterwards): the signals it got."""
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: received.append(number))
    yield received
    signal.signal(signal.SIGTERM, previous)


def test_handlers_exist_only_during_train_and_a_signal_after_the_last_step_is_raised_again(tmp_path, recorded_sigterm):
    recorder = signal.getsignal(signal.SIGTERM)
    sender, stop_on_signal = SendSignal(signal.SIGTERM), CheckpointOnSignal()
    trainer = Trainer(
        model=tiny_classifier(),
        args=tiny_arguments(tmp_path, max_steps=3, save_steps=100),
        train_dataset=RandomSequences(),
        callbacks=[sender, stop_on_signal],
    )
    trainer.train()
    assert all(handler == stop_on_signal._note for handler in sender.handlers) and len(sender.handlers) == 3
    assert signal.getsignal(signal.SIGTERM) is recorder  # put back
    assert recorded_sigterm == [signal.SIGTERM]  # the signal noted after the last step reached the previous handler
    assert stop_on_signal.stopped_by_signal is None
    stop_on_signal.raise_if_stopped()  # training finished: nothing to raise
    assert sorted(path.name for path in tmp_path.glob("checkpoint-*")) == ["checkpoint-3"]  # the end-of-training save


class Fails(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == 1:
            raise RuntimeError("a failing step")


def test_a_signal_after_a_train_that_raised_reaches_the_previous_handler(tmp_path, recorded_sigterm):
    """Trainer calls no `on_train_end` when `train()` raises, so the handlers of a callback attached for good (the
    reliability plugin's) stay in place: the first signal after it goes to the previous handler all the same, which
    is put back, and a later `train()` chains to the previous handler, not to the stale one."""
    recorder = signal.getsignal(signal.SIGTERM)

    def raising_run() -> CheckpointOnSignal:
        stop_on_signal = CheckpointOnSignal()
        trainer = Trainer(
            model=tiny_classifier(),
            args=tiny_arguments(tmp_path, max_steps=3, save_steps=100),
            train_dataset=RandomSequences(),
            callbacks=[Fails(), stop_on_signal],
        )
        with pytest.raises(RuntimeError, match="a failing step"):
            trainer.train()
        assert signal.getsignal(signal.SIGTERM) == stop_on_signal._note  # left in place by the raise
        return stop_on_signal

    stale = raising_run()
    os.kill(os.getpid(), signal.SIGTERM)
    assert recorded_sigterm == [signal.SIGTERM] and stale.received is None
    assert signal.getsignal(signal.SIGTERM) is recorder

    raising_run()
    later = CheckpointOnSignal()
    later.install_handlers()  # a later run's: chains past the stale handler
    assert later._previous[signal.SIGTERM] is recorder
    later.restore_handlers()
    assert signal.getsignal(signal.SIGTERM) is recorder


def test_sigusr1_stops_with_status_138_after_the_checkpoint_of_its_step(tmp_path, recorded_sigterm):
    trainer = Trainer(
        model=tiny_classifier(),
        args=tiny_arguments(tmp_path, max_steps=6, save_strategy="no"),  # a preempted run saves all the same
        train_dataset=RandomSequences(),
        callbacks=[SendSignal(signal.SIGUSR1, step=2)],
    )
    with pytest.raises(StoppedBySignal) as stopped:
        resume_training(trainer)
    assert stopped.value.exit_status == 138 and stopped.value.step == 2
    assert str(stopped.value) == (
        f"stopped by SIGUSR1 at step 2: {tmp_path / 'checkpoint-2'} written; resume with --resume_from_checkpoint latest"
    )
    assert checkpoint_problem(tmp_path / "checkpoint-2") is None
    assert sorted(path.name for path in tmp_path.glob("checkpoint-*")) == ["checkpoint-2"]
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # put back
    assert recorded_sigterm == []


def test_transformers_jit_checkpoint_is_refused_beside_it(tmp_path, recorded_sigterm):
    recorder = signal.getsignal(signal.SIGTERM)
    try:
        trainer = Trainer(
            model=tiny_classifier(),
            args=tiny_arguments(tmp_path, max_steps=2, enable_jit_checkpoint=True),
            train_dataset=RandomSequences(),
            callbacks=[CheckpointOnSignal()],
        )
        with pytest.raises(UserError, match="--enable_jit_checkpoint"):
            trainer.train()
    finally:
        signal.signal(signal.SIGTERM, recorder)  # transformers installed its own handler when the Trainer was built


# --------------------------------------------------------------------------------------------------------------------
# Two processes: the rank that got the signal and the one that did not stop at the same step
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.distributed  # two processes under torchrun: about 30 s
def test_a_signal_to_one_rank_stops_both_at_the_same_step_with_one_checkpoint(tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    # Rank 1 only, as the scheduler's daemon of one node of a multi-node job would.
    status, output, output_dir = signal_trainer_child(tmp_path, torchrun, rank=1, OMP_NUM_THREADS="1")
    assert status != 0, output[-3000:]  # torchrun reports its workers' status 143 as a failure

    records = [json.loads((output_dir / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [record["world_size"] for record in records] == [2, 2]
    assert [record["received"] for record in records] == [None, signal.SIGTERM]
    checkpoint = output_dir / "checkpoint-4"
    for record in records:
        assert record["stopped"].startswith(f"stopped by SIGTERM at step 4: {checkpoint} written"), record
    assert sorted(path.name for path in output_dir.glob("checkpoint-*")) == ["checkpoint-4"]
    assert checkpoint_problem(checkpoint, world_size=2) is None  # both ranks' RNG states in it
