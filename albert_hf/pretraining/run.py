"""One builder of a pretraining run, behind `albert-hf pretrain`, `albert-hf quickstart` and the benchmarks.

    albert-hf pretrain --recipe laptop --train_files corpus.txt --validation_documents 20 \\
        --tokenizer_name_or_path spiece.model --output_dir out/albert-small

`--recipe paper` is the paper's setup (ALBERT-base, batch 4096 through gradient accumulation, LAMB at 0.00176, 3,125
warmup steps, 125k steps, length 512); `laptop` and `tiny` are small ones, `quickstart` and `smoke` those of
`albert-hf quickstart` (see `arguments.RECIPES`). Any argument given on the command line wins over the recipe.

`albert-hf quickstart` is the same run with the quickstart recipe on an offline corpus, after one step of its own:
it trains a SentencePiece tokenizer on the training documents when no --tokenizer_name_or_path is given. It then
reports the held-out figures beside the baselines of a model that ignores its input, and plots the learning curves.

[`build_run`] makes the run (tokenizer, instances, model, Trainer, corpus counts) and [`train_and_save`] trains,
evaluates and saves it; `main` and `quickstart_main` are these two calls around their own reports.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import set_seed
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from ..data.collator import DataCollatorForSOP
from ..data.instance_stream import stream_position_obstacle
from ..data.masking_stats import masking_statistics
from ..data.pretraining import cjk_character_share
from ..distributed import check_lamb_engine
from ..errors import UserError
from ..hub import CardInfo
from ..modeling import AlbertForPreTraining
from ..tasks.common import ModelArguments, build_config, build_model, config_source, load_tokenizer, start_job
from ..training.job_logs import TrainingProgressLog
from ..training.preemption import train_or_checkpoint_on_signal
from ..training.reliability import data_files_fingerprint, resolve_resume_checkpoint
from ..training.sanity import (
    check_batch,
    check_sequence_length,
    check_tokenizer_matches_config,
    check_unknown_share,
)
from .arguments import (
    PretrainingDataArguments,
    PretrainingJob,
    parse_pretraining_args,
    parse_quickstart_args,
    vocab_size_given,
)
from .data import (
    CorpusStats,
    first_features,
    hold_out,
    prepare_datasets,
    quickstart_documents,
    quickstart_held_out_count,
)
from .report import HeldOutBaselines, held_out_baselines, plot_learning_curves, quickstart_report
from .trainer import AlbertPretrainingTrainer, PretrainingArguments

logger = logging.getLogger(__name__)

# Training instances the masking statistics of the log are measured on: the first ones, read once at the start for
# the sanity check of a batch as well.
MASKING_STATISTICS_INSTANCES = 1000


@dataclass
class PretrainingRun:
    """A pretraining run ready to train: what [`build_run`] made of a [`PretrainingJob`]."""

    job: PretrainingJob
    tokenizer: object
    train_dataset: object  # a Dataset of instances, or a ResumableInstanceStream with --streaming
    eval_dataset: Dataset | None
    model: AlbertForPreTraining
    trainer: AlbertPretrainingTrainer
    stats: CorpusStats


def build_run(
    job: PretrainingJob,
    *,
    tokenizer=None,
    documents: tuple[Dataset, Dataset | None] | None = None,
    say=logger.info,
    started: bool = False,
) -> PretrainingRun:
    """Start the job (unless `started`: the caller did, with `check_job`), then make its tokenizer (`tokenizer`,
    else --tokenizer_name_or_path or the checkpoint's), instances (of `documents`, (training, held-out), else of the
    files of the arguments), model and Trainer; check a first batch and log what masking does to it. `say` receives
    the lines for the user."""
    if not started:
        check_job(job)
    set_seed(job.training.seed)
    tokenizer = load_tokenizer(job.model) if tokenizer is None else tokenizer
    train_dataset, eval_dataset, stats = prepare_datasets(
        job.data, tokenizer, job.training.seed, documents=documents, say=say
    )
    logger.info("Pretraining data: %s", stats.describe())
    model = build_pretraining_model(job.model, tokenizer, job.data.max_seq_length, job.training.sanity_checks)
    trainer = build_trainer(model, tokenizer, job.data, job.training, train_dataset, eval_dataset)
    trainer.run_fingerprint_extra = run_fingerprint(job)
    first = first_features(trainer.train_dataset, MASKING_STATISTICS_INSTANCES)
    # Before training: a vocabulary that does not cover the text would train on <unk> for days.
    check_unknown_share(first, tokenizer, job.data.max_unknown_share, warn=logger.warning)
    if job.training.sanity_checks:
        check_first_batch(trainer, first)
    if trainer.is_world_process_zero():
        line, warning = masking_log(trainer, first, stats.word_boundaries)
        say(line)
        if warning:
            logger.warning(warning)
    return PretrainingRun(job, tokenizer, train_dataset, eval_dataset, model, trainer, stats)


# The data options a resumed run must share with the run that wrote its checkpoint: they decide which instances it
# trains on and how they are masked (the Trainer adds the model config, the optimizer and the global batch).
FINGERPRINTED_DATA_OPTIONS = (
    "train_files",
    "dataset_name",
    "dataset_config_name",
    "text_column",
    "document_column",
    "lines_are_paragraphs",
    "sentence_splitter",
    "word_segmenter",
    "max_seq_length",
    "short_seq_prob",
    "dupe_factor",
    "objective",
    "masked_lm_prob",
    "max_predictions_per_seq",
    "max_ngram",
    "streaming",
)


def run_fingerprint(job: PretrainingJob) -> dict[str, Any]:
    """What `--resume_from_checkpoint` refuses to change (`run_fingerprint_extra` of the Trainer): the text, how it
    becomes instances and is masked, and the tokenizer; each local data file by its content
    (`data_files_fingerprint`), so that other data at the same path is refused too."""
    fingerprint = {name: getattr(job.data, name) for name in FINGERPRINTED_DATA_OPTIONS}
    fingerprint["tokenizer"] = job.model.tokenizer_name_or_path or job.model.model_name_or_path
    fingerprint.update(data_files_fingerprint([*(job.data.train_files or []), job.data.dataset_name]))
    return fingerprint


def check_job(job: PretrainingJob) -> None:
    """Refuse, before any data or model work, what the run could not do; then join the launcher's processes."""
    check_lamb_engine(job.training)
    # transformers at WARNING only: its INFO lines at every checkpoint save (config, weights, paths) would flood a run
    # that saves hundreds of times.
    start_job(
        job.training, transformers_level=logging.WARNING, model_args=job.model, dataset_name=job.data.dataset_name
    )
    if not job.data.streaming:
        return
    if job.training.max_steps <= 0:
        raise UserError("--streaming needs --max_steps (a stream has no length to count epochs in).")
    obstacle = stream_position_obstacle(job.training.world_size, job.training.dataloader_num_workers)
    if obstacle is None:
        return
    if job.training.dataloader_num_workers > 0:  # the one that a resume could not even read again exactly
        raise UserError(
            f"--streaming saves the position of the stream in each checkpoint, which it cannot do when {obstacle}: "
            "pass --dataloader_num_workers 0 (the stream prepares its instances in the training process)."
        )
    logger.info("Resuming this streamed run reads the trained batches again: %s.", obstacle)


def build_pretraining_model(
    model_args: ModelArguments, tokenizer, max_seq_length: int, sanity_checks: bool = True
) -> AlbertForPreTraining:
    """A fresh ALBERT sized to the tokenizer, or the checkpoint of --model_name_or_path, which must fit the tokenizer:
    same vocabulary and special ids (`check_tokenizer_matches_config`), never silently overridden. Without
    `sanity_checks`, a checkpoint's config takes the tokenizer's special ids and nothing is compared."""
    special = dict(
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        mask_token_id=tokenizer.mask_token_id,
    )
    if model_args.model_name_or_path:
        config = build_config(model_args, **({} if sanity_checks else special))
    else:
        config = build_config(model_args, vocab_size=len(tokenizer), **special)
    if sanity_checks:
        check_tokenizer_matches_config(tokenizer, config, config_source(model_args))
        check_sequence_length(max_seq_length, config, config_source(model_args))
    return build_model(AlbertForPreTraining, model_args, config)


def build_trainer(
    model: AlbertForPreTraining,
    tokenizer,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    train_dataset,
    eval_dataset=None,
) -> AlbertPretrainingTrainer:
    """The Trainer of the run, with the masking collator of the arguments and the model card's language."""
    collator = DataCollatorForSOP(
        tokenizer,
        masked_lm_prob=data_args.masked_lm_prob,
        max_predictions_per_seq=data_args.max_predictions_per_seq,
        max_ngram=data_args.max_ngram,
        pad_to_multiple_of=data_args.pad_to_multiple_of,
        seed=training_args.seed,
    )
    trainer = AlbertPretrainingTrainer(
        model=model,
        args=training_args,
        data_collator=collator,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        card_info=CardInfo(
            language=data_args.language,
            dataset_id=data_args.dataset_name,  # kept by the card only when it is a Hub id
            dataset_config=data_args.dataset_config_name,
            # the user's files by name: the paths of this machine mean nothing to a reader of the card
            dataset_name=", ".join(dict.fromkeys(Path(name).name for name in data_args.train_files or [])) or None,
        ),
    )
    # The loss every --logging_steps and the held-out figures at each evaluation, one line each as they happen,
    # in place of the dictionaries Trainer's progress bar prints.
    trainer.add_callback(TrainingProgressLog)
    trainer.pop_callback(PrinterCallback)  # --disable_tqdm's printer of the same dictionaries
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(ProgressBarsOnly)
    return trainer


def check_first_batch(trainer: AlbertPretrainingTrainer, features: list[dict]) -> None:
    """Collate the first training sequences (the first 8 of `features`, the first instances) as training will and
    check the batch (`check_batch`)."""
    if features:
        batch = trainer.data_collator(features[:8])
        check_batch(batch, trainer.processing_class, trainer.model.config)


def masking_log(trainer: AlbertPretrainingTrainer, features: list[dict], source: str) -> tuple[str, str | None]:
    """(the masking line of the log, a warning or None) for the first training instances (`features`): the share of
    tokens masked, the pieces per word, where words come from (`MaskingStatistics`)."""
    stats = masking_statistics(trainer.data_collator, features, source)
    return stats.describe(), stats.warning()


def train_and_save(run: PretrainingRun) -> dict[str, float]:
    """Train (from --resume_from_checkpoint, `latest`: the newest complete checkpoint of --output_dir), save model
    and tokenizer (loadable with from_pretrained), evaluate on the held-out instances, save metrics, state and the
    model card; returns the held-out metrics (empty without held-out instances). A SIGTERM or SIGUSR1 during training
    writes a checkpoint of that step and raises `StoppedBySignal` instead: nothing final is written."""
    trainer, training_args = run.trainer, run.job.training
    checkpoint = resolve_resume_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)
    # SIGTERM/SIGUSR1 (a preemption): checkpoint of the step reached, then StoppedBySignal, before any final save.
    result = train_or_checkpoint_on_signal(trainer, resume_from_checkpoint=checkpoint)
    trainer.save_model()
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    metrics = {}
    if run.eval_dataset is not None:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    trainer.save_state()
    trainer.create_model_card()  # README.md beside the saved model, as --push_to_hub writes it
    return metrics


def main(argv: list[str] | None = None) -> int:
    """`albert-hf pretrain`: pretrain ALBERT on text files, save model + tokenizer, report MLM/SOP metrics."""
    run = build_run(parse_pretraining_args(argv))
    train_and_save(run)
    if run.trainer.is_world_process_zero():
        print(f"Pretraining data: {run.stats.describe()}")
        print(f"Model and tokenizer saved to {run.job.training.output_dir}")
    return 0


# --------------------------------------------------------------------------------------------------------------------
# Quickstart
# --------------------------------------------------------------------------------------------------------------------


def quickstart_arguments(argv: list[str] | None = None) -> PretrainingJob:
    """The arguments of `albert-hf quickstart` (`arguments.parse_quickstart_args`)."""
    return parse_quickstart_args(argv)


@dataclass
class QuickstartResult:
    """What a quickstart run produced: the run (model, trainer with its log history, corpus counts), held-out
    metrics and baselines."""

    run: PretrainingRun
    metrics: dict[str, float]
    baselines: HeldOutBaselines
    seconds: float

    @property
    def trainer(self) -> AlbertPretrainingTrainer:
        return self.run.trainer

    @property
    def stats(self) -> CorpusStats:
        return self.run.stats

    @property
    def job(self) -> PretrainingJob:
        return self.run.job


class ProgressBarsOnly(ProgressCallback):
    """Trainer's progress bars without the log dictionaries printed under them (`TrainingProgressLog` logs them)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass


def run_quickstart(job: PretrainingJob, quiet: bool = False) -> QuickstartResult:
    """The quickstart's documents and tokenizer, then the pretraining run of `job` on them ([`build_run`],
    [`train_and_save`]) and the held-out baselines."""
    say = (lambda message: None) if quiet else print
    started = time.time()
    if quiet:
        job.training.disable_tqdm = True
    documents = quickstart_documents(job.quickstart)
    held_out_count = quickstart_held_out_count(documents, job.quickstart)
    train, held_out = hold_out(documents, held_out_count, job.training.seed, "--held_out_fraction")
    # The output folder is locked and checked before the tokenizer is trained into it: a finished run's spiece.model
    # is never replaced unless --overwrite_output_dir.
    check_job(job)
    tokenizer = None
    if job.model.tokenizer_name_or_path is None and job.model.model_name_or_path is None:
        tokenizer = train_quickstart_tokenizer(job, train, say)
    say("[2/4] Cutting documents into sentence-order instances")
    run = build_run(
        job, tokenizer=tokenizer, documents=(train, held_out), say=lambda line: say(f"      {line}"), started=True
    )
    say("[3/4] Pretraining a small ALBERT (MLM + SOP, LAMB)")
    metrics = train_and_save(run)
    baselines = held_out_baselines(run.trainer, run.eval_dataset)
    return QuickstartResult(run=run, metrics=metrics, baselines=baselines, seconds=time.time() - started)


def quickstart_main(argv: list[str] | None = None) -> int:
    """`albert-hf quickstart`: tokenizer + small ALBERT from scratch on an offline corpus, in a few minutes."""
    started = time.time()
    result = run_quickstart(quickstart_arguments(argv))
    print("[4/4] Writing the learning curves")
    plot_path = plot_learning_curves(
        result.trainer.state.log_history, Path(result.job.training.output_dir) / "learning_curves.png", result.baselines
    )
    result.trainer.create_model_card()  # again, now that the folder holds the curves the card lists
    print(quickstart_report(result, plot_path, time.time() - started))
    return 0


def train_quickstart_tokenizer(job: PretrainingJob, documents: Dataset, say=print):
    """A SentencePiece tokenizer of the training documents (`quickstart_tokenizer_options`), saved to --output_dir."""
    from ..vocabulary import train_tokenizer

    sentences = Dataset.from_dict({"text": [s for document in documents["sentences"] for s in document]})
    options = quickstart_tokenizer_options(sentences["text"], job.vocab_size, vocab_size_given(job), say)
    say(f"[1/4] Training a {options['vocab_size']}-piece SentencePiece tokenizer")
    try:
        return train_tokenizer(sentences, Path(job.training.output_dir), show_progress=False, **options)
    except ValueError as error:  # SentencePiece cannot learn more pieces than a small corpus holds
        raise UserError(f"{error}\nPass a smaller --vocab_size for this corpus.") from error


# SentencePiece's advice for languages with a large character set (Japanese, Chinese): cover 99.95% of the characters
# rather than 99.995%, the rest becoming <unk>. Such a corpus also needs more pieces than an English one: a few
# thousand characters each take a piece before any word can.
CJK_CHARACTER_COVERAGE = 0.9995


def quickstart_tokenizer_options(texts: list[str], vocab_size: int, vocab_size_given: bool, say=print) -> dict:
    """train_tokenizer options for the corpus: the ALBERT recipe, or for mostly Chinese/Japanese/Korean text a
    character coverage of 0.9995 and (unless --vocab_size was given) 1.5 times as many pieces as the characters
    that coverage keeps. Accent stripping is chosen by train_tokenizer itself from the text."""
    from ..vocabulary import ALBERT_CHARACTER_COVERAGE

    share = cjk_character_share(texts)
    if share < 0.3:
        return dict(vocab_size=vocab_size, character_coverage=ALBERT_CHARACTER_COVERAGE)
    counts = Counter(char for text in texts for char in text if not char.isspace())
    needed, covered = 0, 0
    for needed, (_, count) in enumerate(counts.most_common(), start=1):
        covered += count
        if covered >= CJK_CHARACTER_COVERAGE * counts.total():
            break
    if not vocab_size_given:
        vocab_size = max(vocab_size, needed * 3 // 2)
    say(
        f"      {share:.0%} of the text is Chinese/Japanese/Korean: character coverage {CJK_CHARACTER_COVERAGE} "
        f"({needed} characters), {vocab_size} pieces"
    )
    return dict(vocab_size=vocab_size, character_coverage=CJK_CHARACTER_COVERAGE)
