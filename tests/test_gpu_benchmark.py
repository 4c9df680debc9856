"""benchmarks/gpu.py, so that its first run on a GPU is not the first run of its code.

The smoke run executes every section end to end on CPU at tiny sizes (the learning section on the repository's data
excerpts), as a subprocess exactly as it is started on a GPU machine. The GPU-only paths get the furthest CPU check
there is: the timing helper runs the code that reads CUDA events on a host-clock stand-in, torch.compile runs Dynamo
and AOTAutograd (aot_eager), and the ZeRO-3 launch runs on gloo. The error path, the time budget and the learning
section's arithmetic are checked in-process.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import processes

REPO_ROOT = Path(__file__).resolve().parents[1]
GPU_SCRIPT = REPO_ROOT / "benchmarks" / "gpu.py"
sys.path.insert(0, str(GPU_SCRIPT.parent))  # the benchmark scripts import their siblings (common, pretrain_finetune)
import gpu  # noqa: E402

ALL_SECTIONS = list(gpu.SECTIONS)
SPIECE = REPO_ROOT / "tests" / "fixtures" / "spiece" / "albert-30k-clean.model"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One `gpu.py --smoke` run: (exit status, stdout + stderr, the JSON, the table file)."""
    out = tmp_path_factory.mktemp("gpu_smoke") / "gpu.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    started = time.perf_counter()
    result = processes.run(
        [sys.executable, str(GPU_SCRIPT), "--smoke", "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    print(f"gpu.py --smoke: {time.perf_counter() - started:.1f} s")
    results = json.loads(out.read_text()) if out.is_file() else None
    table = out.with_suffix(".txt").read_text() if out.with_suffix(".txt").is_file() else None
    return result.returncode, result.stdout + result.stderr, results, table


@pytest.mark.slow  # the benchmark's every section in a subprocess (ZeRO-3 on gloo, learning, recipes): about a minute
@pytest.mark.needs("deepspeed")  # the smoke runs the ZeRO-3 section on gloo
def test_smoke_runs_every_section_end_to_end(smoke_run):
    returncode, output, results, table = smoke_run
    assert returncode == 0, output[-6000:]
    statuses = {name: section["status"] for name, section in results["sections"].items()}
    assert statuses == {name: "ok" for name in ALL_SECTIONS}, {
        name: results["sections"][name].get("error") or results["sections"][name].get("reason") for name in statuses
    }
    # The plan comes first: every section with its expected seconds.
    plan = output[: output.index("[gpu.py] section matmul ...")]
    for name in ALL_SECTIONS:
        assert f"[gpu.py]   {name} " in plan
    assert "[gpu.py]   total " in plan
    for name in ALL_SECTIONS:
        assert f"\n{name} " in table, f"no row of {name} in the table"
    assert "SMOKE" in table and results["meta"]["smoke"] is True


@pytest.mark.slow  # the benchmark's every section in a subprocess (ZeRO-3 on gloo, learning, recipes): about a minute
@pytest.mark.needs("deepspeed")  # the smoke runs the ZeRO-3 section on gloo
def test_smoke_sections_measure_what_they_claim(smoke_run):
    _, _, results, _ = smoke_run
    sections = {name: section["data"] for name, section in results["sections"].items()}
    cases = sections["throughput"]["cases"]
    assert all(case["fp32_check"]["passed"] for case in cases)
    assert all(rate > 0 for case in cases for rate in case["tokens_per_s"].values())
    # flash_attn is not a dependency: its rows are skipped with the reason, the sdpa rows measured.
    assert sections["throughput"]["flash_attention_2"] in ("measured", "flash_attn is not installed")
    assert sections["bf16"]["layernorm_and_loss_fp32"] and sections["bf16"]["autocast_active"]
    assert sections["memory"]["grad_max_diff_checkpointing"] < 1e-6
    assert sections["compile"]["backend"] == "aot_eager"
    assert sections["compile"]["bf16_output_max_diff"] < 1e-2
    zero3 = sections["zero3"]
    assert zero3["passed"] and zero3["backend"] == "gloo" and zero3["partitioned_after_from_pretrained"]


@pytest.mark.slow  # the benchmark's every section in a subprocess (ZeRO-3 on gloo, learning, recipes): about a minute
@pytest.mark.needs("deepspeed")  # the smoke runs the ZeRO-3 section on gloo
def test_smoke_learning_section_pretrains_and_fine_tunes_both_sides(smoke_run):
    _, _, results, _ = smoke_run
    learning = results["sections"]["learning"]["data"]
    plan, pretraining = learning["plan"], learning["pretraining"]
    # The plan was made from section 2's measured step, not from an assumption.
    assert plan["rate_source"].startswith("section 2")
    assert plan["steps"] >= 1 and 1 <= plan["epochs"] <= gpu.MAX_EPOCHS and plan["model"] in gpu.SMOKE_LADDER
    assert pretraining["steps"] >= 1 and pretraining["held_out_instances"] > 0
    for key in ("held_out_mlm_accuracy", "held_out_sop_accuracy"):
        assert 0.0 <= pretraining[key] <= 1.0
    assert 0.0 < pretraining["held_out_mlm_frequency_baseline"] < 1.0
    assert 0.5 <= pretraining["held_out_sop_majority_baseline"] <= 1.0
    runs = {(run["task"], run["init"]) for run in learning["finetuning"]}
    assert runs == {(task, init) for task in gpu.LEARNING_TASKS for init in ("pretrained", "random")}
    assert [row["task"] for row in learning["table"]] == list(gpu.LEARNING_TASKS)
    assert set(learning["targets"]) == {"sst2_ahead_by_10_points", "ahead_on_every_task"}


def test_a_failing_section_is_recorded_and_the_run_goes_on_within_its_budget(tmp_path, capsys):
    """matmul made to fail, bf16 runs after it, zero3 (15 s expected in smoke mode) does not fit a 10 s budget."""
    out = tmp_path / "gpu.json"
    argv = ["--smoke", "--sections", "matmul,bf16,zero3", "--fail", "matmul", "--budget-s", "10", "--json", str(out)]
    assert gpu.main(argv) == 1
    sections = json.loads(out.read_text())["sections"]
    assert sections["matmul"]["status"] == "error" and "failed on purpose" in sections["matmul"]["error"]
    assert sections["bf16"]["status"] == "ok"
    assert sections["zero3"]["status"] == "skipped" and sections["zero3"]["reason"].startswith("time budget")
    table = out.with_suffix(".txt").read_text()
    assert "ERROR" in table and "SKIPPED" in table and "bf16 vs fp32" in table
    assert "[gpu.py]   zero3 " in capsys.readouterr().out


def test_unknown_sections_are_refused():
    with pytest.raises(SystemExit):
        gpu.parse_arguments(["--fail", "matmull"])


def test_timing_reads_the_events_it_would_read_on_a_gpu():
    ctx = gpu.Context(device=torch.device("cpu"), smoke=True, steps=1, warmup=0)
    assert isinstance(gpu.timing_event(ctx), gpu.WallClockEvent)
    seconds = gpu.timed(lambda: time.sleep(0.05), ctx)
    assert 0.05 <= seconds < 1.0


def plan(flops_per_s: float, seconds: float = 150, unique_tokens: int = 2_500_000) -> gpu.PretrainingPlan:
    return gpu.plan_pretraining(flops_per_s, seconds, unique_tokens, gpu.LEARNING_LADDER)


def test_plan_spends_the_budget_on_the_nearest_model_of_the_ladder():
    chosen = plan(138e12)
    assert chosen.budget_flops == pytest.approx(138e12 * 150)
    # C = 6 N D within one step of the model chosen.
    assert chosen.tokens <= chosen.budget_flops / (6 * chosen.compute_parameters) < chosen.tokens + 256 * 128
    assert chosen.steps == chosen.tokens // (256 * 128)
    distance = abs(math.log(chosen.compute_parameters / chosen.target_parameters))
    for overrides in gpu.LEARNING_LADDER.values():
        other = gpu.plan_pretraining(138e12, 150, 2_500_000, {"other": overrides})
        assert distance <= abs(math.log(other.compute_parameters / chosen.target_parameters)) + 1e-12


def test_plan_follows_chinchilla_until_the_text_runs_out():
    plenty = plan(5e12, unique_tokens=10**9)  # text to spare: D = 20 N
    assert plenty.target_parameters * 20 == pytest.approx(plenty.chinchilla_tokens)
    assert plenty.chinchilla_tokens < plenty.max_tokens and plenty.epochs == 1
    scarce = plan(138e12, unique_tokens=2_500_000)  # the shared corpora: 40 passes cap the tokens
    assert scarce.max_tokens < scarce.chinchilla_tokens
    assert scarce.target_parameters == pytest.approx(scarce.budget_flops / (6 * scarce.max_tokens))
    assert scarce.epochs == math.ceil(scarce.tokens / 2_500_000) <= gpu.MAX_EPOCHS
    assert plan(1e12).compute_parameters < scarce.compute_parameters  # less compute, smaller model


def test_a_missing_deepspeed_op_is_told_from_a_failure():
    built = "RuntimeError: ... exited 1:\n[rank0]: deepspeed.ops.op_builder.builder.MissingCUDAException: CUDA_HOME does not exist"
    assert "MissingCUDAException" in gpu.missing_deepspeed_op(built)
    assert gpu.missing_deepspeed_op("AssertionError: weights differ by 0.3") is None


@pytest.mark.parametrize(("seconds_left", "reason"), [(100, "time budget"), (200, "its full size needs a GPU")])
def test_the_learning_section_starts_when_its_shortest_form_fits(seconds_left, reason):
    """At full size the learning section expects 300 s but shrinks its pretraining: 180 s left are enough to start
    (on this CPU it then says it needs a GPU), 100 s are not."""
    ctx = gpu.Context(device=torch.device("cpu"), smoke=False, steps=1, warmup=0)
    ctx.deadline = time.perf_counter() + seconds_left
    result = gpu.run_sections(["learning"], ctx, save=lambda results: None)["learning"]
    assert result["status"] == "skipped" and result["reason"].startswith(reason)


def test_a_section_that_failed_in_part_keeps_what_it_measured(monkeypatch):
    def half_done(ctx):
        return dict(data={"measured": 1}, rows=[gpu.row("case", notes="kept")], errors=["fine-tuning conll: boom"])

    monkeypatch.setitem(gpu.SECTIONS, "learning", gpu.Section(half_done, 1, 1, "a part fails"))
    ctx = gpu.Context(device=torch.device("cpu"), smoke=True, steps=1, warmup=0)
    result = gpu.run_section("learning", ctx)
    assert result["status"] == "error" and "boom" in result["error"]
    assert result["data"] == {"measured": 1} and result["rows"][0]["notes"] == "kept"


def test_one_fine_tuning_failing_leaves_the_others(monkeypatch, tmp_path):
    import pretrain_finetune

    def run_finetuning(task, checkpoint, seed, run_dir, args):
        if task == "conll":
            raise ValueError("no such file")
        return {"metric": 0.5, "eval": {}, "seconds": 0.0}

    monkeypatch.setattr(pretrain_finetune, "run_finetuning", run_finetuning)
    args = type("Args", (), {"tasks": ["sst2", "conll"]})()
    runs = gpu.finetune_both(args, tmp_path / "pretrained", tmp_path / "random", tmp_path)
    assert [run.get("metric") for run in runs] == [0.5, 0.5, None, None]
    assert all("ValueError: no such file" in run["error"] for run in runs[2:])


@pytest.mark.slow  # the benchmark's every section in a subprocess (ZeRO-3 on gloo, learning, recipes): about a minute
@pytest.mark.needs("deepspeed")  # the smoke runs the ZeRO-3 section on gloo
def test_smoke_recipes_section_trains_both_for_the_same_seconds_and_scores_them_alike(smoke_run):
    _, _, results, _ = smoke_run
    data = results["sections"]["recipes"]["data"]
    assert set(data["runs"]) == {"reference", "albert_hf"}
    for name, run in data["runs"].items():
        # Equal time: each recipe's steps are the budget at its own measured rate.
        assert run["steps"] == max(2, round(data["setting"]["budget_s"] * data["rates"][name]["median"]))
        for masks in ("token_level", "whole_word"):  # the same held-out targets for both
            assert run[masks]["targets"] == data["baselines"][masks]["targets"] > 0
            assert math.isfinite(run[masks]["loss"]) and 0.0 <= run[masks]["accuracy"] <= 1.0
    assert data["reference_learning_rate"] in [run["learning_rate"] for run in data["sweep"]]


def test_the_shared_evaluation_reads_either_library_s_logits_alike():
    """Identical weights in transformers' AlbertForMaskedLM and albert_hf's give the same held-out figures, on masks
    that are the same tensors at every call."""
    import mlm_recipes
    from common import paired

    from albert_hf.tokenization import AlbertHFTokenizer

    tokenizer = AlbertHFTokenizer(vocab_file=str(SPIECE))
    texts = ["The cat sat on the mat.", "It was a bright cold day in April, and the clocks were striking thirteen."]
    sequences = [tokenizer(text)["input_ids"] for text in texts * 4]
    masks = mlm_recipes.token_level_masks(sequences, tokenizer)
    assert torch.equal(masks["labels"], mlm_recipes.token_level_masks(sequences, tokenizer)["labels"])
    words = mlm_recipes.whole_word_masks(sequences, tokenizer)
    assert torch.equal(words["input_ids"], mlm_recipes.whole_word_masks(sequences, tokenizer)["input_ids"])
    shape = dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    reference, ours = paired("AlbertForMaskedLM", dict(shape, intermediate_size=64))
    for batch in (masks, words):
        expected, got = mlm_recipes.mlm_figures(reference, batch), mlm_recipes.mlm_figures(ours, batch)
        assert got["targets"] == expected["targets"] > 0 and got["accuracy"] == expected["accuracy"]
        assert got["loss"] == pytest.approx(expected["loss"], rel=1e-5)


def test_run_mlm_blocks_and_held_out_sequences_fit_the_length():
    import mlm_recipes
    from datasets import Dataset

    from albert_hf.tokenization import AlbertHFTokenizer

    tokenizer = AlbertHFTokenizer(vocab_file=str(SPIECE))
    documents = Dataset.from_dict({"sentences": [["One short sentence.", "Another one follows it."] * 6] * 3})
    blocks = mlm_recipes.run_mlm_blocks(documents, tokenizer, 16)["input_ids"]
    assert blocks and all(len(block) == 16 for block in blocks)
    assert blocks[0][0] == tokenizer.cls_token_id  # each sentence keeps its special tokens, as run_mlm tokenizes
    sequences = mlm_recipes.packed_sequences(documents, tokenizer, 16)
    assert all(len(s) <= 16 and s[0] == tokenizer.cls_token_id and s[-1] == tokenizer.sep_token_id for s in sequences)
