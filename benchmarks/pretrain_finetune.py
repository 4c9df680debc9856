"""Does pretraining pay off downstream? Pretrain a small ALBERT for a fixed wall-clock budget, then fine-tune it and
the same architecture randomly initialised with the real jobs, and compare.

    python benchmarks/pretrain_finetune.py --minutes 60 --output_dir runs/pretrain_finetune

1. Tokenizer: a SentencePiece vocabulary (ALBERT's recipe) trained on the pretraining corpus.
2. Pretraining (MLM + SOP, LAMB) on ../shared/data/corpus: the Gutenberg books, WikiText-2 validation and Botchan,
   for `--minutes` of wall clock. The learning rate warms up over `--warmup_steps` and then decays linearly in
   *elapsed time* to zero at the budget, so the run anneals fully whatever the machine's load. A checkpoint is
   written every `--save_minutes` (`<output_dir>/pretraining/latest`) and the final model to `<output_dir>/pretrained`;
   `--pretrained_dir` skips this phase and fine-tunes an existing checkpoint. `--task_text sst2 mrpc conll` adds the
   tasks' unlabeled training text to the corpus; `--tokenizer spiece.model` uses an existing vocabulary instead of
   training one; `--bf16` pretrains and fine-tunes under bf16 autocast (a GPU: CUDA is used whenever present).
3. Fine-tuning with the real jobs (`albert_hf.scripts.glue.main`, `albert_hf.scripts.ner.main`, the functions behind
   `albert-hf glue` and `albert-hf ner`), from (a) the pretrained checkpoint and (b) a checkpoint of the same
   config with fresh random weights, on the same budget: SST-2, MRPC, CoLA, STS-B, RTE and CoNLL-2003, with
   `--seeds` fine-tuning seeds (1 on SST-2 and CoNLL); `--max_train_samples sst2=2000` gives a task a smaller label
   budget, on both sides. Results are appended to `<output_dir>/results.json` as each
   run ends, and a rerun skips the runs already there.

Prints one table row per task: mean and standard deviation of the task metric for (a) and (b), and their difference,
plus the script's total wall time.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import time
from pathlib import Path

import torch
from common import PretrainingRun, pretraining_run
from datasets import concatenate_datasets
from transformers import TrainerCallback, set_seed

from albert_hf.arguments import ModelArguments
from albert_hf.configuration import AlbertConfig
from albert_hf.data.sentence_order import load_text_documents
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.arguments import RECIPES, PretrainingDataArguments, PretrainingJob, RecipeArguments
from albert_hf.pretraining.report import frequency_baselines
from albert_hf.pretraining.trainer import PretrainingArguments
from albert_hf.scripts import glue, ner
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.training.lamb import Lamb, lamb_parameter_groups
from albert_hf.vocabulary import train_tokenizer

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATA = os.environ.get("ALBERT_HF_SHARED_DATA", str(REPOSITORY.parent / "shared" / "data"))

# task -> (job, data folder, metric key of eval_results.json, metric shown, steps, training examples kept)
# Steps are the fine-tuning budget (batch 32), the same for both initialisations.
TASKS = {
    "sst2": ("glue", "glue/SST-2", "eval_accuracy", "accuracy", 600, 19200),
    "mrpc": ("glue", "glue/MRPC", "eval_accuracy", "accuracy", 300, None),
    "cola": ("glue", "glue/CoLA", "eval_matthews_correlation", "MCC", 300, None),
    "stsb": ("glue", "glue/STS-B", "eval_pearson", "Pearson", 300, None),
    "rte": ("glue", "glue/RTE", "eval_accuracy", "accuracy", 300, None),
    "conll": ("ner", "conll2003", "eval_f1", "entity F1", 600, None),
}
SINGLE_SEED_TASKS = ("sst2", "conll")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=DEFAULT_DATA, help="the shared data folder (corpus/, glue/, conll2003/)")
    parser.add_argument("--output_dir", default="runs/pretrain_finetune")
    parser.add_argument("--minutes", type=float, default=60.0, help="pretraining wall-clock budget")
    parser.add_argument("--pretrained_dir", help="skip pretraining: fine-tune this albert_hf pretraining checkpoint")
    parser.add_argument("--tokenizer", help="an existing spiece.model (default: train one of --vocab_size pieces)")
    parser.add_argument(
        "--task_text",
        nargs="*",
        default=[],
        choices=list(TASK_TEXT),
        help="add these tasks' training text, without labels, to the pretraining corpus",
    )
    parser.add_argument("--model_overrides", default=RECIPES["tiny"]["config_overrides"])
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32, help="pretraining batch")
    parser.add_argument("--learning_rate", type=float, default=RECIPES["tiny"]["learning_rate"], help="LAMB peak")
    parser.add_argument("--warmup_steps", type=int, default=300)
    parser.add_argument("--dupe_factor", type=int, default=5, help="passes over the corpus with fresh pairs")
    parser.add_argument("--save_minutes", type=float, default=10.0)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast in pretraining and fine-tuning (GPU)")
    parser.add_argument("--dataloader_workers", type=int, default=0, help="processes that collate and mask batches")
    parser.add_argument("--held_out_articles", type=int, default=5, help="WikiText-2 articles kept out for evaluation")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", type=int, default=3, help="fine-tuning seeds (1 for SST-2 and CoNLL)")
    parser.add_argument("--finetune_learning_rate", type=float, default=3e-4)
    parser.add_argument("--finetune_batch_size", type=int, default=32)
    parser.add_argument("--step_scale", type=float, default=1.0, help="multiply every fine-tuning step budget")
    parser.add_argument(
        "--max_train_samples",
        nargs="*",
        default=[],
        metavar="TASK=N",
        help="train a task on its first N examples only (a smaller label budget, the same for both initialisations)",
    )
    parser.add_argument("--max_eval_samples", type=int, help="evaluate on at most this many examples (smoke runs)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.max_train_samples = label_budgets(parser, args.max_train_samples)
    return args


def label_budgets(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, int]:
    """{task: N} from `TASK=N` items."""
    budgets = {}
    for item in items:
        task, _, count = item.partition("=")
        if task not in TASKS or not count.isdigit() or int(count) < 1:
            parser.error(f"--max_train_samples: expected TASK=N with TASK one of {list(TASKS)}, got {item!r}")
        budgets[task] = int(count)
    return budgets


# --------------------------------------------------------------------------------------------------------------------
# Pretraining
# --------------------------------------------------------------------------------------------------------------------


def corpus_documents(data_dir: Path, held_out_articles: int):
    """(training documents, held-out WikiText-2 articles): Gutenberg books and WikiText-2 (one paragraph per line),
    Botchan (one sentence per line)."""
    corpus = data_dir / "corpus"
    books = load_text_documents(corpus / "gutenberg_paragraphs.txt", split_lines=True)
    wiki = load_text_documents(corpus / "wikitext2_valid_paragraphs.txt", split_lines=True)
    botchan = load_text_documents(corpus / "botchan.txt")
    held_out = wiki.select(range(len(wiki) - held_out_articles, len(wiki)))
    wiki = wiki.select(range(len(wiki) - held_out_articles))
    return concatenate_datasets([books, wiki, botchan]), held_out


# task -> (data folder, training file): the texts `--task_text` adds to the pretraining corpus, labels left out.
TASK_TEXT = {
    "sst2": ("glue/SST-2", "train.tsv"),
    "mrpc": ("glue/MRPC", "train.tsv"),
    "conll": ("conll2003", "train.txt"),
}


def task_text_lines(data_dir: Path, task: str) -> list[str]:
    """A task's training texts, one per line, in file order: SST-2's phrases, both sentences of each MRPC pair, the
    CoNLL sentences (words joined by spaces)."""
    from albert_hf.data.glue_files import GLUE_TASKS, read_glue_tsv
    from albert_hf.data.ner import read_conll

    folder, name = TASK_TEXT[task]
    path = data_dir / folder / name
    if task == "conll":
        return [" ".join(sentence["tokens"]) for sentence in read_conll(str(path))]
    rows = read_glue_tsv(str(path), GLUE_TASKS[task], labelled=True)  # texts as sentence1 (sentence2 for pairs)
    return [row[column] for row in rows for column in ("sentence1", "sentence2") if column in row]


def task_text_documents(data_dir: Path, tasks: list[str], lines_per_document: int = 16):
    """The tasks' training texts as documents of `lines_per_document` consecutive lines.

    SOP needs documents of two sentences or more. CoNLL's consecutive sentences are consecutive sentences of a news
    story, so their order is real; SST-2's phrases and MRPC's sentences are unrelated lines (or paraphrases), whose
    order teaches SOP nothing, but whose words are what the fine-tuning tasks read: the MLM objective learns from
    them all.
    """
    from datasets import Dataset

    documents = []
    for task in tasks:
        lines = [line for line in task_text_lines(data_dir, task) if line.strip()]
        documents += [lines[i : i + lines_per_document] for i in range(0, len(lines), lines_per_document)]
    return Dataset.from_dict({"sentences": [document for document in documents if len(document) > 1]})


class TimeBudget(TrainerCallback):
    """Stops training at the budget and writes `save_dir` (atomically: a temporary folder renamed) every
    `save_seconds`, so that a crash later loses at most that much pretraining."""

    def __init__(self, seconds: float, save_seconds: float, save_dir: Path, tokenizer):
        self.seconds, self.save_seconds, self.save_dir, self.tokenizer = seconds, save_seconds, save_dir, tokenizer
        self.started = time.time()
        self.last_save = self.started

    def elapsed_fraction(self) -> float:
        return (time.time() - self.started) / self.seconds

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if time.time() - self.last_save >= self.save_seconds:
            save_checkpoint(model, self.tokenizer, self.save_dir)
            self.last_save = time.time()
            print(f"  step {state.global_step}: checkpoint written to {self.save_dir}", flush=True)
        if self.elapsed_fraction() >= 1.0:
            control.should_training_stop = True


def save_checkpoint(model, tokenizer, folder: Path) -> None:
    staging = folder.with_name(folder.name + ".tmp")
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    if folder.exists():
        old = folder.with_name(folder.name + ".old")
        folder.rename(old)
        staging.rename(folder)
        for path in sorted(old.iterdir()):
            path.unlink()
        old.rmdir()
    else:
        staging.rename(folder)


def time_decay_schedule(optimizer, warmup_steps: int, budget: TimeBudget):
    """Linear warm-up over steps, then ALBERT's linear decay driven by the elapsed fraction of the time budget."""

    def factor(step: int) -> float:
        decay = max(0.0, 1.0 - budget.elapsed_fraction())
        return decay * min(1.0, (step + 1) / warmup_steps) if warmup_steps else decay

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def pretrain(args: argparse.Namespace, output_dir: Path) -> tuple[Path, dict]:
    """Tokenizer + pretraining; returns the final checkpoint folder and the pretraining figures."""
    started = time.time()
    documents, held_out = pretraining_documents(args)
    tokenizer = pretraining_tokenizer(args, documents, output_dir)
    print(f"[pretraining] tokenizer ready ({len(tokenizer)} pieces) after {time.time() - started:.0f} s", flush=True)

    run = build_pretraining_run(args, output_dir, tokenizer, documents, held_out)
    print(f"[pretraining] data ready after {time.time() - started:.0f} s", flush=True)
    return pretrain_model(run, args, output_dir)


def build_pretraining_run(args: argparse.Namespace, output_dir: Path, tokenizer, documents, held_out) -> PretrainingRun:
    """The run of `albert-hf pretrain` on these documents (`common.pretraining_run`); its freshly initialized model is saved to
    `<output_dir>/random_init` first, the baseline of the fine-tuning comparison."""
    run = pretraining_run(pretraining_job(args, output_dir), tokenizer=tokenizer, documents=(documents, held_out))
    print(
        f"[pretraining] {len(run.train_dataset)} training instances ({len(documents)} documents, dupe_factor "
        f"{args.dupe_factor}), {len(run.eval_dataset)} held-out instances",
        flush=True,
    )
    save_checkpoint(run.model, tokenizer, output_dir / "random_init")  # (b): the same config, fresh weights
    return run


def pretraining_job(args: argparse.Namespace, output_dir: Path) -> PretrainingJob:
    """The pretraining run: LAMB for `args.minutes` of wall clock (`pretrain_model` sets the time-driven decay)."""
    training_args = PretrainingArguments(
        output_dir=str(output_dir / "pretraining"),
        max_steps=10**7,  # the time budget stops training
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        learning_rate=args.learning_rate,
        logging_steps=100,
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        disable_tqdm=True,
        dataloader_drop_last=True,
        dataloader_num_workers=args.dataloader_workers,
        bf16=args.bf16,
        use_cpu=not torch.cuda.is_available(),  # Trainer accepts bf16 on a CPU only when told it is one
    )
    return PretrainingJob(
        model=ModelArguments(config_overrides=args.model_overrides),
        data=PretrainingDataArguments(max_seq_length=args.max_seq_length, dupe_factor=args.dupe_factor),
        recipe=RecipeArguments(),
        training=training_args,
    )


def pretraining_documents(args: argparse.Namespace):
    """(training documents, held-out WikiText-2 articles): the corpus, plus the `--task_text` tasks' texts."""
    documents, held_out = corpus_documents(Path(args.data_dir), args.held_out_articles)
    if args.task_text:
        documents = concatenate_datasets([documents, task_text_documents(Path(args.data_dir), args.task_text)])
    return documents, held_out


def pretraining_tokenizer(args: argparse.Namespace, documents, output_dir: Path) -> AlbertHFTokenizer:
    """`--tokenizer`, else the one trained on the corpus before (`<output_dir>/tokenizer`), else a new one."""
    if args.tokenizer:
        return AlbertHFTokenizer(vocab_file=args.tokenizer)
    tokenizer_dir = output_dir / "tokenizer"
    if (tokenizer_dir / "spiece.model").is_file():
        return AlbertHFTokenizer.from_pretrained(tokenizer_dir)
    from datasets import Dataset

    sentences = [sentence for document in documents["sentences"] for sentence in document]
    return train_tokenizer(
        Dataset.from_dict({"text": sentences}), tokenizer_dir, vocab_size=args.vocab_size, show_progress=False
    )


def pretrain_model(run: PretrainingRun, args: argparse.Namespace, output_dir: Path) -> tuple[Path, dict]:
    """Pretrain the run's model for `args.minutes` of wall clock (LAMB, time-driven linear decay), save it to
    `<output_dir>/pretrained`, and measure it on the held-out instances beside their baselines.

    The clock starts when training does: the data are ready before this is called."""
    trainer, tokenizer, training_args = run.trainer, run.tokenizer, run.job.training
    train_dataset, eval_dataset = run.train_dataset, run.eval_dataset
    budget = TimeBudget(args.minutes * 60, args.save_minutes * 60, output_dir / "pretraining" / "latest", tokenizer)
    trainer.add_callback(budget)
    trainer.optimizer = Lamb(
        lamb_parameter_groups(run.model, training_args.weight_decay),
        lr=args.learning_rate,
        betas=(training_args.adam_beta1, training_args.adam_beta2),
        eps=training_args.adam_epsilon,
    )
    trainer.lr_scheduler = time_decay_schedule(trainer.optimizer, args.warmup_steps, budget)
    budget.started = budget.last_save = time.time()
    trainer.train()
    seconds = time.time() - budget.started
    final_dir = output_dir / "pretrained"
    save_checkpoint(trainer.model, tokenizer, final_dir)
    metrics = trainer.evaluate()
    baselines = frequency_baselines(trainer.get_eval_dataloader())
    history = [entry for entry in trainer.state.log_history if "loss" in entry or "mlm_loss" in entry]
    figures = {
        "pretraining_seconds": seconds,
        "steps": trainer.state.global_step,
        "sequences_per_step": args.batch_size,
        "train_instances": len(train_dataset),
        "held_out_instances": len(eval_dataset),
        "held_out_mlm_accuracy": metrics.get("eval_mlm_accuracy"),
        "held_out_sop_accuracy": metrics.get("eval_sop_accuracy"),
        "held_out_mlm_loss": metrics.get("eval_mlm_loss"),
        "held_out_mlm_frequency_baseline": baselines.mlm,
        "held_out_sop_majority_baseline": baselines.sop,
        "log": history,
    }
    print(
        f"[pretraining] {figures['steps']} steps in {seconds / 60:.1f} min; held-out MLM accuracy "
        f"{figures['held_out_mlm_accuracy']:.3f} (frequency baseline {baselines.mlm:.3f}), SOP accuracy "
        f"{figures['held_out_sop_accuracy']:.3f} (majority baseline {baselines.sop:.3f})",
        flush=True,
    )
    return final_dir, figures


# --------------------------------------------------------------------------------------------------------------------
# Fine-tuning
# --------------------------------------------------------------------------------------------------------------------


def finetune_argv(task: str, checkpoint: Path, seed: int, run_dir: Path, args: argparse.Namespace) -> list[str]:
    job, folder, _, _, steps, max_train = TASKS[task]
    max_train = args.max_train_samples.get(task, max_train)
    data_dir = Path(args.data_dir) / folder
    steps = max(1, round(steps * args.step_scale))
    argv = ["--task_name", task] if job == "glue" else []
    argv += [
        "--data_dir",
        str(data_dir),
        "--model_name_or_path",
        str(checkpoint),
        "--do_train",
        "--do_eval",
        "--max_seq_length",
        str(args.max_seq_length),
        "--per_device_train_batch_size",
        str(args.finetune_batch_size),
        "--per_device_eval_batch_size",
        "128",
        "--learning_rate",
        str(args.finetune_learning_rate),
        "--warmup_steps",
        "0.1",
        "--max_steps",
        str(steps),
        "--seed",
        str(seed),
        "--output_dir",
        str(run_dir),
        "--save_strategy",
        "no",
        "--logging_steps",
        "50",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--use_cpu",
        str(not torch.cuda.is_available()).lower(),
        "--bf16",
        str(args.bf16).lower(),
    ]
    if max_train:
        argv += ["--max_train_samples", str(max_train)]
    if args.max_eval_samples:
        argv += ["--max_eval_samples", str(args.max_eval_samples)]
    return argv


def run_finetuning(task: str, checkpoint: Path, seed: int, run_dir: Path, args: argparse.Namespace) -> dict:
    job, _, metric_key, _, _, _ = TASKS[task]
    started = time.time()
    (glue.main if job == "glue" else ner.main)(finetune_argv(task, checkpoint, seed, run_dir, args))
    with open(run_dir / "eval_results.json", encoding="utf-8") as file:
        metrics = json.load(file)
    return {"metric": metrics[metric_key], "eval": metrics, "seconds": time.time() - started}


def summarize(results: list[dict], tasks: list[str]) -> list[dict]:
    rows = []
    for task in tasks:
        row = {"task": task, "metric": TASKS[task][3]}
        for init in ("pretrained", "random"):
            values = [r["metric"] for r in results if r["task"] == task and r["init"] == init]
            row[init] = values
            row[f"{init}_mean"] = statistics.mean(values) if values else math.nan
            row[f"{init}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        row["difference"] = row["pretrained_mean"] - row["random_mean"]
        rows.append(row)
    return rows


def format_table(rows: list[dict]) -> str:
    lines = [
        "| task | metric | (a) pretrained | (b) random init | (a) - (b) | seeds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['task']} | {row['metric']} | {100 * row['pretrained_mean']:.1f} ± {100 * row['pretrained_std']:.1f}"
            f" | {100 * row['random_mean']:.1f} ± {100 * row['random_std']:.1f} | {100 * row['difference']:+.1f} "
            f"| {len(row['pretrained'])}/{len(row['random'])} |"
        )
    differences = [row["difference"] for row in rows if not math.isnan(row["difference"])]
    if differences:
        lines.append(f"| average | | | | {100 * statistics.mean(differences):+.1f} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    started = time.time()
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    output_dir = Path(args.output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    results_path = output_dir / "results.json"
    state = json.loads(results_path.read_text()) if results_path.is_file() else {"runs": []}
    state["arguments"] = vars(args)
    print(f"torch threads: {torch.get_num_threads()}", flush=True)

    if args.pretrained_dir:
        pretrained = Path(args.pretrained_dir).resolve()
        random_init = output_dir / "random_init"
        if not random_init.is_dir():  # the same config with fresh weights
            set_seed(args.seed)
            model = AlbertForPreTraining(AlbertConfig.from_pretrained(pretrained))
            save_checkpoint(model, AlbertHFTokenizer.from_pretrained(pretrained), random_init)
    else:
        pretrained, state["pretraining"] = pretrain(args, output_dir)
        random_init = output_dir / "random_init"
    results_path.write_text(json.dumps(state, indent=1))

    done = {(r["task"], r["init"], r["seed"]) for r in state["runs"]}
    for task in args.tasks:
        seeds = range(1 if task in SINGLE_SEED_TASKS else args.seeds)
        for seed in seeds:
            for init, checkpoint in (("pretrained", pretrained), ("random", random_init)):
                if (task, init, seed) in done:
                    continue
                run_dir = output_dir / "finetune" / f"{task}-{init}-seed{seed}"
                result = run_finetuning(task, checkpoint, seed, run_dir, args)
                state["runs"].append({"task": task, "init": init, "seed": seed, **result})
                results_path.write_text(json.dumps(state, indent=1))
                print(
                    f"[fine-tuning] {task} {init} seed {seed}: {TASKS[task][3]} {result['metric']:.4f} "
                    f"({result['seconds']:.0f} s; {(time.time() - started) / 60:.1f} min so far)",
                    flush=True,
                )
        print(format_table(summarize(state["runs"], args.tasks)), flush=True)

    state["table"] = summarize(state["runs"], args.tasks)
    state.setdefault("invocation_seconds", []).append(time.time() - started)
    results_path.write_text(json.dumps(state, indent=1))
    print(
        "\nFine-tuning from (a) the pretrained checkpoint and (b) the same architecture randomly initialised "
        "(dev sets; metric x 100, mean ± std over seeds):"
    )
    print(format_table(state["table"]))
    print(
        f"\nTotal wall time: {sum(state['invocation_seconds']) / 60:.1f} min "
        f"({len(state['invocation_seconds'])} invocation(s))"
    )


if __name__ == "__main__":
    main()
