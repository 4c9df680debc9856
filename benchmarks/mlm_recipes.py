"""`albert-hf pretrain`'s recipe against transformers' own (run_mlm.py's) at equal wall-clock time.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/mlm_recipes.py --parallel --json runs/mlm_recipes.json

Both sides train the same model shape (the quickstart's ALBERT: 2 layers sharing one set of weights, embedding 64,
hidden 128, 4 heads, feed-forward 512) with the same tokenizer (the real ALBERT 30k SentencePiece vocabulary, so that
no vocabulary is trained on either side's text), on the same corpus (`pretrain_finetune.corpus_documents`: the
Gutenberg books, WikiText-2 validation less its last 10 articles, Botchan), with the same batch (32) and length (64):

  * albert_hf: what `albert-hf pretrain` runs, through the library's own builders (`make_instances`,
    `build_pretraining_model`, `build_trainer`): sentence-order instances (`dupe_factor` 3), n-gram whole-word masking
    and SOP (`DataCollatorForSOP`), `AlbertForPreTraining` with MLM logits at the masked positions only, LAMB at the
    quickstart's 5e-3 with 10% warm-up and linear decay (the rate and warm-up chosen by benchmarks/quickstart_sweep.py,
    docs/pretraining.md), the divergence guard on.
  * reference: transformers' classes as examples/pytorch/language-modeling/run_mlm.py uses them: every sentence
    tokenized with its [CLS]/[SEP], concatenated and cut into blocks of 64 (`group_texts`),
    `DataCollatorForLanguageModeling` (15% of the tokens, 80/10/10), transformers' `AlbertForMaskedLM` of the same
    `AlbertConfig` fields, `Trainer` with AdamW and the linear schedule (run_mlm's defaults: no warm-up, no weight
    decay). Its learning rate is chosen by a sweep (`--sweep_lrs`) on the held-out token-level loss; by default each
    sweep run has the full budget, so the best of them is the reference's result (the choice is made on the set it
    is reported on: if anything, that favours the reference).

Equal time, on a shared machine whose load changes from minute to minute: each recipe's training steps per second are
measured first in short windows run alternately (reference, ours, reference, ours, ...; `--windows` each, the median
kept), so that a change of load hits both alike. Each recipe then trains `--budget_s` x its own measured rate steps,
its schedule laid over that many steps; a run is defined by its step count, so what it reaches does not depend on how
busy the machine is while it trains (its wall time is reported too, for what it is worth). Each window also records
steps per second of process CPU time, which other jobs hardly change: a check on the wall-clock ratio. Training runs
on one thread; `--parallel` runs two at a time (forked processes) on a 2-core machine.

One evaluation for both (`mlm_figures`, the same function and the same tensors): the held-out articles packed into
sequences of whole sentences, `[CLS] ... [SEP]` of at most 64 tokens, one segment, masked twice with fixed seeds:
token-level masks (`DataCollatorForLanguageModeling`, as the reference trains) and n-gram whole-word masks
(`DataCollatorForSOP`, as albert_hf trains). Each is scored by its MLM loss and accuracy over the masked positions,
beside the frequency baseline (always the most frequent masked token of that set). Our model is scored through
`AlbertForPreTraining`'s MLM logits, the reference through `AlbertForMaskedLM`'s.

benchmarks/gpu.py's `recipes` section runs the same comparison at GPU scale (`GPU_SETTING`).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path

import torch
import transformers
from common import DEFAULT_DATA, config_kwargs, pretraining_run
from datasets import Dataset
from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments, set_seed
from transformers.trainer_callback import PrinterCallback

from albert_hf.arguments import ModelArguments
from albert_hf.data.collator import DataCollatorForSOP
from albert_hf.data.sentence_order import tokenize_documents
from albert_hf.pretraining.arguments import RECIPES, PretrainingDataArguments, PretrainingJob, RecipeArguments
from albert_hf.pretraining.corpus import make_instances
from albert_hf.pretraining.run import build_pretraining_model
from albert_hf.pretraining.trainer import PretrainingArguments
from albert_hf.tokenization import AlbertHFTokenizer

EVAL_SEED = 1234  # the held-out masks: one draw, the same tensors for both models


@dataclass
class Setting:
    """One comparison: model, data, budgets and how steps/s are measured."""

    model_overrides: str = RECIPES["quickstart"]["config_overrides"]
    seq_len: int = 64
    batch_size: int = 32
    our_learning_rate: float = RECIPES["quickstart"]["learning_rate"]  # LAMB peak of the quickstart recipe
    our_warmup_fraction: float = RECIPES["quickstart"]["warmup_fraction"]
    sweep_lrs: tuple[float, ...] = (1e-4, 3e-4, 1e-3)  # AdamW rates for the reference, from twice run_mlm's 5e-5
    budget_s: float = 300.0  # training seconds (at the measured rate) per recipe
    sweep_s: float = 300.0  # per sweep run; at budget_s the best sweep run is the reference's result
    window_steps: int = 20  # training steps per timing window, after `warmup_steps`
    warmup_steps: int = 3
    windows: int = 3  # timing windows per recipe
    held_out_articles: int = 10
    dupe_factor: int = 3  # our recipe's passes over the corpus, each cut into fresh sentence pairs
    max_eval_sequences: int | None = None
    dataloader_workers: int = 0
    bf16: bool = False
    parallel: bool = False
    seed: int = 0


# The same comparison at GPU scale: the laptop recipe's model (6 layers of width 256 sharing one group) and batch,
# length 128, LAMB at that recipe's 2e-3 with its 2.5% warm-up; 45 s of training per recipe on the clock of
# the measured rates, the reference's rate chosen by sweep runs of the same 45 s.
GPU_SETTING = Setting(
    model_overrides=RECIPES["laptop"]["config_overrides"],
    seq_len=128,
    batch_size=RECIPES["laptop"]["global_batch_size"],
    our_learning_rate=RECIPES["laptop"]["learning_rate"],
    our_warmup_fraction=RECIPES["laptop"]["warmup_steps"] / RECIPES["laptop"]["max_steps"],
    sweep_lrs=(3e-4, 1e-3, 3e-3),
    sweep_s=45.0,
    budget_s=45.0,
    window_steps=30,
    dupe_factor=10,
    dataloader_workers=4,
    bf16=True,
)
# The smoke run of both (tests/test_gpu_benchmark.py): a few steps of a tiny model on the repository's excerpts.
SMOKE_SETTING = Setting(
    model_overrides="embedding_size=32,hidden_size=64,num_attention_heads=2,intermediate_size=128,num_hidden_layers=1",
    batch_size=8,
    sweep_lrs=(1e-3,),  # a sweep of one: the path runs, at the least cost
    sweep_s=1.0,
    budget_s=1.0,
    window_steps=2,
    warmup_steps=1,
    windows=1,
    held_out_articles=1,
    dupe_factor=1,
    max_eval_sequences=16,
)


# --------------------------------------------------------------------------------------------------------------------
# Data: each recipe's training set, and the shared held-out masks
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Prepared:
    tokenizer: AlbertHFTokenizer
    documents: Dataset  # the training documents
    our_train: Dataset  # their sentence-order instances
    reference_train: Dataset  # run_mlm's blocks
    token_masks: dict  # held-out batch with token-level masks
    word_masks: dict  # the same sequences with n-gram whole-word masks
    eval_sequences: int
    train_documents: int


def prepare(setting: Setting, data_dir: Path) -> Prepared:
    import pretrain_finetune

    tokenizer = AlbertHFTokenizer(vocab_file=str(data_dir / "spiece" / "albert-30k-clean.model"))
    documents, held_out = pretrain_finetune.corpus_documents(data_dir, setting.held_out_articles)
    data_args = PretrainingDataArguments(max_seq_length=setting.seq_len, dupe_factor=setting.dupe_factor)
    our_train, _ = make_instances(documents, tokenizer, data_args, setting.seed)
    sequences = packed_sequences(held_out, tokenizer, setting.seq_len)[: setting.max_eval_sequences]
    return Prepared(
        tokenizer=tokenizer,
        documents=documents,
        our_train=our_train,
        reference_train=run_mlm_blocks(documents, tokenizer, setting.seq_len),
        token_masks=token_level_masks(sequences, tokenizer),
        word_masks=whole_word_masks(sequences, tokenizer),
        eval_sequences=len(sequences),
        train_documents=len(documents),
    )


def sentence_ids(documents: Dataset, tokenizer) -> list[list[int]]:
    """Every sentence of the documents, tokenized without special tokens (the tokenization both recipes read)."""
    tokenized = tokenize_documents(documents, tokenizer)
    return [sentence for document in tokenized["sentence_ids"] for sentence in document]


def run_mlm_blocks(documents: Dataset, tokenizer, block_size: int) -> Dataset:
    """run_mlm.py's training set: each text (here a sentence) tokenized with its special tokens, all concatenated
    and cut into blocks of `block_size`, the remainder dropped (`group_texts`)."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    stream = [token for sentence in sentence_ids(documents, tokenizer) for token in (cls, *sentence, sep)]
    usable = len(stream) // block_size * block_size
    blocks = [stream[start : start + block_size] for start in range(0, usable, block_size)]
    return Dataset.from_dict({"input_ids": blocks})


def packed_sequences(documents: Dataset, tokenizer, seq_len: int) -> list[list[int]]:
    """Held-out sequences neither recipe trains on in this form: whole sentences of one document packed greedily
    into `[CLS] ... [SEP]` of at most `seq_len` tokens (a longer sentence truncated), one segment."""
    room = seq_len - 2
    sequences: list[list[int]] = []
    for document in tokenize_documents(documents, tokenizer)["sentence_ids"]:
        current: list[int] = []
        for sentence in document:
            if current and len(current) + len(sentence) > room:
                sequences.append(current)
                current = []
            current = current + sentence[: room - len(current)]
        if current:
            sequences.append(current)
    return [[tokenizer.cls_token_id, *sequence, tokenizer.sep_token_id] for sequence in sequences]


def token_level_masks(sequences: list[list[int]], tokenizer) -> dict:
    """The reference's masking (15% of the tokens, 80/10/10) with a fixed seed, as one padded batch."""
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=EVAL_SEED)
    batch = collator([{"input_ids": sequence} for sequence in sequences])
    return with_token_types(dict(batch))


def whole_word_masks(sequences: list[list[int]], tokenizer) -> dict:
    """albert_hf's n-gram whole-word masking with a fixed seed, as one padded batch."""
    batch = DataCollatorForSOP(tokenizer, seed=EVAL_SEED)([{"input_ids": sequence} for sequence in sequences])
    return with_token_types(batch)


def with_token_types(batch: dict) -> dict:
    keys = ("input_ids", "attention_mask", "labels")
    return {key: batch[key] for key in keys} | {"token_type_ids": torch.zeros_like(batch["input_ids"])}


# --------------------------------------------------------------------------------------------------------------------
# The shared evaluation
# --------------------------------------------------------------------------------------------------------------------


@torch.no_grad()
def mlm_figures(model, batch: dict, batch_size: int = 128) -> dict:
    """Held-out MLM loss (mean over masked positions) and accuracy of `model` on a masked batch: the logits of
    albert_hf's AlbertForPreTraining (`prediction_logits`) or transformers' AlbertForMaskedLM (`logits`)."""
    model.eval()
    device = next(model.parameters()).device
    loss_sum, correct, targets = 0.0, 0, 0
    for start in range(0, len(batch["input_ids"]), batch_size):
        part = {key: value[start : start + batch_size].to(device) for key, value in batch.items()}
        labels = part.pop("labels")
        output = model(**part)
        logits = getattr(output, "prediction_logits", None)
        logits = output.logits if logits is None else logits
        masked = labels != -100
        scores, gold = logits[masked].float(), labels[masked]
        loss_sum += torch.nn.functional.cross_entropy(scores, gold, reduction="sum").item()
        correct += (scores.argmax(-1) == gold).sum().item()
        targets += int(masked.sum())
    return dict(loss=loss_sum / targets, accuracy=correct / targets, targets=targets)


def frequency_baseline(batch: dict, tokenizer) -> dict:
    """Always predicting the most frequent masked token: its accuracy, the token, and the number of targets."""
    labels = batch["labels"][batch["labels"] != -100].tolist()
    token, count = Counter(labels).most_common(1)[0]
    return dict(accuracy=count / len(labels), token=tokenizer.convert_ids_to_tokens(token), targets=len(labels))


def evaluate(model, prepared: Prepared) -> dict:
    return {
        "token_level": mlm_figures(model, prepared.token_masks),
        "whole_word": mlm_figures(model, prepared.word_masks),
    }


# --------------------------------------------------------------------------------------------------------------------
# The two recipes
# --------------------------------------------------------------------------------------------------------------------


def common_arguments(setting: Setting, steps: int, output_dir: str) -> dict:
    """TrainingArguments both recipes share: steps, batch, no checkpoints, one seed."""
    return dict(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=setting.batch_size,
        logging_steps=max(1, steps // 10),
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=setting.seed,
        dataloader_drop_last=True,
        dataloader_num_workers=setting.dataloader_workers,
        bf16=setting.bf16,
        use_cpu=not torch.cuda.is_available(),
    )


def our_trainer(prepared: Prepared, setting: Setting, steps: int, output_dir: str, learning_rate=None) -> Trainer:
    """`albert-hf pretrain` with the recipe's settings: the script's run built by `common.pretraining_run`."""
    training_args = PretrainingArguments(
        **common_arguments(setting, steps, output_dir),
        learning_rate=learning_rate or setting.our_learning_rate,
        warmup_steps=max(1, round(steps * setting.our_warmup_fraction)),
        optimizer="lamb",
        lr_schedule="albert",
    )
    job = PretrainingJob(
        model=ModelArguments(config_preset="base-v2", config_overrides=setting.model_overrides),
        data=PretrainingDataArguments(max_seq_length=setting.seq_len, dupe_factor=setting.dupe_factor),
        recipe=RecipeArguments(),
        training=training_args,
    )
    return pretraining_run(job, tokenizer=prepared.tokenizer, documents=(prepared.documents, None)).trainer


def reference_trainer(prepared: Prepared, setting: Setting, steps: int, output_dir: str, learning_rate: float):
    """run_mlm.py's recipe: transformers' AlbertForMaskedLM of the same shape, DataCollatorForLanguageModeling,
    Trainer with AdamW and the linear schedule (no warm-up, no weight decay: run_mlm's defaults)."""
    set_seed(setting.seed)
    shape = build_pretraining_model(
        ModelArguments(config_preset="base-v2", config_overrides=setting.model_overrides),
        prepared.tokenizer,
        setting.seq_len,
    ).config
    model = transformers.AlbertForMaskedLM(transformers.AlbertConfig(**config_kwargs(shape)))
    training_args = TrainingArguments(
        **common_arguments(setting, steps, output_dir),
        learning_rate=learning_rate,
        optim="adamw_torch",
        lr_scheduler_type="linear",
    )
    collator = DataCollatorForLanguageModeling(prepared.tokenizer, mlm_probability=0.15)
    return Trainer(
        model=model,
        args=training_args,
        data_collator=collator,
        train_dataset=prepared.reference_train,
        processing_class=prepared.tokenizer,
    )


RECIPE_BUILDERS = {"reference": reference_trainer, "albert_hf": our_trainer}


def build(recipe: str, prepared: Prepared, setting: Setting, steps: int, output_dir: str, learning_rate) -> Trainer:
    """A recipe's Trainer, its logs kept in the log history instead of printed."""
    trainer = RECIPE_BUILDERS[recipe](prepared, setting, steps, output_dir, learning_rate)
    trainer.remove_callback(PrinterCallback)
    return trainer


class StepClock(TrainerCallback):
    """The wall-clock and process (CPU) time at the end of every optimizer step."""

    def __init__(self):
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())


def window_rate(recipe: str, prepared: Prepared, setting: Setting, learning_rate: float) -> dict[str, float]:
    """Steps per second of one timing window, `window_steps` steps after `warmup_steps` with model and data loader
    set up before the clock starts: on the wall clock, and per second of this process's CPU time (which other jobs
    on the machine hardly change; a check on the wall-clock figure, not what the step counts use)."""
    steps = setting.warmup_steps + setting.window_steps
    with tempfile.TemporaryDirectory(prefix="mlm_recipes_") as tmp:
        rate = learning_rate if recipe == "reference" else None  # ours: its recipe's
        trainer = build(recipe, prepared, setting, steps, tmp, rate)
        clock = StepClock()
        trainer.add_callback(clock)
        trainer.train()
    first = setting.warmup_steps - 1
    return {
        clock_name: setting.window_steps / (times[-1] - times[first])
        for clock_name, times in (("wall", clock.wall), ("cpu", clock.cpu))
    }


def measure_rates(prepared: Prepared, setting: Setting, reference_lr: float) -> dict:
    """Each recipe's median steps/s over `windows` windows, the recipes alternating window by window."""
    rates: dict[str, list[dict]] = {name: [] for name in RECIPE_BUILDERS}
    for _ in range(setting.windows):
        for name in RECIPE_BUILDERS:
            rates[name].append(window_rate(name, prepared, setting, reference_lr))
            window = rates[name][-1]
            print(f"[mlm_recipes] window {name}: {window['wall']:.2f} steps/s ({window['cpu']:.2f} per CPU-second)")
    return {
        name: dict(
            median=statistics.median(window["wall"] for window in values),
            median_per_cpu_second=statistics.median(window["cpu"] for window in values),
            windows=values,
        )
        for name, values in rates.items()
    }


def train_and_evaluate(recipe: str, prepared: Prepared, setting: Setting, steps: int, learning_rate: float) -> dict:
    """Train one recipe for `steps` steps and score it with the shared evaluation."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mlm_recipes_") as tmp:
        trainer = build(recipe, prepared, setting, steps, tmp, learning_rate)
        trainer.train()
        seconds = time.perf_counter() - started
        figures = evaluate(trainer.model, prepared)
    return dict(recipe=recipe, steps=steps, learning_rate=learning_rate, train_wall_s=seconds, **figures)


# The data a forked worker reads (set before the pool starts, so that nothing large is pickled).
_PREPARED: Prepared | None = None


def _run_in_worker(recipe: str, setting: Setting, steps: int, learning_rate: float) -> dict:
    torch.set_num_threads(1)
    return train_and_evaluate(recipe, _PREPARED, setting, steps, learning_rate)


def run_all(jobs: list[tuple[str, int, float]], prepared: Prepared, setting: Setting) -> list[dict]:
    """(recipe, steps, learning rate) runs, one after the other or with --parallel two at a time in forked
    processes of one thread each."""
    global _PREPARED
    if not setting.parallel:
        return [train_and_evaluate(recipe, prepared, setting, steps, lr) for recipe, steps, lr in jobs]
    _PREPARED = prepared
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("fork")) as pool:
        futures = [pool.submit(_run_in_worker, recipe, setting, steps, lr) for recipe, steps, lr in jobs]
        return [future.result() for future in futures]


# --------------------------------------------------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Comparison:
    setting: dict
    train_documents: int
    our_instances: int
    reference_blocks: int
    eval_sequences: int
    baselines: dict
    rates: dict
    sweep: list[dict]
    reference_learning_rate: float
    runs: dict
    seconds: dict = field(default_factory=dict)


def steps_for(seconds: float, rate: float) -> int:
    return max(2, round(seconds * rate))


def compare(setting: Setting, data_dir: Path = DEFAULT_DATA, say=print, rates: dict | None = None) -> Comparison:
    """Data, rates (measured, unless given: those of an earlier run), the reference's learning-rate sweep, then both
    recipes at `budget_s` of their rates."""
    started = time.perf_counter()
    prepared = prepare(setting, data_dir)
    prepared_s = time.perf_counter() - started
    say(
        f"[mlm_recipes] data ready in {prepared_s:.0f} s: {len(prepared.our_train)} instances, "
        f"{len(prepared.reference_train)} blocks, {prepared.eval_sequences} held-out sequences"
    )
    rates = rates or measure_rates(prepared, setting, setting.sweep_lrs[0])
    reference_rate, our_rate = rates["reference"]["median"], rates["albert_hf"]["median"]
    say(f"[mlm_recipes] steps/s: reference {reference_rate:.2f}, albert_hf {our_rate:.2f}")

    # The sweep runs beside our recipe's run; at the full budget its best run is the reference's result.
    sweep_steps = steps_for(setting.sweep_s, reference_rate)
    reference_steps = steps_for(setting.budget_s, reference_rate)
    ours = ("albert_hf", steps_for(setting.budget_s, our_rate), setting.our_learning_rate)
    *sweep, our_run = run_all([("reference", sweep_steps, lr) for lr in setting.sweep_lrs] + [ours], prepared, setting)
    for run in sweep:
        say(f"[mlm_recipes] sweep lr {run['learning_rate']:g}: held-out loss {run['token_level']['loss']:.3f}")
    best = min(sweep, key=lambda run: run["token_level"]["loss"])
    if sweep_steps != reference_steps:
        (best,) = run_all([("reference", reference_steps, best["learning_rate"])], prepared, setting)
    runs = {"reference": best, "albert_hf": our_run}
    return Comparison(
        setting=asdict(setting),
        train_documents=prepared.train_documents,
        our_instances=len(prepared.our_train),
        reference_blocks=len(prepared.reference_train),
        eval_sequences=prepared.eval_sequences,
        baselines={
            "token_level": frequency_baseline(prepared.token_masks, prepared.tokenizer),
            "whole_word": frequency_baseline(prepared.word_masks, prepared.tokenizer),
        },
        rates=rates,
        sweep=sweep,
        reference_learning_rate=best["learning_rate"],
        runs=runs,
        seconds=dict(data=prepared_s, total=time.perf_counter() - started),
    )


def markdown_table(result: Comparison) -> str:
    """One row per recipe: rate, steps in the budget, and the held-out figures beside the frequency baselines."""
    budget = result.setting["budget_s"]
    token, word = result.baselines["token_level"], result.baselines["whole_word"]
    lines = [
        f"| recipe | steps/s | steps in {budget:.0f} s | token-level loss | token-level acc | whole-word loss | "
        "whole-word acc |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| frequency baseline (always {token['token']!r} / {word['token']!r}) | | | | {token['accuracy']:.3f} | | "
        f"{word['accuracy']:.3f} |",
    ]
    names = {
        "reference": f"transformers run_mlm (AdamW {result.reference_learning_rate:g})",
        "albert_hf": f"albert-hf pretrain (LAMB {result.setting['our_learning_rate']:g})",
    }
    for recipe, run in result.runs.items():
        rate = result.rates[recipe]["median"]
        lines.append(
            f"| {names[recipe]} | {rate:.2f} | {run['steps']} | {run['token_level']['loss']:.3f} | "
            f"{run['token_level']['accuracy']:.3f} | {run['whole_word']['loss']:.3f} | "
            f"{run['whole_word']['accuracy']:.3f} |"
        )
    lines.append(
        f"\nHeld-out: {result.eval_sequences} sequences, {token['targets']} token-level and {word['targets']} "
        "whole-word targets. Sweep (reference, "
        + ", ".join(f"lr {run['learning_rate']:g}: loss {run['token_level']['loss']:.3f}" for run in result.sweep)
        + f", {result.sweep[0]['steps']} steps each)."
    )
    return "\n".join(lines)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument("--budget_s", type=float, default=Setting.budget_s)
    parser.add_argument("--sweep_s", type=float, help="training seconds per sweep run (default: --budget_s)")
    parser.add_argument("--sweep_lrs", type=float, nargs="+", default=list(Setting.sweep_lrs))
    parser.add_argument("--windows", type=int, default=Setting.windows)
    parser.add_argument("--window_steps", type=int, default=Setting.window_steps)
    parser.add_argument(
        "--rates_from", type=Path, help="take the steps/s from an earlier run's --json instead of measuring them"
    )
    parser.add_argument("--parallel", action="store_true", help="two training runs at a time, one thread each")
    parser.add_argument("--smoke", action="store_true", help="a few steps of a tiny model (seconds)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    torch.set_num_threads(1)
    base = SMOKE_SETTING if args.smoke else Setting()
    setting = base
    if not args.smoke:
        setting = replace(
            base,
            budget_s=args.budget_s,
            sweep_s=args.sweep_s or args.budget_s,
            sweep_lrs=tuple(args.sweep_lrs),
            windows=args.windows,
            window_steps=args.window_steps,
        )
    setting = replace(setting, parallel=args.parallel)
    rates = json.loads(args.rates_from.read_text())["rates"] if args.rates_from else None
    result = compare(setting, args.data, rates=rates)
    table = markdown_table(result)
    print("\n" + table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(asdict(result), indent=2, default=str))
    return 0 if all(math.isfinite(run["token_level"]["loss"]) for run in result.runs.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
