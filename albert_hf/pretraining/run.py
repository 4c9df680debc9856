"""The steps of a pretraining run that the job scripts call as they are: `albert_hf/scripts/pretrain.py`
(`albert-hf pretrain`) and `albert_hf/scripts/quickstart.py` (`albert-hf quickstart`) put them in order.

[`start_pretraining_job`] refuses what the run could not do and starts the job; [`build_pretraining_model`] makes
the model that fits the tokenizer; [`build_trainer`] the Trainer with its masking collator and progress log;
[`run_fingerprint`] what a resume must not change; [`check_first_instances`] checks the first training instances
and logs what masking does to them. The quickstart's tokenizer step is [`train_quickstart_tokenizer`].
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from ..argument_parsing import config_source
from ..arguments import ModelArguments
from ..data.collator import DataCollatorForSOP
from ..data.instance_stream import stream_position_obstacle
from ..data.masking_stats import masking_statistics
from ..data.sentences import cjk_character_share
from ..distributed import check_lamb_engine
from ..errors import UserError
from ..hub import CardInfo
from ..job_setup import build_config, build_model, start_job
from ..modeling import AlbertForPreTraining
from ..tokenizer_fit import (
    PretrainingSetupError,
    check_sequence_length,
    check_tokenizer_matches_config,
    tokenizer_name,
)
from ..training.callbacks import attach_reliability
from ..training.job_logs import TrainingProgressLog
from ..training.reliability import data_files_fingerprint
from .arguments import PretrainingDataArguments, PretrainingJob, vocab_size_given
from .corpus import first_features
from .trainer import AlbertPretrainingTrainer, PretrainingArguments, pretraining_callbacks

logger = logging.getLogger(__name__)

# Training instances the masking statistics of the log are measured on: the first ones, read once at the start for
# the sanity check of a batch as well.
MASKING_STATISTICS_INSTANCES = 1000


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
    "pad_to_multiple_of",  # the collator draws its masks from the seed and the batch as padded
    "validation_documents",  # held out of the training text
    "streaming",
)
# The quickstart's options that decide its training documents.
FINGERPRINTED_QUICKSTART_OPTIONS = ("corpus", "embedded", "max_documents", "held_out_fraction")


def run_fingerprint(job: PretrainingJob) -> dict[str, Any]:
    """What `--resume_from_checkpoint` refuses to change (the plugin's `fingerprint_extra`, beside the seed, the
    optimizer, the model and the tokenizer's content that the plugin adds): the text, how it becomes instances (and
    in which order, for a stream) and how they are masked; each local data file by its content
    (`data_files_fingerprint`), so that other data at the same path is refused too."""
    data = job.data
    fingerprint = {name: getattr(data, name) for name in FINGERPRINTED_DATA_OPTIONS}
    # NSP draws the random B segments of a batch of documents from that batch (SOP's instances depend on each
    # document alone); a stream is shuffled by windows of --shuffle_buffer_size instances.
    fingerprint["documents_per_batch"] = data.documents_per_batch if data.objective == "nsp" else None
    fingerprint["shuffle_buffer_size"] = data.shuffle_buffer_size if data.streaming else None
    fingerprint["tokenizer"] = job.model.tokenizer_name_or_path or job.model.model_name_or_path
    files = [*(data.train_files or []), data.dataset_name]
    if job.quickstart is not None:
        fingerprint.update({name: getattr(job.quickstart, name) for name in FINGERPRINTED_QUICKSTART_OPTIONS})
        files.append(job.quickstart.corpus)
    fingerprint.update(data_files_fingerprint(files))
    return fingerprint


def start_pretraining_job(job: PretrainingJob) -> None:
    """Start the job (`start_job`: join the launcher's processes, set up the logs, lock --output_dir), refusing
    before any data or model work what the run could not do: an optimizer engine that cannot run LAMB, --streaming
    without --max_steps or with dataloader workers (its checkpoints could not hold the stream's position)."""
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
    fingerprint_extra: dict[str, Any] | None = None,
) -> AlbertPretrainingTrainer:
    """The Trainer of the run, with the masking collator of the arguments, the model card's language and the
    reliability plugin (`attach_reliability`; `fingerprint_extra`: what a resume must not change, [`run_fingerprint`])."""
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
    # Complete checkpoints, checked and exact resumption (of a stream too), the divergence guard of the arguments (or a
    # stop at the first non-finite loss), the SIGTERM checkpoint; and what a resume must not change.
    attach_reliability(trainer, fingerprint_extra=fingerprint_extra, callbacks=pretraining_callbacks(trainer))
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


def check_first_instances(
    trainer: AlbertPretrainingTrainer, data_args: PretrainingDataArguments, word_boundaries: str, say=logger.info
) -> None:
    """Before training, on the first training instances (the first `MASKING_STATISTICS_INSTANCES`): refuse a
    vocabulary that leaves too many <unk> (`check_unknown_share`: it would train on <unk> for days), check a first
    batch when `trainer.args.sanity_checks` ([`check_first_batch`]), and on the main process give `say` the masking
    line ([`masking_log`], its warning logged). `word_boundaries` is where whole-word masking finds words
    (`CorpusStats.word_boundaries`)."""
    first = first_features(trainer.train_dataset, MASKING_STATISTICS_INSTANCES)
    check_unknown_share(first, trainer.processing_class, data_args.max_unknown_share, warn=logger.warning)
    if trainer.args.sanity_checks:
        check_first_batch(trainer, first)
    if trainer.is_world_process_zero():
        line, warning = masking_log(trainer, first, word_boundaries)
        say(line)
        if warning:
            logger.warning(warning)


class ProgressBarsOnly(ProgressCallback):
    """Trainer's progress bars without the log dictionaries printed under them (`TrainingProgressLog` logs them)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass


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


# --------------------------------------------------------------------------------------------------------------------
# The first training instances, checked before training
# --------------------------------------------------------------------------------------------------------------------

# A share of <unk> tokens above this is warned about at the start of pretraining (with the share); above
# `--max_unknown_share` (0.2 unless given) the run is refused.
UNKNOWN_SHARE_WARNING = 0.01


def unknown_share(features: list[dict], tokenizer) -> float:
    """The share of <unk> among the tokens of `features` (their `input_ids`), special tokens other than <unk> left
    out: how much of the text the tokenizer's vocabulary does not cover. 0.0 for no tokens."""
    unk = tokenizer.unk_token_id
    special = set(tokenizer.all_special_ids) - {unk}
    ids = [int(token) for feature in features for token in feature["input_ids"] if int(token) not in special]
    return sum(token == unk for token in ids) / len(ids) if ids else 0.0


def check_unknown_share(features: list[dict], tokenizer, limit: float, warn=None) -> float:
    """Warn (through `warn`) when more than `UNKNOWN_SHARE_WARNING` of the tokens of `features` are <unk>, and raise
    [`PretrainingSetupError`] when more than `limit` are; returns the share."""
    if not 0.0 <= limit <= 1.0:
        raise PretrainingSetupError(f"--max_unknown_share must be between 0 and 1, got {limit}.")
    share = unknown_share(features, tokenizer)
    described = (
        f"<unk> is {share:.1%} of the tokens of the first {len(features)} training instances: the vocabulary of "
        f"the tokenizer ({tokenizer_name(tokenizer)}) does not cover this text (another language or script?)"
    )
    if share > limit:
        raise PretrainingSetupError(
            f"{described}, above --max_unknown_share {limit:g}. Train a tokenizer on this corpus (albert-hf "
            "train-tokenizer), or pass a higher --max_unknown_share (1 allows any share) to train anyway."
        )
    if share > UNKNOWN_SHARE_WARNING and warn is not None:
        warn(f"{described}; the model learns nothing from those tokens.")
    return share


def check_batch(batch: dict[str, torch.Tensor], tokenizer, config, source: str = "the data collator") -> None:
    """A collated training batch fits the model: no longer than the position embeddings, no padding as a target."""
    length = batch["input_ids"].shape[1]
    if length > config.max_position_embeddings:
        raise PretrainingSetupError(
            f"{source} made a batch of length {length}, longer than the model config's max_position_embeddings "
            f"{config.max_position_embeddings}."
        )
    labels = batch.get("labels")
    if labels is None:
        return
    targets = labels != -100
    pad_id = tokenizer.pad_token_id
    padded = targets & (batch["attention_mask"] == 0) if "attention_mask" in batch else torch.zeros_like(targets)
    if padded.any() or (labels[targets] == pad_id).any():
        count = int((padded | (targets & (labels == pad_id))).sum())
        raise PretrainingSetupError(
            f"{source} chose padding as an MLM target {count} times (label = the tokenizer's pad id {pad_id}, or a "
            "position outside the attention mask): the model would learn to predict padding."
        )
