"""Loud failures in pretraining: start-of-run sanity checks (one test per error) and the divergence guard."""

from __future__ import annotations

import copy

import pytest
import torch
from datasets import Dataset
from transformers import TrainerCallback

from albert_hf.configuration import AlbertConfig
from albert_hf.data.collator import DataCollatorForSOP
from albert_hf.data.embedded_corpus import embedded_documents
from albert_hf.data.sentence_order import build_pretraining_dataset
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.run import check_batch
from albert_hf.pretraining.trainer import AlbertPretrainingTrainer, PretrainingArguments, pretraining_callbacks
from albert_hf.scripts.pretrain import main
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.tokenizer_fit import (
    PretrainingSetupError,
    check_sequence_length,
    check_single_token,
    check_tokenizer_matches_config,
)
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.divergence import TrainingDivergedError, divergence_guard_of
from albert_hf.vocabulary import train_tokenizer


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, and far faster than on two contended ones."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def documents() -> Dataset:
    """Real text that ships with Python (its language reference), so these tests need no data folder."""
    return embedded_documents(("language-reference",)).select(range(20))


@pytest.fixture(scope="module")
def tokenizer(documents, tmp_path_factory) -> AlbertHFTokenizer:
    sentences = Dataset.from_dict({"text": [s for document in documents["sentences"] for s in document]})
    return train_tokenizer(sentences, tmp_path_factory.mktemp("tokenizer"), vocab_size=400, show_progress=False)


@pytest.fixture(scope="module")
def instances(documents, tokenizer) -> Dataset:
    return build_pretraining_dataset(documents, tokenizer, max_seq_length=32)


def config_for(tokenizer, **fields) -> AlbertConfig:
    special = dict(
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        mask_token_id=tokenizer.mask_token_id,
    )
    sizes = dict(
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=64,
        num_hidden_layers=2,
        max_position_embeddings=32,
    )
    return AlbertConfig.preset("base-v2", **{"vocab_size": len(tokenizer), **special, **sizes, **fields})


# ---- sanity checks: one test per error ------------------------------------------------------------------------------


def test_matching_tokenizer_and_config_pass(tokenizer, instances):
    config = config_for(tokenizer)
    check_tokenizer_matches_config(tokenizer, config)
    check_sequence_length(32, config)
    check_batch(DataCollatorForSOP(tokenizer)([instances[i] for i in range(8)]), tokenizer, config)


def test_vocabulary_size_mismatch(tokenizer):
    with pytest.raises(
        PretrainingSetupError,
        match=rf"has {len(tokenizer)} pieces but the config of ckpt has "
        r"vocab_size 30000",
    ):
        check_tokenizer_matches_config(tokenizer, config_for(tokenizer, vocab_size=30000), "the config of ckpt")


@pytest.mark.parametrize(
    ("config_field", "tokenizer_field"),
    [
        ("pad_token_id", "pad_token_id"),
        ("bos_token_id", "cls_token_id"),
        ("eos_token_id", "sep_token_id"),
        ("mask_token_id", "mask_token_id"),
    ],
)
def test_special_id_mismatch(tokenizer, config_field, tokenizer_field):
    wrong = getattr(tokenizer, tokenizer_field) + 7
    config = config_for(tokenizer, **{config_field: wrong})
    expected = (
        rf"{tokenizer_field}={getattr(tokenizer, tokenizer_field)} in the tokenizer .* but {config_field}={wrong}"
    )
    with pytest.raises(PretrainingSetupError, match=expected):
        check_tokenizer_matches_config(tokenizer, config)


class SplittingTokenizer(AlbertHFTokenizer):
    """A tokenizer whose [MASK] is not registered as one token: text "[MASK]" becomes ordinary pieces."""

    def __call__(self, text, **kwargs):
        if text == "[MASK]":
            return {"input_ids": self.convert_tokens_to_ids(["▁[", "m", "a", "s", "k", "]"])}
        return super().__call__(text, **kwargs)


def test_mask_not_a_single_token(tokenizer):
    splitting = SplittingTokenizer(vocab_file=tokenizer.vocab_file)
    with pytest.raises(
        PretrainingSetupError,
        match=r"splits mask_token '\[MASK\]' into 6 tokens .* not the single id "
        rf"mask_token_id={tokenizer.mask_token_id}",
    ):
        check_single_token(splitting, "mask_token")


def test_sequences_longer_than_position_embeddings(tokenizer, instances):
    config = config_for(tokenizer, max_position_embeddings=16)
    with pytest.raises(PretrainingSetupError, match="--max_seq_length 32 exceeds max_position_embeddings 16 of ckpt"):
        check_sequence_length(32, config, "ckpt")
    batch = DataCollatorForSOP(tokenizer)([instances[i] for i in range(4)])
    with pytest.raises(PretrainingSetupError, match="batch of length 32, longer than .* max_position_embeddings 16"):
        check_batch(batch, tokenizer, config)


def test_padding_chosen_as_a_label(tokenizer, instances):
    short = {**instances[0], "input_ids": instances[0]["input_ids"][:16], "token_type_ids": [0] * 16}
    batch = DataCollatorForSOP(tokenizer)([short, instances[1]])
    padded = batch["attention_mask"] == 0
    assert padded.any()
    batch["labels"][padded] = tokenizer.pad_token_id  # a collator that masks padding too
    with pytest.raises(
        PretrainingSetupError,
        match=rf"chose padding as an MLM target {int(padded.sum())} times .* "
        rf"pad id {tokenizer.pad_token_id}",
    ):
        check_batch(batch, tokenizer, config_for(tokenizer))


def test_pretrain_refuses_a_30k_model_with_a_1000_piece_tokenizer(shared_data, tmp_path):
    """`albert-hf pretrain` with a model of ALBERT's 30,000-piece vocabulary and a 1,000-piece tokenizer whose ids
    mean other pieces trained without a word; it stops before training, naming both sides."""
    checkpoint = tmp_path / "albert-30k"
    AlbertForPreTraining(
        AlbertConfig.preset(
            "base-v2",
            embedding_size=16,
            hidden_size=32,
            num_attention_heads=2,
            intermediate_size=64,
            num_hidden_layers=1,
        )
    ).save_pretrained(checkpoint)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One sentence here.\nAnother sentence there.\n\nA second document.\nIt ends here.\n")
    small = train_tokenizer(
        shared_data / "corpus" / "botchan.txt", tmp_path / "tokenizer-1000", vocab_size=1000, show_progress=False
    )
    tokenizer_file = tmp_path / "tokenizer-1000" / "spiece.model"
    pieces = len(small)
    assert pieces == 1000
    argv = [
        "--model_name_or_path",
        str(checkpoint),
        "--tokenizer_name_or_path",
        str(tokenizer_file),
        "--train_files",
        str(corpus),
        "--output_dir",
        str(tmp_path / "out"),
        "--max_steps",
        "1",
        "--max_seq_length",
        "64",
        "--use_cpu",
        "--report_to",
        "none",
    ]
    with pytest.raises(
        PretrainingSetupError,
        match=rf"The tokenizer \({tokenizer_file}\) has {pieces} pieces but the "
        rf"config of {checkpoint} has vocab_size 30000",
    ):
        main(argv)


# ---- divergence guard -----------------------------------------------------------------------------------------------

STEPS = 30
BAD_STEP = 20  # 1-based: the optimizer step that is disturbed


class LearningRateJump(TrainerCallback):
    """Multiplies the learning rate of one optimizer step by `factor`, once (the scheduler resets it at the next
    step). Just before the optimizer step, after the guard has judged the step's loss, as a bad rate would act."""

    def __init__(self, step: int, factor: float):
        self.step, self.factor, self.fired = step, factor, False

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if state.global_step == self.step - 1 and not self.fired:
            self.fired = True
            for group in optimizer.param_groups:
                group["lr"] *= self.factor


class StateRecorder(TrainerCallback):
    """Copies of the weights and optimizer state after step `step`, and right after each rollback."""

    def __init__(self, step: int):
        self.step, self.at_step, self.after_rollback = step, None, []

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        if state.global_step == self.step and self.at_step is None:
            self.at_step = state_copy(model, optimizer)

    def on_log(self, args, state, control, logs=None, model=None, optimizer=None, **kwargs):
        if logs and "divergence_rollback_to_step" in logs:
            self.after_rollback.append(state_copy(model, optimizer))


def state_copy(model, optimizer) -> tuple[dict, dict]:
    return copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict()["state"])


def assert_states_equal(left: tuple[dict, dict], right: tuple[dict, dict]) -> None:
    (weights_a, optim_a), (weights_b, optim_b) = left, right
    assert weights_a.keys() == weights_b.keys()
    for name in weights_a:
        assert torch.equal(weights_a[name], weights_b[name]), name
    assert optim_a.keys() == optim_b.keys()
    for key in optim_a:
        for field in optim_a[key]:
            assert torch.equal(optim_a[key][field], optim_b[key][field]), (key, field)


def guarded_run(tokenizer, features: list[dict], tmp_path, callbacks=(), **args):
    """`STEPS` AdamW steps of batch 4 over `features` in order, guard on. One epoch: the features that rollbacks skip
    must be in it (the epoch's loop has one iteration per batch)."""
    torch.manual_seed(0)
    model = AlbertForPreTraining(config_for(tokenizer))
    collator = DataCollatorForSOP(tokenizer, seed=0)
    defaults = dict(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        save_strategy="no",
        seed=0,
        per_device_train_batch_size=4,
        max_steps=STEPS,
        optimizer="adamw",
        learning_rate=2e-3,
        lr_schedule="trainer",
        lr_scheduler_type="linear",
        warmup_steps=0,
        logging_steps=1,
        dataloader_num_workers=0,
        divergence_snapshot_steps=1,
        divergence_min_history=5,
        train_sampling_strategy="sequential",
    )
    arguments = PretrainingArguments(**{**defaults, **args})
    trainer = AlbertPretrainingTrainer(
        model=model,
        args=arguments,
        data_collator=collator,
        train_dataset=Dataset.from_list(features),
        callbacks=list(callbacks),
    )
    attach_reliability(trainer, callbacks=pretraining_callbacks(trainer)).train()  # the guard of the arguments
    return trainer


def final_loss(trainer) -> float:
    """Mean training loss of the last 5 logged steps."""
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return sum(losses[-5:]) / 5


@pytest.fixture(scope="module")
def features(instances) -> list[dict]:
    assert len(instances) >= 4 * (STEPS + 2)
    return [instances[i] for i in range(4 * (STEPS + 2))]


@pytest.fixture(scope="module")
def undisturbed(tokenizer, features, tmp_path_factory):
    trainer = guarded_run(tokenizer, features[: 4 * STEPS], tmp_path_factory.mktemp("undisturbed"))
    assert divergence_guard_of(trainer).rollbacks == 0  # the guard never fires on a healthy run
    return trainer


def without_batches(features: list[dict], steps: list[int]) -> list[dict]:
    """The features minus the batches of 4 read at the given 1-based steps."""
    return [feature for i, feature in enumerate(features) if i // 4 + 1 not in steps]


def test_learning_rate_jump_is_rolled_back(tokenizer, features, undisturbed, tmp_path):
    recorder = StateRecorder(BAD_STEP - 1)
    trainer = guarded_run(
        tokenizer,
        features[: 4 * (STEPS + 2)],
        tmp_path / "jump",
        callbacks=[LearningRateJump(BAD_STEP, 1000.0), recorder],
    )
    guard = divergence_guard_of(trainer)
    # The jump's update shows in the next step's loss; both steps' batches are skipped, back to before the jump.
    assert [(e["divergence_rollback_from_step"], e["divergence_rollback_to_step"]) for e in guard.events] == [
        (BAD_STEP + 1, BAD_STEP - 1)
    ]
    assert guard.events[0]["divergence_skipped_batches"] == 2
    # Nothing of the bad step survives: right after the rollback, weights and optimizer state are exactly those from
    # before it ...
    assert_states_equal(recorder.after_rollback[0], recorder.at_step)
    # ... and the run ends exactly as one that never read those two batches.
    skipped = guarded_run(tokenizer, without_batches(features, [BAD_STEP, BAD_STEP + 1]), tmp_path / "skipped")
    assert divergence_guard_of(skipped).rollbacks == 0
    assert trainer.state.global_step == skipped.state.global_step == STEPS
    assert_states_equal(state_copy(trainer.model, trainer.optimizer), state_copy(skipped.model, skipped.optimizer))
    assert_logs_cover_the_kept_steps(trainer, skipped, BAD_STEP + 1)
    # Two batches of 30 fewer: the last losses stay within 5% of the undisturbed run's (without the guard the jump
    # leaves the loss several times higher, see test_without_the_guard_the_jump_is_not_recovered).
    assert final_loss(trainer) == pytest.approx(final_loss(undisturbed), rel=0.05)


def assert_logs_cover_the_kept_steps(trainer, skipped, bad_step: int) -> None:
    """The losses logged (every step) by a run rolled back at `bad_step` to `bad_step - 2`, against those of the run
    that never read the skipped batches: Trainer's own before the rollback and from `bad_step + 1` on; at `bad_step`
    the mean of the two redone steps (the first one had been logged before the rollback: it is not logged again);
    the final `train_loss` the mean over the kept steps, not over the undone ones."""
    logged = {entry["step"]: entry["loss"] for entry in trainer.state.log_history if "loss" in entry}
    reference = {entry["step"]: entry["loss"] for entry in skipped.state.log_history if "loss" in entry}
    assert sorted(logged) == sorted(reference)
    assert logged[bad_step] == (reference[bad_step - 1] + reference[bad_step]) / 2
    assert all(logged[step] == reference[step] for step in reference if step < bad_step - 1 or step > bad_step)
    final, expected = trainer.state.log_history[-1], skipped.state.log_history[-1]
    assert final["train_loss"] == pytest.approx(expected["train_loss"], rel=1e-12)


def test_without_the_guard_the_jump_is_not_recovered(tokenizer, features, undisturbed, tmp_path):
    """The baseline the tolerance above is judged against: the same jump, the guard off."""
    try:
        trainer = guarded_run(
            tokenizer,
            features[: 4 * STEPS],
            tmp_path / "off",
            divergence_guard=False,
            callbacks=[LearningRateJump(BAD_STEP, 1000.0)],
        )
    except RuntimeError as error:  # NonFiniteLossError: stopped, not recovered
        assert "non-finite" in str(error) or "NaN" in str(error)
        return
    assert final_loss(trainer) > 1.5 * final_loss(undisturbed)


def test_lr_factor_lowers_the_learning_rate_at_each_rollback(tokenizer, features, tmp_path):
    trainer = guarded_run(
        tokenizer,
        features[: 4 * (STEPS + 2)],
        tmp_path / "factor",
        divergence_lr_factor=0.5,
        callbacks=[LearningRateJump(BAD_STEP, 1000.0)],
    )
    event = divergence_guard_of(trainer).events[0]
    # Linear decay to 0 over STEPS: the rate of step BAD_STEP - 1 restored, then halved.
    assert event["learning_rate"] == pytest.approx(0.5 * 2e-3 * (1 - (BAD_STEP - 1) / STEPS))


def test_a_run_that_keeps_diverging_stops(tokenizer, features, tmp_path):
    class JumpEveryStep(TrainerCallback):
        def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
            if state.global_step >= BAD_STEP - 1:
                for group in optimizer.param_groups:
                    group["lr"] = 10.0

    with pytest.raises(TrainingDivergedError, match=r"already been rolled back 2 times .* it keeps diverging"):
        guarded_run(tokenizer, features, tmp_path / "keeps", divergence_max_rollbacks=2, callbacks=[JumpEveryStep()])


# A corrupted batch: a model near its initial loss scores garbage about as badly as real text, so a spike of the
# loss only shows once the model has learned something. Here: 16 real sequences read over and over at a constant
# rate, until the loss is about a quarter of its initial value, then one batch whose pieces are replaced by random
# ids (what a shard written with another vocabulary gives).
CYCLE_STEPS = 200
CORRUPTED_STEP = 170  # 1-based: the optimizer step that reads the corrupted batch
CYCLE_ARGS = dict(lr_scheduler_type="constant", learning_rate=3e-3, divergence_window=20)


def corrupted(tokenizer, features: list[dict], seed: int = 0) -> list[dict]:
    """The features with every piece (special tokens kept) replaced by a random id of the vocabulary."""
    generator = torch.Generator().manual_seed(seed)
    special = set(tokenizer.all_special_ids)
    result = []
    for feature in features:
        ids = [
            token if token in special else int(torch.randint(len(special), len(tokenizer), (), generator=generator))
            for token in feature["input_ids"]
        ]
        result.append({**feature, "input_ids": ids})
    return result


def test_corrupted_batch_is_rolled_back(tokenizer, instances, tmp_path):
    cycle = [instances[i % 16] for i in range(4 * (CYCLE_STEPS + 1))]
    start = 4 * (CORRUPTED_STEP - 1)
    disturbed = cycle[:start] + corrupted(tokenizer, cycle[start : start + 4]) + cycle[start:]
    recorder = StateRecorder(CORRUPTED_STEP - 2)
    trainer = guarded_run(
        tokenizer, disturbed, tmp_path / "corrupted", callbacks=[recorder], max_steps=CYCLE_STEPS, **CYCLE_ARGS
    )
    guard = divergence_guard_of(trainer)
    # The corrupted batch's loss is judged before its update: the step before it (whose update that loss judged) and
    # the corrupted one are undone and their batches skipped.
    assert [(e["divergence_rollback_from_step"], e["divergence_rollback_to_step"]) for e in guard.events] == [
        (CORRUPTED_STEP, CORRUPTED_STEP - 2)
    ]
    assert guard.events[0]["divergence_skipped_batches"] == 2
    assert_states_equal(recorder.after_rollback[0], recorder.at_step)
    # Nothing of the corrupted batch survives: the run ends exactly as one that never read those two batches ...
    skipped = guarded_run(
        tokenizer,
        without_batches(disturbed, [CORRUPTED_STEP - 1, CORRUPTED_STEP]),
        tmp_path / "skipped",
        max_steps=CYCLE_STEPS,
        **CYCLE_ARGS,
    )
    assert divergence_guard_of(skipped).rollbacks == 0
    assert trainer.state.global_step == skipped.state.global_step == CYCLE_STEPS
    assert_states_equal(state_copy(trainer.model, trainer.optimizer), state_copy(skipped.model, skipped.optimizer))
    assert_logs_cover_the_kept_steps(trainer, skipped, CORRUPTED_STEP)
    # ... and its last losses are within 5% of those of the run that never saw the corrupted batch (one good batch
    # of 200 fewer).
    undisturbed = guarded_run(
        tokenizer, cycle[: 4 * CYCLE_STEPS], tmp_path / "undisturbed", max_steps=CYCLE_STEPS, **CYCLE_ARGS
    )
    assert divergence_guard_of(undisturbed).rollbacks == 0
    assert final_loss(trainer) == pytest.approx(final_loss(undisturbed), rel=0.05)
