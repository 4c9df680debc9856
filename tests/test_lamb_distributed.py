"""LAMB is one optimizer under every engine: 2 processes on CPU (gloo) against one process on the global batch.

The trust ratio ||w|| / ||update|| belongs to a whole tensor. DeepSpeed ZeRO hands the optimizer one flat partition
per parameter group instead of the tensors, and FSDP2 one shard of each; `Lamb` sums each tensor's squares over the
processes (tests/distributed/lamb_engines.py runs the engines, the real pretraining job runs under Trainer below).
Every run starts from one saved model with a shared layer group applied three times, the MLM decoder tied to the
word embeddings and ALBERT's LayerNorm/bias exclusions, takes 4 steps with gradient accumulation 2 and ALBERT's
warmup and decay, without dropout, and must end within 1e-6 of the single-process weights. Taking the trust ratio
over a partition instead changes them by about 1e-2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from helpers.distributed import (
    CONFIGS,
    GLOBAL_BATCH,
    WORKERS,
    assert_ranks_split_the_global_batches,
    job_reference,
    load_saved_weights,
    max_difference,
    pretraining_arguments,
    save_random_pretraining_batches,
    tiny_config,
    torchrun,
)
from helpers.distributed import engine_arguments as fsdp2_job_arguments

from albert_hf.modeling import AlbertForPreTraining

sys.path.insert(0, str(WORKERS))  # the launched worker doubles as the library of the single-process reference
import lamb_engines  # noqa: E402

TOLERANCE = 1e-6
SEQ_LEN = 12

# Parameters whose LAMB treatment differs, each of which must match on its own.
KINDS = {
    "shared layer (3 applications)": lambda name: ".albert_layer_groups.0." in name,
    "word embeddings (tied to the MLM decoder)": lambda name: name == "albert.embeddings.word_embeddings.weight",
    "LayerNorm (no decay, no trust ratio)": lambda name: "LayerNorm" in name,
    "biases (no decay, no trust ratio)": lambda name: name.endswith("bias"),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lamb_distributed")


@pytest.fixture(scope="module")
def checkpoint(workdir) -> Path:
    torch.manual_seed(0)
    path = workdir / "checkpoint"
    AlbertForPreTraining(tiny_config()).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def pretraining_job_checkpoint(workdir) -> Path:
    """A tiny AlbertForPreTraining sized to the real 30k tokenizer; the job loads it with from_pretrained."""
    torch.manual_seed(0)
    path = workdir / "job_checkpoint"
    AlbertForPreTraining(tiny_config(vocab_size=30000)).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def batches(workdir) -> Path:
    """STEPS global batches of padded rows with a varying number of masked tokens and sentence-order labels."""
    rows = lamb_engines.GLOBAL_BATCH * lamb_engines.STEPS
    return save_random_pretraining_batches(workdir / "batches.pt", rows, SEQ_LEN, seed=2)


def differences_by_kind(weights: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> dict[str, float]:
    return {
        kind: max_difference(
            {name: weights[name] for name in reference if matches(name)},
            {name: tensor for name, tensor in reference.items() if matches(name)},
        )
        for kind, matches in KINDS.items()
    }


@pytest.mark.distributed
@pytest.mark.needs("deepspeed")  # one launch runs every engine, the ZeRO stages among them
def test_lamb_engines_match_one_process(workdir, checkpoint, batches, record_property):
    output_dir = workdir / "engines"
    output_dir.mkdir()
    engines = lamb_engines.ENGINES
    torchrun(
        WORKERS / "lamb_engines.py",
        "--checkpoint",
        str(checkpoint),
        "--batches",
        str(batches),
        "--output_dir",
        str(output_dir),
        "--engines",
        ",".join(engines),
        timeout=900,
    )

    reference = lamb_engines.reference_training(str(checkpoint), torch.load(batches))
    initial = {name: p.detach() for name, p in AlbertForPreTraining.from_pretrained(checkpoint).named_parameters()}
    moved = differences_by_kind(reference, initial)
    assert min(moved.values()) > 100 * TOLERANCE, moved  # every kind of parameter trained, far beyond the tolerance

    results = {engine: torch.load(output_dir / f"{engine}.pt") for engine in engines}
    differences = {engine: max_difference(weights, reference) for engine, weights in results.items()}
    record_property("max_abs_difference", differences)
    for engine, weights in results.items():
        assert weights.keys() == reference.keys(), engine
        by_kind = differences_by_kind(weights, reference)
        assert max(by_kind.values()) < TOLERANCE, (engine, by_kind)
        assert max_difference(weights, results["ddp"]) < TOLERANCE, engine
    assert max(differences.values()) < TOLERANCE, differences

    # The partitioning engines held a share of LAMB's moments, DDP all of them; ZeRO-1/2 hands LAMB one partition
    # per parameter group (2), ZeRO-3 with small sub-groups several.
    records = {
        engine: [json.loads((output_dir / f"{engine}.rank{rank}.json").read_text()) for rank in (0, 1)]
        for engine in engines
    }
    partitions = {engine: records[engine][0]["zero_partitions"] for engine in engines}
    assert partitions["zero1"] == partitions["zero2"] == partitions["zero3_persistent"] == 2, partitions
    assert partitions["zero3"] > 2, partitions
    held = {engine: [record["lamb_state_bytes"] for record in records[engine]] for engine in engines}
    full = 2 * 4 * sum(tensor.numel() for tensor in reference.values())
    assert held["ddp"] == held["zero0"] == [full, full]
    for engine in engines:
        if engine not in ("ddp", "zero0"):
            assert sum(held[engine]) >= full and max(held[engine]) < 0.6 * full, (engine, held[engine])


# --------------------------------------------------------------------------------------------------------------------
# The real pretraining job (`albert-hf pretrain --optimizer lamb`) under Trainer: DDP, ZeRO-2/3, ZeRO-3 offload, FSDP2
# --------------------------------------------------------------------------------------------------------------------

JOB_ENGINES = ("ddp", "zero2", "zero3", "zero3_offload", "fsdp2")  # fsdp2 last (see run_tasks.py)
JOB_STEPS = 4


def with_options(argv: list[str], **options: str) -> list[str]:
    """`argv` with each `--name value` of `options` replaced, or appended when absent."""
    argv = list(argv)
    for name, value in options.items():
        flag = f"--{name}"
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    return argv


def lamb_job_arguments(corpus: Path, spiece_model: Path, checkpoint: Path, output_dir: str, batch: int) -> list[str]:
    """The pretraining job of tests/test_distributed.py with ALBERT's optimizer and schedule: LAMB, warmup then
    linear decay, weight decay 0.01, 4 steps of --global_batch_size 8 (accumulation 2 at 2 rows on 2 processes)."""
    argv = pretraining_arguments(corpus, spiece_model, checkpoint, Path(output_dir), batch)
    return with_options(
        argv,
        optimizer="lamb",
        lr_schedule="albert",
        learning_rate="0.01",
        warmup_steps="1",
        weight_decay="0.01",
        max_steps=str(JOB_STEPS),
    )


def write_engine_arguments(folder: Path) -> Path:
    """Each engine's job arguments: the shipped ds_zero2/ds_zero3/ds_zero3_offload.json (ZeRO-3 with persistence
    threshold 0), and for fsdp2 the `fsdp_config` of fsdp2.yaml as the resume tests pass it."""
    folder.mkdir()
    for engine in JOB_ENGINES:
        arguments = []
        if engine.startswith("zero"):
            config = json.loads((CONFIGS / f"ds_{engine}.json").read_text())
            if "zero3" in engine:
                config["zero_optimization"]["stage3_param_persistence_threshold"] = 0
            (folder / f"ds_{engine}.json").write_text(json.dumps(config))
            arguments = ["--deepspeed", str(folder / f"ds_{engine}.json")]
        elif engine == "fsdp2":
            (folder / "fsdp").mkdir()
            arguments = fsdp2_job_arguments(engine, folder / "fsdp")
        (folder / f"{engine}.json").write_text(json.dumps(arguments))
    return folder


@pytest.mark.distributed
@pytest.mark.needs("deepspeed")  # one launch runs every engine, the ZeRO stages among them
def test_pretraining_job_with_lamb_matches_one_process(
    workdir, wikitext_articles, spiece_model, pretraining_job_checkpoint, record_property
):
    corpus = wikitext_articles(4)  # well over 4 steps x 8 distinct instances of 64 tokens
    reference_dir = workdir / "job_single"
    reference = job_reference(
        "albert_hf.scripts.pretrain",
        lamb_job_arguments(corpus, spiece_model, pretraining_job_checkpoint, str(reference_dir), GLOBAL_BATCH),
        AlbertForPreTraining,
        pretraining_job_checkpoint,
        reference_dir,
        min_change=100 * TOLERANCE,
    )
    assert len(reference["rows_per_step"]) == JOB_STEPS

    record = workdir / "job_record"
    arguments = lamb_job_arguments(
        corpus, spiece_model, pretraining_job_checkpoint, str(workdir / "job_{engine}"), GLOBAL_BATCH // 4
    )
    torchrun(
        WORKERS / "run_tasks.py",
        "albert_hf.scripts.pretrain",
        str(record),
        "--engines",
        ",".join(JOB_ENGINES),
        "--engine_arguments",
        str(write_engine_arguments(workdir / "engine_arguments")),
        "--",
        *arguments,
        timeout=900,
    )

    differences = {}
    for engine in JOB_ENGINES:
        records = [json.loads(Path(f"{record}.{engine}.rank{rank}.json").read_text()) for rank in (0, 1)]
        # Two micro-batches of 2 rows per process and step: together the reference's 8 rows.
        steps = [
            [rows + more for rows, more in zip(r["rows_per_step"][::2], r["rows_per_step"][1::2])] for r in records
        ]
        assert_ranks_split_the_global_batches(
            [{**r, "rows_per_step": s} for r, s in zip(records, steps)], reference["rows_per_step"]
        )
        assert all(r["partitioned_after_from_pretrained"] == engine.startswith("zero3") for r in records), engine
        assert all(r["dtensor_parameters"] == (engine == "fsdp2") for r in records), engine  # FSDP2 did shard
        weights = load_saved_weights(AlbertForPreTraining, workdir / f"job_{engine}")
        differences[engine] = max_difference(weights, reference["weights"])
    record_property("max_abs_difference", differences)
    assert max(differences.values()) < TOLERANCE, differences


# --------------------------------------------------------------------------------------------------------------------
# Engines under which the pretraining job refuses LAMB, before any work
# --------------------------------------------------------------------------------------------------------------------

ZERO2 = {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto"}


@pytest.mark.parametrize(
    "engine_arguments, message",
    [
        ({**ZERO2, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}, r"its own optimizer \(AdamW\)"),
        ({**ZERO2, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}, "DeepSpeedCPUAdam"),
        ({**ZERO2, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}}, "NVMe"),
        ({**ZERO2, "zero_optimization": {"stage": 0}, "bf16": {"enabled": True}}, "stage 0 with bf16"),
        ({**ZERO2, "zero_optimization": {"stage": 3, "mics_shard_size": 2}}, "MiCS"),
        (["--fsdp", "full_shard", "--fsdp_config", '{"version": 1}'], "FSDP version 1"),
    ],
)
def test_pretraining_refuses_lamb_where_it_would_not_run(engine_arguments, message, tmp_path, monkeypatch):
    from albert_hf.scripts import pretrain as pretraining

    for name in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP", "FSDP_CPU_RAM_EFFICIENT_LOADING"):
        monkeypatch.delenv(name, raising=False)  # TrainingArguments sets them; restored after the test
    if isinstance(engine_arguments, dict):
        config = tmp_path / "ds.json"
        config.write_text(json.dumps(engine_arguments))
        engine_arguments = ["--deepspeed", str(config)]
    argv = ["--train_files", str(tmp_path / "missing.txt"), "--tokenizer_name_or_path", str(tmp_path / "missing")]
    argv += ["--output_dir", str(tmp_path / "out"), "--use_cpu", "--report_to", "none", *engine_arguments]
    # The data and tokenizer do not exist: the refusal comes first, and names what works.
    with pytest.raises(ValueError, match=message) as refusal:
        pretraining.main(argv)
    assert "FSDP2" in str(refusal.value) and "ds_zero3_offload.json" in str(refusal.value)
    with pytest.raises(OSError):  # the same job with AdamW goes on to read its data
        pretraining.main([*argv, "--optimizer", "adamw"])


@pytest.mark.parametrize("name", ["ds_zero2.json", "ds_zero3.json", "ds_zero3_offload.json"])
def test_shipped_deepspeed_configs_run_lamb(name):
    from types import SimpleNamespace

    from albert_hf.distributed import lamb_engine_problem

    config = json.loads((CONFIGS / name).read_text())
    arguments = SimpleNamespace(deepspeed=config, hf_deepspeed_config=None, deepspeed_plugin=None, fsdp=None)
    assert lamb_engine_problem(arguments) is None


@pytest.mark.needs("deepspeed")
def test_deepspeed_still_has_what_lamb_reads_of_its_partitions():
    """lamb_deepspeed.py reads private attributes of DeepSpeed's ZeRO optimizers; a DeepSpeed release that renames
    one fails here by name, before any launch (the 2-process tests above check what the attributes hold)."""
    import dataclasses
    import inspect

    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer
    from deepspeed.utils import mixed_precision_linkage
    from deepspeed.utils.tensor_fragment import tensor_fragment

    from albert_hf.training import lamb_deepspeed

    for cls, names in [
        (DeepSpeedZeroOptimizer, lamb_deepspeed.STAGE_1_AND_2_ATTRIBUTES),
        (DeepSpeedZeroOptimizer_Stage3, lamb_deepspeed.STAGE_3_ATTRIBUTES),
    ]:
        source = inspect.getsource(cls)
        missing = [name for name in names if f"self.{name} = " not in source]
        assert not missing, f"DeepSpeed's {cls.__name__} no longer assigns {missing}: update lamb_deepspeed.py"
    assert callable(DeepSpeedZeroOptimizer_Stage3.get_param_id)
    assert "lp_param._hp_mapping = " in inspect.getsource(mixed_precision_linkage), "parameters lost _hp_mapping"
    assert "hp_fragment" in {field.name for field in dataclasses.fields(tensor_fragment)}
