"""Distributed training: 2-process runs on CPU (gloo) under DDP, DeepSpeed ZeRO-2/3 and FSDP2, checked against one
process; the launch guards; the memory estimate; the shipped accelerate/DeepSpeed configs.

The launched scripts live in tests/distributed/: Trainer on fixed batches (trainer_parity.py), the gradients of the
shared layer (shared_layer_grads.py), and the real jobs `albert_hf.scripts.pretrain` (`albert-hf pretrain`) and
`albert_hf.scripts.glue` run unchanged through run_task.py, each under DDP, ZeRO-2 and ZeRO-3 (persistence threshold 0,
weights loaded by from_pretrained inside zero.Init, consolidated safetensors saved). Every parity run uses SGD
without clipping, a constant learning rate and dropout 0, so a wrong gradient scale (e.g. a loss not normalized over
the global batch) changes the final weights by about the step itself, far above the 1e-6 tolerance. Each
multi-process test starts one `torchrun` with two processes (about 30-60 s each, mostly imports; the first DeepSpeed
start compiles a small C++ op, cached in $TORCH_EXTENSIONS_DIR).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers.distributed import (
    CONFIGS,
    GLOBAL_BATCH,
    REPO_ROOT,
    SEQ_LEN,
    STEPS,
    TOLERANCE,
    WORKERS,
    assert_ranks_split_the_global_batches,
    deepspeed_arguments,
    job_reference,
    load_saved_weights,
    max_difference,
    pretraining_arguments,
    run_job_on_two_processes,
    save_random_pretraining_batches,
    tiny_config,
    torchrun,
)
from helpers.optional import engines

from albert_hf.configuration import AlbertConfig
from albert_hf.data.ner import CONLL2003_LABELS
from albert_hf.distributed import (
    activation_bytes_per_sequence,
    check_world_size,
    estimate_memory_per_gpu,
    init_distributed,
    pretraining_parameter_count,
)
from albert_hf.modeling import AlbertForPreTraining, AlbertForSequenceClassification, AlbertForTokenClassification

sys.path.insert(0, str(WORKERS))  # the launched worker scripts double as libraries for the single-process runs
from trainer_parity import LEARNING_RATE, run_training  # noqa: E402


def assert_two_processes_match(
    module_name: str, argv: list[str], model_class, output_dir: Path, engine: str, reference: dict, record_property
) -> None:
    """The job under torchrun with 2 processes trained each rank on its half of the reference's rows and ended
    with the reference's weights (saved complete); under ZeRO-3 from_pretrained partitioned every tensor."""
    records = run_job_on_two_processes(module_name, argv, output_dir.with_name(output_dir.name + "_record"))
    assert_ranks_split_the_global_batches(records, reference["rows_per_step"])
    # Under ZeRO-3 from_pretrained ran inside zero.Init: every tensor came out partitioned (persistence threshold 0).
    assert all(record["partitioned_after_from_pretrained"] == (engine == "zero3") for record in records)
    difference = max_difference(load_saved_weights(model_class, output_dir), reference["weights"])
    record_property("max_abs_difference", difference)
    assert difference < TOLERANCE


# --------------------------------------------------------------------------------------------------------------------
# Fixtures: a tiny checkpoint and a few batches, shared by the module
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("distributed")


@pytest.fixture(scope="module")
def pretraining_checkpoint(workdir) -> Path:
    torch.manual_seed(0)
    path = workdir / "pretraining_checkpoint"
    AlbertForPreTraining(tiny_config()).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def mlm_batches(workdir) -> Path:
    """GLOBAL_BATCH x STEPS distinct rows with padding and a varying number of masked tokens per row."""
    return save_random_pretraining_batches(workdir / "mlm_batches.pt", GLOBAL_BATCH * STEPS, SEQ_LEN, seed=1)


@pytest.fixture(scope="module")
def trainer_reference(workdir, pretraining_checkpoint, mlm_batches) -> dict:
    """One process, batch GLOBAL_BATCH: the run every engine must reproduce."""
    output_dir = workdir / "trainer_single"
    record = run_training("single", str(pretraining_checkpoint), str(mlm_batches), str(output_dir), GLOBAL_BATCH)
    weights = AlbertForPreTraining.from_pretrained(output_dir).state_dict()
    initial = AlbertForPreTraining.from_pretrained(pretraining_checkpoint).state_dict()
    # The check is only meaningful if training moved the weights far more than the tolerance.
    assert max_difference(weights, initial) > 1000 * TOLERANCE
    return {"weights": weights, "rows_per_step": record["rows_per_step"]}


# --------------------------------------------------------------------------------------------------------------------
# Trainer under DDP and DeepSpeed ZeRO-2/3 equals one process
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.distributed
@pytest.mark.parametrize("engine", engines("ddp", "zero2", "zero3"))
def test_trainer_two_processes_match_one(engine, workdir, pretraining_checkpoint, mlm_batches, trainer_reference):
    output_dir = workdir / f"trainer_{engine}"
    torchrun(
        WORKERS / "trainer_parity.py",
        "--engine",
        engine,
        "--checkpoint",
        str(pretraining_checkpoint),
        "--data",
        str(mlm_batches),
        "--output_dir",
        str(output_dir),
        "--per_device_batch_size",
        "4",
    )

    records = [json.loads((output_dir / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert_ranks_split_the_global_batches(records, trainer_reference["rows_per_step"])
    if engine == "zero3":
        # from_pretrained ran inside zero.Init: every tensor was partitioned (persistence threshold 0).
        assert all(record["partitioned_after_from_pretrained"] for record in records)
    # ZeRO-3 saved the gathered weights as one safetensors file, which from_pretrained loads completely.
    weights = load_saved_weights(AlbertForPreTraining, output_dir)
    assert max_difference(weights, trainer_reference["weights"]) < TOLERANCE


# --------------------------------------------------------------------------------------------------------------------
# Cross-layer sharing: gradients of the shared layer under FSDP2 and ZeRO-3
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.distributed
@pytest.mark.needs("deepspeed")
def test_shared_layer_gradients_under_fsdp2_and_zero3(workdir, pretraining_checkpoint, mlm_batches):
    output_dir = workdir / "shared_layer_grads"
    output_dir.mkdir()
    batch = {key: value[:GLOBAL_BATCH] for key, value in torch.load(mlm_batches).items()}
    batch_path = output_dir / "batch.pt"
    torch.save(batch, batch_path)
    torchrun(
        WORKERS / "shared_layer_grads.py",
        "--checkpoint",
        str(pretraining_checkpoint),
        "--batch",
        str(batch_path),
        "--output_dir",
        str(output_dir),
        "--engines",
        "fsdp2,zero3",
    )

    model = AlbertForPreTraining.from_pretrained(pretraining_checkpoint)
    model(
        **batch, num_items_in_batch=(batch["labels"] != -100).sum(), num_sequences_in_batch=GLOBAL_BATCH
    ).loss.backward()
    reference = {name: parameter.grad for name, parameter in model.named_parameters()}
    shared = [name for name in reference if ".albert_layer_groups.0." in name]
    assert model.config.num_hidden_layers == 3 and model.config.num_hidden_groups == 1 and shared
    for engine in ("fsdp2", "zero3"):
        gradients = torch.load(output_dir / f"{engine}_grads.pt")
        assert max_difference(gradients, reference) < TOLERANCE, engine
        # The shared layer's gradient is the sum over its three applications, not the last one's.
        assert max(gradients[name].abs().max().item() for name in shared) > 1000 * TOLERANCE


@pytest.mark.distributed
def test_fsdp2_training_saves_a_checkpoint_equal_to_one_process(workdir, pretraining_checkpoint, mlm_batches):
    """FSDP2 beyond one backward: SGD steps on the sharded parameters (wrapped as accelerate's FSDP2 preparation
    wraps them), then the full state dict gathered and saved. from_pretrained loads that checkpoint whole, and it
    equals one process trained on the same global batches."""
    output_dir = workdir / "fsdp2_train"
    output_dir.mkdir()
    torchrun(
        WORKERS / "shared_layer_grads.py",
        "--checkpoint",
        str(pretraining_checkpoint),
        "--batch",
        str(mlm_batches),
        "--output_dir",
        str(output_dir),
        "--engines",
        "fsdp2_train",
        "--global_batch_size",
        str(GLOBAL_BATCH),
        "--learning_rate",
        str(LEARNING_RATE),
    )

    model = AlbertForPreTraining.from_pretrained(pretraining_checkpoint)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    batches = torch.load(mlm_batches)
    for step in range(STEPS):
        batch = {key: value[step * GLOBAL_BATCH : (step + 1) * GLOBAL_BATCH] for key, value in batches.items()}
        count = (batch["labels"] != -100).sum()
        model(**batch, num_items_in_batch=count, num_sequences_in_batch=GLOBAL_BATCH).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    reference = model.state_dict()
    initial = AlbertForPreTraining.from_pretrained(pretraining_checkpoint).state_dict()
    assert max_difference(reference, initial) > 1000 * TOLERANCE  # the steps moved the weights far more than that
    assert max_difference(load_saved_weights(AlbertForPreTraining, output_dir / "fsdp2_model"), reference) < TOLERANCE


# --------------------------------------------------------------------------------------------------------------------
# The real pretraining job (`albert-hf pretrain`) under DDP and ZeRO-2/3
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pretraining_corpus(wikitext_articles) -> Path:
    """Well over GLOBAL_BATCH x STEPS instances of 64 tokens."""
    return wikitext_articles(2)


@pytest.fixture(scope="module")
def pretraining_job_checkpoint(workdir) -> Path:
    """A tiny AlbertForPreTraining sized to the real 30k tokenizer; the job loads it with from_pretrained."""
    torch.manual_seed(0)
    path = workdir / "pretraining_job_checkpoint"
    AlbertForPreTraining(tiny_config(vocab_size=30000)).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def pretraining_reference(workdir, pretraining_corpus, spiece_model, pretraining_job_checkpoint) -> dict:
    """One process, batch GLOBAL_BATCH, same job and masks (run_task keys them by row content)."""
    output_dir = workdir / "pretraining_single"
    arguments = pretraining_arguments(
        pretraining_corpus, spiece_model, pretraining_job_checkpoint, output_dir, GLOBAL_BATCH
    )
    return job_reference(
        "albert_hf.scripts.pretrain",
        arguments,
        AlbertForPreTraining,
        pretraining_job_checkpoint,
        output_dir,
        min_change=1000 * TOLERANCE,
    )


@pytest.mark.distributed
@pytest.mark.parametrize("engine", engines("ddp", "zero2", "zero3"))
def test_pretraining_script_two_processes_match_one(
    engine,
    workdir,
    pretraining_corpus,
    spiece_model,
    pretraining_job_checkpoint,
    pretraining_reference,
    record_property,
):
    # Both ranks build the same instances and the sampler's global order: together they train on the reference's
    # rows, each on its half.
    output_dir = workdir / f"pretraining_{engine}"
    arguments = pretraining_arguments(
        pretraining_corpus, spiece_model, pretraining_job_checkpoint, output_dir, GLOBAL_BATCH // 2
    ) + deepspeed_arguments(engine, workdir)
    assert_two_processes_match(
        "albert_hf.scripts.pretrain",
        arguments,
        AlbertForPreTraining,
        output_dir,
        engine,
        pretraining_reference,
        record_property,
    )


# --------------------------------------------------------------------------------------------------------------------
# The real fine-tuning job (GLUE MRPC) under DDP and ZeRO-2/3
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def glue_checkpoint(workdir) -> Path:
    torch.manual_seed(0)
    path = workdir / "glue_checkpoint"
    AlbertForSequenceClassification(tiny_config(vocab_size=30000, num_labels=2)).save_pretrained(path)
    return path


def glue_arguments(shared_data: Path, spiece_model: Path, checkpoint: Path, output_dir: Path, batch: int) -> list[str]:
    return [
        "--task_name",
        "mrpc",
        "--data_dir",
        str(shared_data / "glue" / "MRPC"),
        "--model_name_or_path",
        str(checkpoint),
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--max_seq_length",
        "32",
        "--max_train_samples",
        str(GLOBAL_BATCH * STEPS),
        "--do_train",
        "--max_steps",
        str(STEPS),
        "--per_device_train_batch_size",
        str(batch),
        "--optim",
        "sgd",
        "--learning_rate",
        "0.5",
        "--lr_scheduler_type",
        "constant",
        "--max_grad_norm",
        "0",
        "--weight_decay",
        "0",
        "--use_cpu",
        "--seed",
        "0",
        "--report_to",
        "none",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(output_dir),
    ]


@pytest.fixture(scope="module")
def glue_reference(workdir, shared_data, spiece_model, glue_checkpoint) -> dict:
    output_dir = workdir / "glue_single"
    arguments = glue_arguments(shared_data, spiece_model, glue_checkpoint, output_dir, GLOBAL_BATCH)
    return job_reference(
        "albert_hf.scripts.glue",
        arguments,
        AlbertForSequenceClassification,
        glue_checkpoint,
        output_dir,
        min_change=100 * TOLERANCE,
    )


@pytest.mark.distributed
@pytest.mark.parametrize("engine", engines("ddp", "zero2", "zero3"))
def test_glue_script_two_processes_match_one(
    engine, workdir, shared_data, spiece_model, glue_checkpoint, glue_reference, record_property
):
    output_dir = workdir / f"glue_{engine}"
    arguments = glue_arguments(
        shared_data, spiece_model, glue_checkpoint, output_dir, GLOBAL_BATCH // 2
    ) + deepspeed_arguments(engine, workdir)
    assert_two_processes_match(
        "albert_hf.scripts.glue",
        arguments,
        AlbertForSequenceClassification,
        output_dir,
        engine,
        glue_reference,
        record_property,
    )


# --------------------------------------------------------------------------------------------------------------------
# The NER job (CoNLL-2003) under DDP: token-level loss normalized over the global batch
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ner_checkpoint(workdir) -> Path:
    torch.manual_seed(0)
    path = workdir / "ner_checkpoint"
    labels = dict(enumerate(CONLL2003_LABELS))
    config = tiny_config(
        vocab_size=30000,
        num_labels=len(labels),
        id2label=labels,
        label2id={label: index for index, label in labels.items()},
    )
    AlbertForTokenClassification(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def ner_data(workdir, shared_data) -> Path:
    """The first `GLOBAL_BATCH * STEPS` real CoNLL sentences as train.txt and valid.txt in the CoNLL layout. The
    excerpt has 10: it is read again, each sentence without its last token, so that every row stays distinct (the
    ranks' rows are told apart by content)."""
    text = (shared_data / "conll2003" / "train.txt").read_text(encoding="utf-8")
    sentences = [block for block in text.strip("\n").split("\n\n") if not block.startswith("-DOCSTART-")]
    shortened = ["\n".join(sentence.split("\n")[:-1]) for sentence in sentences]
    needed = GLOBAL_BATCH * STEPS
    kept = (sentences + [sentence for sentence in shortened if sentence])[:needed]
    assert len(set(kept)) == needed, "the NER sentences of the test must be distinct"
    folder = workdir / "ner_data"
    folder.mkdir(exist_ok=True)
    for split in ("train", "valid"):
        (folder / f"{split}.txt").write_text("\n\n".join(kept) + "\n", encoding="utf-8")
    return folder


def ner_arguments(data_dir: Path, spiece_model: Path, checkpoint: Path, output_dir: Path, batch: int) -> list[str]:
    # Sentences have different numbers of labelled tokens, so a per-process mean would weigh them wrongly.
    return [
        "--data_dir",
        str(data_dir),
        "--model_name_or_path",
        str(checkpoint),
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--max_seq_length",
        "32",
        "--max_train_samples",
        str(GLOBAL_BATCH * STEPS),
        "--do_train",
        "--max_steps",
        str(STEPS),
        "--per_device_train_batch_size",
        str(batch),
        "--optim",
        "sgd",
        "--learning_rate",
        "0.5",
        "--lr_scheduler_type",
        "constant",
        "--max_grad_norm",
        "0",
        "--weight_decay",
        "0",
        "--use_cpu",
        "--seed",
        "0",
        "--report_to",
        "none",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(output_dir),
    ]


@pytest.mark.distributed
def test_ner_script_two_processes_match_one(workdir, ner_data, spiece_model, ner_checkpoint, record_property):
    reference_dir, output_dir = workdir / "ner_single", workdir / "ner_ddp"
    reference = job_reference(
        "albert_hf.scripts.ner",
        ner_arguments(ner_data, spiece_model, ner_checkpoint, reference_dir, GLOBAL_BATCH),
        AlbertForTokenClassification,
        ner_checkpoint,
        reference_dir,
        min_change=100 * TOLERANCE,
    )
    arguments = ner_arguments(ner_data, spiece_model, ner_checkpoint, output_dir, GLOBAL_BATCH // 2)
    assert_two_processes_match(
        "albert_hf.scripts.ner", arguments, AlbertForTokenClassification, output_dir, "ddp", reference, record_property
    )


# --------------------------------------------------------------------------------------------------------------------
# Launch guards (single process)
# --------------------------------------------------------------------------------------------------------------------


class _Arguments:
    """The two TrainingArguments attributes the guard reads."""

    def __init__(self, world_size: int):
        self.world_size = world_size
        self.deepspeed = None


def test_check_world_size_refuses_independent_jobs(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="--use_cpu"):
        check_world_size(_Arguments(world_size=1))
    check_world_size(_Arguments(world_size=2))


def test_check_world_size_names_a_bad_world_size(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        check_world_size(_Arguments(world_size=1))


def test_init_distributed_single_process(monkeypatch, tmp_path):
    from transformers import TrainingArguments

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    init_distributed(args)  # no launcher: nothing to join, nothing to refuse
    assert args.world_size == 1 and not torch.distributed.is_initialized()


# --------------------------------------------------------------------------------------------------------------------
# Memory estimate
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_pretraining_parameter_count_matches_the_model(sharing):
    config = tiny_config(sharing=sharing, num_hidden_layers=2, inner_group_num=1)
    model = AlbertForPreTraining(config)
    assert pretraining_parameter_count(config) == sum(parameter.numel() for parameter in model.parameters())


def test_pretraining_parameter_count_of_released_sizes():
    # The paper's Table 1 gives 12M, 18M, 60M and 235M; the released xxlarge checkpoint holds 223M (with both heads).
    expected_millions = {"base": 12, "large": 18, "xlarge": 60, "xxlarge": 223}
    for size, millions in expected_millions.items():
        assert pretraining_parameter_count(AlbertConfig.preset(size)) / 1e6 == pytest.approx(millions, abs=1.0), size


@pytest.mark.parametrize("sharing,seq_len", [("all", 64), ("none", 32), ("attention", 48)])
def test_activation_estimate_matches_saved_tensors(sharing, seq_len):
    """Bytes autograd keeps for backward (counted with saved-tensor hooks, fp32, SDPA) within 5% of the formula."""
    config = tiny_config(
        vocab_size=300,
        intermediate_size=80,
        max_position_embeddings=128,
        sharing=sharing,
        num_hidden_layers=2 if sharing != "all" else 3,
        attn_implementation="sdpa",
    )
    model = AlbertForPreTraining(config)
    parameters = {parameter.untyped_storage().data_ptr() for parameter in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    batch_size = 2
    input_ids = torch.randint(5, 300, (batch_size, seq_len))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(input_ids=input_ids, labels=input_ids, sentence_order_label=torch.zeros(batch_size, dtype=torch.long))
    estimate = batch_size * activation_bytes_per_sequence(config, seq_len, mixed_precision=False)
    assert estimate == pytest.approx(sum(saved.values()), rel=0.05)


def test_zero_stages_partition_what_they_should():
    config = AlbertConfig.preset("large")
    psi = pretraining_parameter_count(config)
    ddp = estimate_memory_per_gpu(config, num_gpus=8, zero_stage=0, micro_batch_size=1)
    assert (ddp.parameters, ddp.gradients, ddp.optimizer_states) == (2 * psi, 2 * psi, 12 * psi)
    stages = [estimate_memory_per_gpu(config, num_gpus=8, zero_stage=stage, micro_batch_size=1) for stage in (1, 2, 3)]
    assert stages[0].optimizer_states == int(12 * psi / 8) and stages[0].gradients == 2 * psi
    assert stages[1].gradients == int(2 * psi / 8) and stages[1].parameters == 2 * psi
    assert stages[2].parameters == int(2 * psi / 8)
    assert ddp.total > stages[0].total > stages[1].total > stages[2].total
    assert all(stage.activations == ddp.activations for stage in stages)  # activations are never partitioned
    offload = estimate_memory_per_gpu(config, 8, 3, 1, offload_optimizer=True, offload_parameters=True)
    assert offload.parameters == offload.gradients == offload.optimizer_states == 0
    checkpointed = estimate_memory_per_gpu(config, 8, 3, 1, gradient_checkpointing=True)
    assert checkpointed.activations < stages[2].activations
    with pytest.raises(ValueError, match="stage 3"):
        estimate_memory_per_gpu(config, 8, 2, 1, offload_parameters=True)


# --------------------------------------------------------------------------------------------------------------------
# Shipped configs
# --------------------------------------------------------------------------------------------------------------------


def test_accelerate_configs_are_complete_and_consistent():
    expected = {
        "single_gpu.yaml": "NO",
        "multi_gpu_ddp.yaml": "MULTI_GPU",
        "deepspeed_zero2.yaml": "DEEPSPEED",
        "deepspeed_zero3.yaml": "DEEPSPEED",
        "deepspeed_zero3_offload.yaml": "DEEPSPEED",
        "fsdp2.yaml": "FSDP",
    }
    for name, distributed_type in expected.items():
        config = yaml.safe_load((CONFIGS / name).read_text())
        assert config["distributed_type"] == distributed_type, name
        if distributed_type == "DEEPSPEED":
            ds_file = REPO_ROOT / config["deepspeed_config"]["deepspeed_config_file"]
            ds_config = json.loads(ds_file.read_text())
            stage = ds_config["zero_optimization"]["stage"]
            assert stage == (2 if "zero2" in name else 3), name
            assert config["deepspeed_config"]["zero3_init_flag"] == (stage == 3), name
            if stage == 3:  # Trainer.save_model must write a consolidated, loadable checkpoint
                assert ds_config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True
            offloaded = "offload_optimizer" in ds_config["zero_optimization"]
            assert offloaded == ("offload" in name), name
    fsdp = yaml.safe_load((CONFIGS / "fsdp2.yaml").read_text())["fsdp_config"]
    assert fsdp["fsdp_version"] == 2
    import albert_hf.modeling as modeling

    assert hasattr(modeling, fsdp["fsdp_transformer_layer_cls_to_wrap"])
