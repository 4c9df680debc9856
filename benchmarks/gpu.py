"""GPU benchmark and checks: albert_hf against transformers' ALBERT on one GPU, and pretraining that pays off
downstream, in one unattended run of under 9 minutes.

On a machine with one CUDA GPU, from the repository root after `pip install -e .[test]`, with torch built for CUDA
and ../shared/data beside the repository (or $ALBERT_HF_SHARED_DATA):

    python benchmarks/gpu.py                   # about 8 minutes (H200 estimate); table on stdout and in
                                               # benchmarks/gpu_results.txt, JSON in benchmarks/gpu_results.json
    python benchmarks/gpu.py --sections throughput,learning    # a subset, e.g. to rerun what failed
    python benchmarks/gpu.py --sections recipes  # albert-hf pretrain against run_mlm's recipe (about 5 minutes)
    OMP_NUM_THREADS=1 python benchmarks/gpu.py --smoke         # every section at tiny sizes on CPU (tests/fixtures)

Keeping a log next to the JSON:

    set -o pipefail; PYTHONUNBUFFERED=1 python benchmarks/gpu.py --json runs/gpu.json 2>&1 | tee runs/gpu_log.txt

The run prints its plan first: the sections and the seconds each is expected to take. A section starts only if its
estimate fits what is left of `--budget-s` (510 s by default: the estimates below sum to 455 s, start-up takes
about 20 s); the learning section shrinks its pretraining to what is left and needs 180 s at least. So a run under a
time limit still ends with its table; what was skipped can be rerun with --sections.
Each section runs in its own try/except: an error is recorded in the table and the JSON and the run goes on; the JSON
and table are rewritten after every section, and the exit status is 1 if any section failed. A section that needs
something absent (flash_attn, DeepSpeed, NCCL, the data folder) says so and is skipped. `--fail SECTION` makes a
section raise at once, to check that path.

Sections, in running order, with their H200 estimates (not yet measured on one):

  1. matmul (5 s)  measured bf16 and fp32 (TF32 off) matmul TFLOP/s of the chip (8192^3, CUDA events, median); the
               bf16 rate is the peak MFU is measured against.
  2. throughput (40 s)  AlbertForPreTraining training step (AdamW, bf16 autocast, sdpa), base 256x128 / 64x512 and
               xxlarge 32x128 / 8x512, transformers and albert_hf with identical weights (fp32 outputs checked to 1e-4
               with TF32 off first), albert_hf with `masked_positions_only=True`, and both under flash_attention_2
               when `flash_attn` imports. Tokens/s and MFU (FLOPs: 3 x (encoder_flops_per_token + MLM head) per
               token). Medians of 6 timed steps after 2 warm-up steps (not 10 after 3: with the learning section
               the whole run must fit 9 minutes).
  3. learning (300 s)  pretraining pays off downstream. Data prepared on the CPU before the clock starts: the shared
               corpora (Gutenberg, WikiText-2 less 5 held-out articles, Botchan) and the unlabeled training text of
               SST-2, MRPC and CoNLL-2003, tokenized with the real ALBERT 30k vocabulary, cut into SOP instances of
               128 tokens, one fresh cut per planned pass. Then 150 s of pretraining (MLM with n-gram masking +
               SOP, LAMB, bf16 autocast, sdpa; benchmarks/pretrain_finetune.py's `pretrain_model`), the held-out MLM
               and SOP accuracy beside their baselines (most frequent token, majority order), and fine-tuning with the
               real GLUE and NER jobs from the pretrained weights and from the same architecture with random weights,
               the same budget for both: SST-2 on 2,000 labels (600 steps of 32), MRPC on all 3,668 (300 steps),
               CoNLL-2003 on 2,000 sentences (600 steps), lr 1e-4, one seed. Targets: the pretrained model ahead by
               at least 10 points of SST-2 dev accuracy, and ahead on every task.
  4. bf16 (5 s)  30 LAMB pretraining steps of a small model in fp32 and in bf16 autocast from the same weights: final
               losses, max |difference| of the loss curves, and the dtypes of LayerNorm outputs and losses under
               autocast (albert_hf keeps both fp32).
  5. memory (10 s)  peak torch.cuda.max_memory_allocated of an AlbertModel training step, base 16x512 fp32:
               transformers, albert_hf, albert_hf with gradient checkpointing; gradients with and without
               checkpointing compared.
  6. compile (50 s)  albert_hf base forward+backward 32x128 bf16, eager against torch.compile (inductor); compile time
               separately. The CPU smoke run compiles with aot_eager (graph capture and the joint backward graph,
               without inductor's C++ code generation, about 50 s cold on two cores).
  7. zero3 (45 s)  tests/distributed/trainer_parity.py's training under DeepSpeed ZeRO-3 on NCCL with one GPU (torchrun,
               1 process), beside its one-process CPU reference: zero.Init partitioning, consolidated save, weights
               against the reference. The CPU smoke run launches the same on gloo.
  8. recipes (300 s)  `albert-hf pretrain`'s recipe against transformers' run_mlm recipe at equal time
               (benchmarks/mlm_recipes.py's `GPU_SETTING`): the laptop recipe's model (6 layers of width 256 sharing
               one group), batch 128 x 128, the ALBERT 30k vocabulary, the shared corpora; steps/s of both measured
               in alternating windows; the reference's AdamW rate chosen from 3e-4, 1e-3, 3e-3 by 45 s runs beside
               45 s of albert_hf (LAMB 2e-3), each at its own measured rate, both scored on the same
               held-out token-level and whole-word masks beside the frequency baseline. Not inside the default
               budget (a full run records it as skipped for time): run it alone, `--sections recipes` (about 5
               minutes with start-up).

How section 3 sizes its model (`plan_pretraining`, at run time, from what section 2 measured):

    R = section 2's albert_hf masked-only FLOP/s on base 256x128 (its tokens/s x FLOPs per token) x 0.5, the
        assumed efficiency of a narrower model (smaller matmuls, more per-op overhead) relative to base
    C = R x 150 s                                              the pretraining FLOPs
    N(model) = training FLOPs per token / 6                    "compute parameters": layer applications, attention
                                                               and the masked-only MLM head counted, so C = 6 N D
    D = min(sqrt(20 C / 6), 40 x U)                            Chinchilla's 20 tokens per parameter, capped at 40
                                                               passes over the U tokens of the text (repeated text
                                                               teaches little beyond that, Muennighoff et al. 2023)
    N = C / (6 D); the ladder's model nearest N in log (12 applications of one shared layer, E 128, H 256/384/512/768,
        heads of 64, FFN 4H); steps = C / (6 N(model) x 256 x 128); passes = ceil(steps x 256 x 128 / U), max 40

On an H200, assuming 790 TFLOP/s of bf16 dense matmul and an MFU of 35% for the eager base step (section 2 measures
both): R = 790 x 0.35 x 0.5 = 138 TFLOP/s, C = 2.1e16 FLOPs (about a quarter of ELECTRA-Small at 6.25% of its
training, 9e16). U = 2.51M tokens (the corpus and the tasks' text: 22,383 instances per pass), so 40 x U = 100M caps
Chinchilla's 263M: D = 100M, N = 34M, and H512 is nearest (40.0M compute parameters; H384 23.0M, H768 88.0M): 2,638
steps of 256 x 128 = 86M tokens, 35 passes, about 57 ms a step. The time budget, not the step count, ends
pretraining (the learning rate decays linearly in elapsed time), so a faster or slower chip trains more or fewer
steps of the same plan. Without section 2 the plan uses the measured (or assumed) peak x 0.35 x 0.5.

Ratios are reference_time / ours_time (> 1: albert_hf, or the variant named in the case, is faster).
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path

import torch
from common import (
    DEFAULT_DATA,
    REPO,
    config_kwargs,
    encoder_flops_per_token,
    masked_batch,
    max_diff,
    mlm_head_flops,
    paired,
    pretraining_flops_per_token,
)

import albert_hf
from albert_hf import AlbertConfig
from albert_hf.modeling import AlbertLayerNorm
from albert_hf.training.lamb import Lamb, lamb_parameter_groups

FIXTURES = REPO / "tests" / "fixtures"  # the repository's excerpts of the data folder, same layout
FP32_TOLERANCE = 1e-4
PARITY_TOLERANCE = 1e-5  # as in tests/test_distributed.py
ZERO3_TIMEOUT_S = 120


class Skipped(Exception):
    """A section that cannot run here; the message is the recorded reason."""


@dataclass
class Context:
    device: torch.device
    smoke: bool
    steps: int  # timed steps per measurement
    warmup: int
    data_dir: Path = DEFAULT_DATA
    deadline: float = math.inf  # time.perf_counter() by which the run should be done (--budget-s)
    peak_flops: float | None = None  # measured bf16 matmul FLOP/s (section 1)
    peak_source: str = "not measured"
    pretraining_rate: dict | None = None  # section 2's measured pretraining step (FLOP/s, tokens/s), for section 3
    fail: frozenset[str] = frozenset()  # sections made to raise at once (--fail), to check the error path
    meta: dict = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def config(self, size: str) -> AlbertConfig:
        """A released size, or in smoke mode the tiny config whatever size is asked for."""
        if self.smoke:
            return AlbertConfig(
                vocab_size=1000,
                embedding_size=32,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
                max_position_embeddings=128,
            )
        return AlbertConfig.preset(size)

    def autocast(self, enabled: bool = True):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=enabled)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def seconds_left(self) -> float:
        return self.deadline - time.perf_counter()


# ----------------------------------------------------------------------------------------------------------------------
# Measurement helpers
# ----------------------------------------------------------------------------------------------------------------------


class WallClockEvent:
    """The part of `torch.cuda.Event`'s interface that `timed` uses, on the host clock: so that the CPU runs the very
    code that times the GPU."""

    def __init__(self):
        self.at: float | None = None

    def record(self) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass  # the host clock is read when recorded

    def elapsed_time(self, end: WallClockEvent) -> float:
        """Milliseconds from this event to `end`, as torch.cuda.Event.elapsed_time."""
        return (end.at - self.at) * 1e3


def timing_event(ctx: Context):
    return torch.cuda.Event(enable_timing=True) if ctx.cuda else WallClockEvent()


def timed(fn: Callable, ctx: Context) -> float:
    """Seconds of one call of fn. On CUDA the events are queued around it and waited for, so that the kernels fn
    queues are counted once, whatever the host did meanwhile."""
    start, end = timing_event(ctx), timing_event(ctx)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def interleaved(fns: dict[str, Callable], ctx: Context) -> dict[str, float]:
    """Median seconds per variant, timed round-robin (a, b, c, a, b, c, ...) after a warm-up, as run.py's
    interleaved_medians does for two: clock and thermal drift then hit every variant alike."""
    for _ in range(ctx.warmup):
        for fn in fns.values():
            fn()
    ctx.sync()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(ctx.steps):
        for name, fn in fns.items():
            times[name].append(timed(fn, ctx))
    return {name: statistics.median(values) for name, values in times.items()}


def free_memory(ctx: Context) -> None:
    gc.collect()
    if ctx.cuda:
        torch.cuda.empty_cache()


def to_device(batch: dict, ctx: Context) -> dict:
    return {key: value.to(ctx.device) for key, value in batch.items()}


def mfu(flops: float, seconds: float, ctx: Context) -> float | None:
    return flops / seconds / ctx.peak_flops if ctx.peak_flops else None


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def row(case: str, reference: str = "", ours: str = "", ratio: float | None = None, notes: str = "") -> dict:
    """One line of the final table; `reference` / `ours` are already formatted (raw numbers go into the JSON)."""
    return dict(case=case, reference=reference, ours=ours, ratio=ratio, notes=notes)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


# ----------------------------------------------------------------------------------------------------------------------
# 1. matmul peak
# ----------------------------------------------------------------------------------------------------------------------


def section_matmul(ctx: Context) -> dict:
    size = 256 if ctx.smoke else 8192
    data, rows = {}, []
    for name, dtype in (("bf16", torch.bfloat16), ("fp32 (TF32 off)", torch.float32)):
        a = torch.randn(size, size, device=ctx.device, dtype=dtype)
        b = torch.randn(size, size, device=ctx.device, dtype=dtype)
        inner = 5  # several matmuls per timing: one bf16 8192^3 takes ~1.5 ms, near the event resolution's noise

        def matmuls(a=a, b=b):
            for _ in range(inner):
                torch.mm(a, b)

        seconds = statistics.median([timed(matmuls, ctx) for _ in range(ctx.warmup + ctx.steps)][ctx.warmup :]) / inner
        tflops = 2 * size**3 / seconds / 1e12
        data[name] = dict(size=size, seconds=seconds, tflops=tflops)
        rows.append(row(f"matmul {size}^3 {name}", ours=f"{tflops:.3g} TFLOP/s"))
        del a, b
    ctx.peak_flops, ctx.peak_source = data["bf16"]["tflops"] * 1e12, f"measured bf16 {size}^3 matmul"
    rows[0]["notes"] = "the MFU denominator"
    return dict(data=data, rows=rows)


# ----------------------------------------------------------------------------------------------------------------------
# 2. throughput + MFU of the pretraining step
# ----------------------------------------------------------------------------------------------------------------------


def flash_attention_available() -> str | None:
    """None when flash_attention_2 can run, else why not."""
    if importlib.util.find_spec("flash_attn") is None:
        return "flash_attn is not installed"
    if not torch.cuda.is_available():
        return "flash_attn needs CUDA"
    return None


def with_attention(model, implementation: str):
    """A copy of `model` (same weights) using another attention implementation."""
    clone = copy.deepcopy(model)
    clone.set_attn_implementation(implementation)
    return clone


def fp32_agreement(reference, ours, batch: dict) -> dict:
    """Both models' fp32 outputs on the timed batch (dropout off; TF32 is off for the whole run)."""
    reference.eval(), ours.eval()
    with torch.no_grad():
        ref_out, ours_out = reference(**batch), ours(**batch)
        masked_loss = ours(**batch, masked_positions_only=True).loss
        result = dict(
            logits_max_diff=max_diff(ref_out.prediction_logits, ours_out.prediction_logits),
            loss_diff=abs(ref_out.loss.item() - ours_out.loss.item()),
            masked_only_loss_diff=abs(masked_loss.item() - ours_out.loss.item()),
        )
    reference.train(), ours.train()
    del ref_out, ours_out
    result["passed"] = max(result.values()) <= FP32_TOLERANCE
    return result


def training_step(model, optimizer, batch: dict, ctx: Context, **extra) -> Callable:
    def step():
        with ctx.autocast():
            loss = model(**batch, **extra).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def throughput_plan(ctx: Context) -> list[tuple[str, list[tuple[int, int]]]]:
    """(size, [(batch, seq_len), ...]): batches that fit comfortably on an H200 with both models resident."""
    if ctx.smoke:
        return [("tiny", [(4, 32)])]
    return [("base", [(256, 128), (64, 512)]), ("xxlarge", [(32, 128), (8, 512)])]


def section_throughput(ctx: Context) -> dict:
    flash_missing = flash_attention_available()
    data, rows = [], []
    for size, shapes in throughput_plan(ctx):
        config = ctx.config(size)
        reference, ours = paired("AlbertForPreTraining", config_kwargs(config))
        models = {"transformers": reference.to(ctx.device), "albert_hf": ours.to(ctx.device)}
        if flash_missing is None:
            try:
                models["transformers fa2"] = with_attention(reference, "flash_attention_2")
                models["albert_hf fa2"] = with_attention(ours, "flash_attention_2")
            except Exception as error:  # fa2 refused: keep the sdpa measurements
                flash_missing = f"set_attn_implementation failed: {type(error).__name__}: {error}"
                models.pop("transformers fa2", None)
        optimizers = {name: torch.optim.AdamW(model.parameters(), lr=1e-5) for name, model in models.items()}
        for batch_size, seq_len in shapes:
            batch = to_device(masked_batch(config, batch_size, seq_len), ctx)
            check = fp32_agreement(reference, ours, batch)
            steps = {
                name: training_step(models[name], optimizers[name], batch, ctx)
                for name in ("transformers", "albert_hf")
            }
            steps["albert_hf masked-only"] = training_step(
                ours, optimizers["albert_hf"], batch, ctx, masked_positions_only=True
            )
            seconds = interleaved(steps, ctx)
            if flash_missing is None:  # timed on their own, so a kernel error cannot cost the sdpa figures
                try:
                    seconds |= interleaved(
                        {
                            name: training_step(models[name], optimizers[name], batch, ctx)
                            for name in ("transformers fa2", "albert_hf fa2")
                        },
                        ctx,
                    )
                except Exception as error:
                    flash_missing = f"flash_attention_2 step failed: {type(error).__name__}: {error}"

            tokens = batch_size * seq_len
            masked = int(batch["labels"].ne(-100).sum())
            encoder = tokens * encoder_flops_per_token(config, seq_len)
            flops = {name: 3 * (encoder + tokens * mlm_head_flops(config)) for name in seconds}
            flops["albert_hf masked-only"] = 3 * (encoder + masked * mlm_head_flops(config))  # the work it really does
            case = f"{size} pretrain step {batch_size}x{seq_len} bf16"
            entry = dict(
                size=size,
                batch_size=batch_size,
                seq_len=seq_len,
                masked_tokens=masked,
                fp32_check=check,
                seconds=seconds,
                tokens_per_s={n: tokens / s for n, s in seconds.items()},
                mfu={n: mfu(flops[n], s, ctx) for n, s in seconds.items()},
                flops_per_step=flops,
            )
            data.append(entry)
            if ctx.pretraining_rate is None:  # the first case, base at length 128: what section 3 plans from
                ctx.pretraining_rate = dict(
                    case=case,
                    flops_per_s=flops["albert_hf masked-only"] / seconds["albert_hf masked-only"],
                    tokens_per_s=tokens / seconds["albert_hf masked-only"],
                )
            t_ref = seconds["transformers"]
            check_note = f"fp32 logits diff {check['logits_max_diff']:.1e} {'ok' if check['passed'] else 'FAIL'}"
            for name in ("albert_hf", "albert_hf masked-only"):
                rows.append(
                    row(
                        f"{case} ({name} vs transformers sdpa)",
                        ms(t_ref),
                        ms(seconds[name]),
                        t_ref / seconds[name],
                        f"{tokens / seconds[name] / 1e3:.0f}k tok/s, MFU {percent(entry['mfu'][name])} "
                        f"(ref {percent(entry['mfu']['transformers'])}); {check_note}",
                    )
                )
            if "albert_hf fa2" in seconds:
                t_fa2 = seconds["transformers fa2"]
                rows.append(
                    row(
                        f"{case} (fa2: albert_hf vs transformers)",
                        ms(t_fa2),
                        ms(seconds["albert_hf fa2"]),
                        t_fa2 / seconds["albert_hf fa2"],
                        f"MFU {percent(entry['mfu']['albert_hf fa2'])} "
                        f"(ref {percent(entry['mfu']['transformers fa2'])})",
                    )
                )
            del batch, steps
            free_memory(ctx)
        del reference, ours, models, optimizers
        free_memory(ctx)
    if flash_missing is not None:
        rows.append(row("flash_attention_2 variants", notes=f"skipped: {flash_missing}"))
    return dict(data=dict(cases=data, flash_attention_2=flash_missing or "measured"), rows=rows)


# ----------------------------------------------------------------------------------------------------------------------
# 3. learning: pretraining pays off downstream
# ----------------------------------------------------------------------------------------------------------------------

# The model sizes section 3 chooses from: 12 applications of one shared layer (ALBERT's depth), E = 128, heads of
# 64, FFN 4H; in smoke mode two tiny ones.
LEARNING_LADDER = {
    f"H{hidden}": f"hidden_size={hidden},num_attention_heads={hidden // 64},intermediate_size={4 * hidden},"
    "num_hidden_layers=12"
    for hidden in (256, 384, 512, 768)
}
SMOKE_LADDER = {
    f"H{hidden}": f"embedding_size=32,hidden_size={hidden},num_attention_heads=2,intermediate_size={4 * hidden},"
    "num_hidden_layers=2"
    for hidden in (32, 64)
}
ASSUMED_PEAK_FLOPS = 790e12  # bf16 dense matmul of an H200, assumed when section 1 did not measure it
ASSUMED_MFU = 0.35  # of an eager ALBERT-base bf16 pretraining step, assumed when section 2 did not measure it
SMALL_MODEL_EFFICIENCY = 0.5  # the planned model's FLOP/s over base's: narrower matmuls, more per-op overhead
TOKENS_PER_PARAMETER = 20  # Chinchilla (Hoffmann et al. 2022): compute-optimal training tokens per parameter
MAX_EPOCHS = 40  # repeated text is worth little beyond ~40 passes (Muennighoff et al. 2023)
LEARNING_SEQ_LEN = 128
LEARNING_BATCH = 256  # sequences per pretraining step
LEARNING_LR = 2e-3  # LAMB peak
WARMUP_FRACTION = 0.05
PRETRAIN_SECONDS = 150.0
FINETUNE_RESERVE_S = 120.0  # six fine-tuning runs and the evaluations after pretraining (H200 estimate)
LEARNING_TASKS = ("sst2", "mrpc", "conll")
LABEL_BUDGET = {"sst2": 2000, "conll": 2000}  # training examples per task for both sides; MRPC keeps all 3,668
FINETUNE_LR = 1e-4


@dataclass
class PretrainingPlan:
    """The pretraining run chosen by `plan_pretraining`, with the figures it was chosen from."""

    flops_per_s: float
    rate_source: str
    seconds: float
    budget_flops: float
    unique_tokens: int  # tokens of one pass over the pretraining text
    chinchilla_tokens: float
    max_tokens: float  # MAX_EPOCHS passes
    target_parameters: float
    model: str
    model_overrides: str
    compute_parameters: float  # training FLOPs per token / 6 of the chosen model
    tokens: float
    steps: int
    epochs: int
    batch_size: int
    seq_len: int

    def describe(self) -> str:
        return (
            f"{self.model} ({count(self.compute_parameters)} compute parameters), {self.steps} steps of "
            f"{self.batch_size}x{self.seq_len} = {count(self.tokens)} tokens, {self.epochs} passes over "
            f"{count(self.unique_tokens)}; budget {self.budget_flops:.2g} FLOPs = {self.flops_per_s / 1e12:.3g} "
            f"TFLOP/s x {self.seconds:.0f} s"
        )


def count(value: float) -> str:
    """12.3k, 4.56M, 7.89G."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def plan_pretraining(
    flops_per_s: float,
    seconds: float,
    unique_tokens: int,
    ladder: dict[str, str],
    rate_source: str = "given",
    batch_size: int = LEARNING_BATCH,
    seq_len: int = LEARNING_SEQ_LEN,
    masked_fraction: float = 0.15,
    vocab_size: int = 30000,
) -> PretrainingPlan:
    """Model size and steps for `seconds` of pretraining at `flops_per_s` on a text of `unique_tokens` tokens.

    C = flops_per_s x seconds. A model's compute parameters N are its training FLOPs per token over 6
    (`pretraining_flops_per_token`: layer applications, attention and the masked-only MLM head counted), so that
    C = 6 N D exactly. Chinchilla's D = 20 N gives D = sqrt(20 C / 6); the text holds only `unique_tokens`, and more
    than MAX_EPOCHS passes teach little, so D = min(that, MAX_EPOCHS x unique_tokens), N = C / (6 D), and the
    ladder's model nearest N (in log) is chosen. Its steps are C / (6 N x batch x seq_len): what the time allows.
    """
    budget = flops_per_s * seconds
    chinchilla = math.sqrt(TOKENS_PER_PARAMETER * budget / 6)
    max_tokens = MAX_EPOCHS * unique_tokens
    target = budget / (6 * min(chinchilla, max_tokens))

    def compute_parameters(overrides: str) -> float:
        config = AlbertConfig.preset("base-v2", vocab_size=vocab_size, **parse_overrides(overrides))
        return pretraining_flops_per_token(config, seq_len, masked_fraction) / 6

    sizes = {name: compute_parameters(overrides) for name, overrides in ladder.items()}
    model = min(sizes, key=lambda name: abs(math.log(sizes[name] / target)))
    steps = max(1, int(budget / (6 * sizes[model] * batch_size * seq_len)))
    tokens = steps * batch_size * seq_len
    return PretrainingPlan(
        flops_per_s=flops_per_s,
        rate_source=rate_source,
        seconds=seconds,
        budget_flops=budget,
        unique_tokens=unique_tokens,
        chinchilla_tokens=chinchilla,
        max_tokens=max_tokens,
        target_parameters=target,
        model=model,
        model_overrides=ladder[model],
        compute_parameters=sizes[model],
        tokens=tokens,
        steps=steps,
        epochs=min(MAX_EPOCHS, max(1, math.ceil(tokens / unique_tokens))),
        batch_size=batch_size,
        seq_len=seq_len,
    )


def parse_overrides(text: str) -> dict:
    from albert_hf.argument_parsing import parse_config_overrides

    return parse_config_overrides(text)


def learning_rate_source(ctx: Context) -> tuple[float, str]:
    """FLOP/s the planned model is assumed to train at: section 2's measured base step x SMALL_MODEL_EFFICIENCY,
    else the peak (measured in section 1, or assumed) x ASSUMED_MFU x SMALL_MODEL_EFFICIENCY."""
    if ctx.pretraining_rate:
        measured = ctx.pretraining_rate["flops_per_s"]
        return measured * SMALL_MODEL_EFFICIENCY, (
            f"section 2 ({ctx.pretraining_rate['case']}: {measured / 1e12:.3g} TFLOP/s, "
            f"{ctx.pretraining_rate['tokens_per_s'] / 1e3:.0f}k tok/s) x {SMALL_MODEL_EFFICIENCY}"
        )
    peak = ctx.peak_flops or ASSUMED_PEAK_FLOPS
    source = "measured peak" if ctx.peak_flops else "assumed H200 peak"
    return peak * ASSUMED_MFU * SMALL_MODEL_EFFICIENCY, (
        f"{source} {peak / 1e12:.3g} TFLOP/s x MFU {ASSUMED_MFU} x {SMALL_MODEL_EFFICIENCY} (section 2 not run)"
    )


def learning_arguments(ctx: Context, workdir: Path):
    """benchmarks/pretrain_finetune.py's arguments for this run: the corpus and the tasks' texts, the real 30k
    vocabulary, bf16 on the GPU, the label budgets; the plan fills model, steps and passes later."""
    import pretrain_finetune

    spiece = ctx.data_dir / "spiece" / "albert-30k-clean.model"
    budgets = {task: 64 for task in LEARNING_TASKS} if ctx.smoke else LABEL_BUDGET
    argv = [
        "--data_dir",
        str(ctx.data_dir),
        "--output_dir",
        str(workdir),
        "--tokenizer",
        str(spiece),
        "--task_text",
        *LEARNING_TASKS,
        "--max_seq_length",
        str(LEARNING_SEQ_LEN),
        "--learning_rate",
        str(LEARNING_LR),
        "--tasks",
        *LEARNING_TASKS,
        "--seeds",
        "1",
        "--finetune_learning_rate",
        str(FINETUNE_LR),
        "--dataloader_workers",
        "6" if ctx.cuda else "2",  # the smoke run goes through worker processes too
        "--max_train_samples",
        *(f"{task}={count}" for task, count in budgets.items()),
    ]
    argv += ["--bf16"] if ctx.cuda or ctx.smoke else []
    argv += ["--step_scale", "0.01", "--max_eval_samples", "16"] if ctx.smoke else []
    return pretrain_finetune.parse_arguments(argv)


def section_learning(ctx: Context) -> dict:
    if not ctx.cuda and not ctx.smoke:
        raise Skipped("its full size needs a GPU (--smoke runs it at tiny size on CPU)")
    if not (ctx.data_dir / "corpus").is_dir():
        raise Skipped(f"no data folder at {ctx.data_dir} (--data-dir)")
    import pretrain_finetune as pf

    with tempfile.TemporaryDirectory(prefix="gpu_learning_") as tmp:
        workdir = Path(tmp)
        args = learning_arguments(ctx, workdir)
        prepared = time.perf_counter()
        documents, held_out = pf.pretraining_documents(args)
        tokenizer = pf.pretraining_tokenizer(args, documents, workdir)
        plan = learning_plan(ctx, documents, tokenizer, args)
        run = pf.build_pretraining_run(args, workdir, tokenizer, documents, held_out)
        random_init = workdir / "random_init"  # the same architecture, fresh weights
        preparation_s = time.perf_counter() - prepared

        pretrained, figures = pf.pretrain_model(run, args, workdir)
        runs = finetune_both(args, pretrained, random_init, workdir / "finetune")
    failed = [run for run in runs if "error" in run]
    table = pf.summarize([run for run in runs if "error" not in run], list(args.tasks))
    figures.pop("log", None)
    data = dict(
        plan=asdict(plan),
        preparation_s=preparation_s,
        pretraining=figures,
        label_budget={task: args.max_train_samples.get(task, pf.TASKS[task][5]) for task in args.tasks},
        finetune_steps={task: max(1, round(pf.TASKS[task][4] * args.step_scale)) for task in args.tasks},
        finetuning=runs,
        table=table,
        targets=learning_targets(table),
    )
    print(pf.format_table(table), flush=True)
    errors = [f"fine-tuning {run['task']} from {run['init']}: {run['error']}" for run in failed]
    return dict(data=data, rows=learning_rows(plan, figures, table, data), errors=errors)


def learning_plan(ctx: Context, documents, tokenizer, args) -> PretrainingPlan:
    """The plan for this run (`plan_pretraining`), written into `args`: pretraining seconds (150, fewer if the budget
    is short), model, batch, passes (`dupe_factor`: each pass a fresh cut into sentence pairs) and warm-up."""
    from albert_hf.pretraining.arguments import PretrainingDataArguments
    from albert_hf.pretraining.corpus import make_instances

    one_pass, _ = make_instances(documents, tokenizer, PretrainingDataArguments(max_seq_length=args.max_seq_length), 0)
    unique_tokens = int(sum(map(len, one_pass["input_ids"])))
    seconds = 2.0 if ctx.smoke else min(PRETRAIN_SECONDS, max(30.0, ctx.seconds_left() - FINETUNE_RESERVE_S))
    flops_per_s, source = learning_rate_source(ctx)
    ladder, batch_size = (SMOKE_LADDER, 8) if ctx.smoke else (LEARNING_LADDER, LEARNING_BATCH)
    plan = plan_pretraining(flops_per_s, seconds, unique_tokens, ladder, source, batch_size, vocab_size=len(tokenizer))
    print(f"[gpu.py] learning plan: {plan.describe()} ({source})", flush=True)
    args.minutes, args.save_minutes = seconds / 60, 10 * seconds / 60  # no periodic checkpoint in a short run
    args.model_overrides, args.batch_size, args.dupe_factor = plan.model_overrides, plan.batch_size, plan.epochs
    args.warmup_steps = max(1, round(WARMUP_FRACTION * plan.steps))
    return plan


def finetune_both(args, pretrained: Path, random_init: Path, workdir: Path) -> list[dict]:
    """Each task fine-tuned from the pretrained weights and from the random ones, with the same arguments."""
    import pretrain_finetune as pf

    runs = []
    for task in args.tasks:
        for init, checkpoint in (("pretrained", pretrained), ("random", random_init)):
            try:  # one task failing must not cost the others' results
                result = pf.run_finetuning(task, checkpoint, 0, workdir / f"{task}-{init}", args)
            except Exception as error:
                runs.append(dict(task=task, init=init, seed=0, error=f"{type(error).__name__}: {error}"))
                print(f"[gpu.py] fine-tuning {task} from {init} failed:\n{traceback.format_exc()[-3000:]}")
                continue
            runs.append({"task": task, "init": init, "seed": 0, **result})
            print(f"[gpu.py] fine-tuned {task} from {init}: {result['metric']:.4f} ({result['seconds']:.0f} s)")
    return runs


def learning_targets(table: list[dict]) -> dict:
    """The section's targets: pretrained at least 10 points ahead on SST-2 dev accuracy, and ahead on every task."""
    by_task = {row["task"]: row for row in table}
    sst2 = by_task.get("sst2", {}).get("difference", math.nan)
    return dict(
        sst2_ahead_by_10_points=bool(sst2 >= 0.10),
        ahead_on_every_task=all(row["difference"] > 0 for row in table),
    )


def learning_rows(plan: PretrainingPlan, figures: dict, table: list[dict], data: dict) -> list[dict]:
    mlm, sop = figures["held_out_mlm_accuracy"], figures["held_out_sop_accuracy"]
    rows = [
        row(
            f"pretraining {plan.model}, {figures['steps']} steps in {figures['pretraining_seconds']:.0f} s",
            f"planned {plan.steps}",
            f"{figures['steps'] * plan.batch_size * plan.seq_len / figures['pretraining_seconds'] / 1e3:.0f}k tok/s",
            None,
            f"{plan.describe()}; data ready in {data['preparation_s']:.0f} s before the clock",
        ),
        row(
            "held-out MLM accuracy (ref = most frequent token)",
            f"{figures['held_out_mlm_frequency_baseline']:.3f}",
            f"{mlm:.3f}",
            mlm / figures["held_out_mlm_frequency_baseline"],
            f"MLM loss {figures['held_out_mlm_loss']:.2f}, {figures['held_out_instances']} held-out instances",
        ),
        row(
            "held-out SOP accuracy (ref = majority order)",
            f"{figures['held_out_sop_majority_baseline']:.3f}",
            f"{sop:.3f}",
            sop / figures["held_out_sop_majority_baseline"],
        ),
    ]
    for entry in table:
        task = entry["task"]
        rows.append(
            row(
                f"fine-tune {task} dev {entry['metric']} ({data['label_budget'][task] or 'all'} labels; ref = random init)",
                f"{100 * entry['random_mean']:.1f}",
                f"{100 * entry['pretrained_mean']:.1f}",
                None,
                f"pretrained {100 * entry['difference']:+.1f} points; {data['finetune_steps'][task]} steps of 32, "
                "the same for both",
            )
        )
    targets = data["targets"]
    rows.append(
        row(
            "targets",
            notes=f"SST-2 +10 points: {'met' if targets['sst2_ahead_by_10_points'] else 'missed'}; ahead on every "
            f"task: {'met' if targets['ahead_on_every_task'] else 'missed'}",
        )
    )
    return rows


# ----------------------------------------------------------------------------------------------------------------------
# 3. bf16 training against fp32
# ----------------------------------------------------------------------------------------------------------------------


def small_config(ctx: Context) -> AlbertConfig:
    if ctx.smoke:
        return ctx.config("tiny")
    return AlbertConfig(
        vocab_size=30000,
        embedding_size=128,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        classifier_dropout_prob=0.0,
    )


def dtype_probe(model) -> tuple[dict[str, set], list]:
    """Forward hooks recording the output dtypes of every LayerNorm and of the Linear layers (the latter show that
    autocast is really on)."""
    seen: dict[str, set] = {"LayerNorm": set(), "Linear": set()}
    handles = []
    for module in model.modules():
        kind = (
            "LayerNorm"
            if isinstance(module, AlbertLayerNorm)
            else "Linear"
            if isinstance(module, torch.nn.Linear)
            else None
        )
        if kind:
            handles.append(module.register_forward_hook(lambda m, i, out, kind=kind: seen[kind].add(str(out.dtype))))
    return seen, handles


def section_bf16(ctx: Context) -> dict:
    config = small_config(ctx)
    steps = 2 if ctx.smoke else 30
    torch.manual_seed(0)
    initial = albert_hf.AlbertForPreTraining(config)
    batch = to_device(masked_batch(config, 4 if ctx.smoke else 16, 32 if ctx.smoke else 128, seed=1), ctx)
    curves, dtypes = {}, {}
    for precision in ("fp32", "bf16"):
        model = copy.deepcopy(initial).to(ctx.device).train()
        optimizer = Lamb(lamb_parameter_groups(model), lr=2e-3)  # the pretraining optimizer; same init both times
        seen, handles = dtype_probe(model) if precision == "bf16" else ({}, [])
        losses = []
        for _ in range(steps):
            with ctx.autocast(enabled=precision == "bf16"):
                output = model(**batch)
            output.loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(output.loss.item())
        for handle in handles:
            handle.remove()
        if precision == "bf16":
            dtypes = {
                "LayerNorm outputs": sorted(seen["LayerNorm"]),
                "Linear outputs": sorted(seen["Linear"]),
                "loss": str(output.loss.dtype),
                "mlm_loss": str(output.mlm_loss.dtype),
                "sop_loss": str(output.sop_loss.dtype),
            }
        curves[precision] = losses
        del model, optimizer, output
    curve_diff = max(abs(a - b) for a, b in zip(curves["fp32"], curves["bf16"]))
    fp32_kept = dtypes["LayerNorm outputs"] == ["torch.float32"] and dtypes["loss"] == "torch.float32"
    autocast_on = "torch.bfloat16" in dtypes["Linear outputs"]
    free_memory(ctx)
    data = dict(
        steps=steps,
        curves=curves,
        max_curve_diff=curve_diff,
        dtypes=dtypes,
        layernorm_and_loss_fp32=fp32_kept,
        autocast_active=autocast_on,
    )
    rows = [
        row(
            f"bf16 vs fp32: {steps} LAMB steps, loss {curves['fp32'][0]:.3f} ->",
            f"fp32 {curves['fp32'][-1]:.4f}",
            f"bf16 {curves['bf16'][-1]:.4f}",
            None,
            f"max |curve diff| {curve_diff:.2e}",
        ),
        row(
            "bf16 autocast dtypes",
            notes=f"LayerNorm out {','.join(dtypes['LayerNorm outputs'])}, loss "
            f"{dtypes['loss']}, Linear out {','.join(dtypes['Linear outputs'])}: "
            f"{'ok' if fp32_kept and autocast_on else 'FAIL'}",
        ),
    ]
    return dict(data=data, rows=rows)


# ----------------------------------------------------------------------------------------------------------------------
# 4. peak memory and gradient checkpointing
# ----------------------------------------------------------------------------------------------------------------------


def training_memory(model, input_ids: torch.Tensor, ctx: Context) -> tuple[float | None, dict[str, torch.Tensor]]:
    """Peak allocated MiB above what was resident before one forward+backward, and the gradients (on CPU)."""
    model.to(ctx.device).train()
    free_memory(ctx)
    before = 0
    if ctx.cuda:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    model(input_ids).last_hidden_state.pow(2).mean().backward()
    peak = (torch.cuda.max_memory_allocated() - before) / 2**20 if ctx.cuda else None
    grads = {name: p.grad.detach().cpu() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    model.cpu()  # leave the GPU to the next measurement
    return peak, grads


def section_memory(ctx: Context) -> dict:
    config = ctx.config("base")
    batch_size, seq_len = (2, 32) if ctx.smoke else (16, 512)
    reference, ours = paired("AlbertModel", config_kwargs(config))
    checkpointed = copy.deepcopy(ours)
    # transformers 5 renamed the switch (the old name warns); both set the same per-layer checkpointing.
    enable = getattr(checkpointed, "activation_checkpointing_enable", None)
    enable = enable or checkpointed.gradient_checkpointing_enable
    enable()
    input_ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), generator=torch.Generator().manual_seed(0))
    input_ids = input_ids.to(ctx.device)
    peaks, grads = {}, {}
    for name, model in (("transformers", reference), ("albert_hf", ours), ("albert_hf checkpointing", checkpointed)):
        peaks[name], grads[name] = training_memory(model, input_ids, ctx)
    ckpt_diff = max(max_diff(grads["albert_hf"][n], grads["albert_hf checkpointing"][n]) for n in grads["albert_hf"])
    common = grads["albert_hf"].keys() & grads["transformers"].keys()
    ref_diff = max(max_diff(grads["albert_hf"][n], grads["transformers"][n]) for n in common)
    same_params = grads["albert_hf"].keys() == grads["albert_hf checkpointing"].keys()
    free_memory(ctx)
    data = dict(
        batch_size=batch_size,
        seq_len=seq_len,
        peak_mib=peaks,
        grad_max_diff_checkpointing=ckpt_diff,
        grad_max_diff_vs_transformers=ref_diff,
        grads_compared=len(common),
    )

    def mib(value):
        return "n/a (CPU)" if value is None else f"{value:.0f} MiB"

    case = f"peak memory {'tiny' if ctx.smoke else 'base'} AlbertModel {batch_size}x{seq_len} fp32 step"
    ratio = peaks["transformers"] / peaks["albert_hf"] if ctx.cuda else None
    ckpt_ratio = peaks["albert_hf"] / peaks["albert_hf checkpointing"] if ctx.cuda else None
    rows = [
        row(
            case,
            mib(peaks["transformers"]),
            mib(peaks["albert_hf"]),
            ratio,
            f"grads vs transformers max diff {ref_diff:.1e}",
        ),
        row(
            f"{case}, checkpointing (ref = albert_hf without)",
            mib(peaks["albert_hf"]),
            mib(peaks["albert_hf checkpointing"]),
            ckpt_ratio,
            f"grads with/without max diff {ckpt_diff:.1e}{'' if same_params else ' (parameter sets differ!)'}",
        ),
    ]
    return dict(data=data, rows=rows)


# ----------------------------------------------------------------------------------------------------------------------
# 5. DeepSpeed ZeRO-3 on NCCL
# ----------------------------------------------------------------------------------------------------------------------

PARITY_ROWS, PARITY_SEQ_LEN, PARITY_BATCH = 16, 12, 8  # tests/test_distributed.py: GLOBAL_BATCH x STEPS rows


def parity_fixtures(workdir: Path) -> tuple[Path, Path]:
    """The tiny checkpoint and MLM batches of tests/test_distributed.py's fixtures (`pretraining_checkpoint`,
    `mlm_batches`): one shared layer applied three times, padded rows, 30% masked."""
    config = AlbertConfig(
        vocab_size=100,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        classifier_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    checkpoint = workdir / "pretraining_checkpoint"
    albert_hf.AlbertForPreTraining(config).save_pretrained(checkpoint)

    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, 100, (PARITY_ROWS, PARITY_SEQ_LEN), generator=generator)
    lengths = torch.randint(6, PARITY_SEQ_LEN + 1, (PARITY_ROWS,), generator=generator)
    attention_mask = (torch.arange(PARITY_SEQ_LEN)[None] < lengths[:, None]).long()
    input_ids = input_ids * attention_mask
    labels = torch.full_like(input_ids, -100)
    masked = (torch.rand(input_ids.shape, generator=generator) < 0.3) & attention_mask.bool()
    labels[masked] = input_ids[masked]
    data = workdir / "mlm_batches.pt"
    sentence_order_label = torch.randint(0, 2, (PARITY_ROWS,), generator=generator)
    torch.save(
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": torch.zeros_like(input_ids),
            "labels": labels,
            "sentence_order_label": sentence_order_label,
        },
        data,
    )
    return checkpoint, data


def parity_worker(engine: str, checkpoint: str, data: str, output_dir: str, batch_size: str) -> None:
    """Runs inside the launched process: trainer_parity.run_training, on the GPU for DeepSpeed engines when there is
    one (else on the CPU under gloo, the smoke run's check of everything but NCCL).

    trainer_parity.py hard-codes `use_cpu=True` (it is the CPU/gloo test), so launched unchanged it would train on the
    CPU and prove nothing about NCCL; its TrainingArguments is wrapped here to leave the GPU in use. Everything else
    (DeepSpeed config with persistence threshold 0, SGD, from_pretrained under zero.Init, the save) is the test's own.
    """
    path = REPO / "tests" / "distributed" / "trainer_parity.py"
    spec = importlib.util.spec_from_file_location("trainer_parity", path)
    trainer_parity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trainer_parity)

    if engine != "single" and torch.cuda.is_available():
        cpu_arguments = trainer_parity.TrainingArguments

        def gpu_arguments(**kwargs):
            return cpu_arguments(**{**kwargs, "use_cpu": False})

        trainer_parity.TrainingArguments = gpu_arguments
    record = trainer_parity.run_training(engine, checkpoint, data, output_dir, int(batch_size))
    distributed = torch.distributed.is_initialized()
    record.update(
        backend=torch.distributed.get_backend() if distributed else None,
        cuda_peak_bytes=torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0,
    )
    Path(output_dir, "worker.json").write_text(json.dumps(record))
    if distributed:
        torch.distributed.destroy_process_group()
    # As trainer_parity.py: a rank can abort at interpreter shutdown and fail the torchrun job.
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(0)


def launch(command: list[str], env: dict, timeout: int = ZERO3_TIMEOUT_S) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, result) of a process that must succeed within `timeout` seconds."""
    start = time.perf_counter()
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        raise RuntimeError(f"{' '.join(command[:6])} ... did not finish within {timeout} s") from error
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:6])} ... exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        )
    return wall, result


# What DeepSpeed prints when an op it needs cannot be built or loaded on this machine (no CUDA toolkit, no compiler).
MISSING_OP_SIGNS = ("MissingCUDAException", "CUDA_HOME does not exist", "nvcc", "ninja", "Unable to JIT load")


def missing_deepspeed_op(output: str) -> str | None:
    """The line of a failed launch's output that says a DeepSpeed op is missing, if one does."""
    return next((line.strip() for line in output.splitlines() if any(s in line for s in MISSING_OP_SIGNS)), None)


def section_zero3(ctx: Context) -> dict:
    if importlib.util.find_spec("deepspeed") is None:
        raise Skipped("deepspeed is not installed")
    if ctx.cuda and not torch.distributed.is_nccl_available():
        raise Skipped("this torch has no NCCL")
    if not ctx.cuda and not ctx.smoke:
        raise Skipped("ZeRO-3 on NCCL needs a GPU")
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU"):
        env.pop(name, None)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        checkpoint, data = parity_fixtures(workdir)
        single_dir, zero3_dir = workdir / "single", workdir / "zero3"

        def worker(engine: str, output_dir: Path) -> list[str]:
            return [str(Path(__file__).resolve()), "--parity-worker", engine, str(checkpoint), str(data)] + [
                str(output_dir),
                str(PARITY_BATCH),
            ]

        # The reference, one process on the CPU exactly as the test's trainer_reference fixture, runs beside the
        # ZeRO-3 launch: one process, so NCCL + zero.Init + consolidated save, not cross-rank parity (that needs 2+
        # GPUs; the 2-process parity runs on CPU/gloo in tests/test_distributed.py). Without a GPU (smoke) the same
        # launch runs on gloo.
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]
        timeout = max(10, min(ZERO3_TIMEOUT_S, round(ctx.seconds_left())))  # the budget holds for this one too
        with ThreadPoolExecutor(2) as pool:
            cpu_only = {**env, "CUDA_VISIBLE_DEVICES": ""}
            single = pool.submit(launch, [sys.executable, *worker("single", single_dir)], cpu_only, timeout)
            zero3 = pool.submit(launch, torchrun + worker("zero3", zero3_dir), env, timeout)
            single_wall, _ = single.result()
            try:
                wall, _ = zero3.result()
            except RuntimeError as error:
                missing = missing_deepspeed_op(str(error))
                if missing:
                    raise Skipped(f"DeepSpeed could not build or load a CUDA op here: {missing}") from error
                raise
        record = json.loads((zero3_dir / "worker.json").read_text())
        saved, loading = albert_hf.AlbertForPreTraining.from_pretrained(zero3_dir, output_loading_info=True)
        complete = not any(loading[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys"))
        reference = albert_hf.AlbertForPreTraining.from_pretrained(single_dir).state_dict()
        initial = albert_hf.AlbertForPreTraining.from_pretrained(checkpoint).state_dict()
        weights = saved.state_dict()
        diff = max(max_diff(weights[name], reference[name]) for name in reference)
        moved = max(max_diff(initial[name], reference[name]) for name in reference)
    backend = "nccl" if ctx.cuda else "gloo"
    passed = (
        complete
        and record["partitioned_after_from_pretrained"]
        and record["backend"] == backend
        and record["world_size"] == record["torch_world_size"] == 1
        and diff < PARITY_TOLERANCE
    )
    data = dict(
        wall_s=wall,
        single_cpu_wall_s=single_wall,
        backend=record["backend"],
        world_size=record["world_size"],
        partitioned_after_from_pretrained=record["partitioned_after_from_pretrained"],
        cuda_peak_bytes=record["cuda_peak_bytes"],
        saved_checkpoint_complete=complete,
        max_diff_vs_single_cpu=diff,
        weights_moved=moved,
        passed=passed,
        note="1 GPU: proves NCCL + zero.Init + consolidated save; cross-rank parity needs 2+ GPUs"
        if ctx.cuda
        else "CPU smoke: the launch, zero.Init, save and checks on gloo; NCCL needs a GPU",
    )
    notes = (
        f"{'PASS' if passed else 'FAIL'}: backend {record['backend']}, partitioned "
        f"{record['partitioned_after_from_pretrained']}, save complete {complete}, weights vs 1 CPU process "
        f"{diff:.1e} (moved {moved:.2f}); 1 process, so no cross-rank parity"
    )
    return dict(
        data=data,
        rows=[
            row(
                f"ZeRO-3 torchrun 1 proc ({backend}) trainer_parity",
                f"cpu ref {single_wall:.0f} s",
                f"{wall:.0f} s wall",
                None,
                notes,
            )
        ],
    )


# ----------------------------------------------------------------------------------------------------------------------
# 6. torch.compile
# ----------------------------------------------------------------------------------------------------------------------


def compile_backend(ctx: Context) -> str:
    """inductor on the GPU. The CPU smoke run compiles with aot_eager: Dynamo's graph capture and AOTAutograd's
    joint forward/backward graph, the steps where a model breaks, without inductor's C++ code generation (about
    50 s cold on two cores, against 3 s)."""
    if ctx.cuda:
        if importlib.util.find_spec("triton") is None:
            raise Skipped("triton is not installed (inductor's GPU code generator)")
        return "inductor"
    if not ctx.smoke:
        raise Skipped("torch.compile is measured on the GPU only (on CPU it would need minutes of C++ compilation)")
    return "aot_eager"


def section_compile(ctx: Context) -> dict:
    backend = compile_backend(ctx)
    config = ctx.config("base")
    batch_size, seq_len = (4, 32) if ctx.smoke else (32, 128)
    torch.manual_seed(0)
    ours = albert_hf.AlbertModel(AlbertConfig(**config_kwargs(config), attn_implementation="sdpa")).to(ctx.device)
    ours.train()
    compiled = torch.compile(ours, backend=backend)
    input_ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), device=ctx.device)

    def step(model) -> Callable:
        def run():
            with ctx.autocast():
                output = model(input_ids).last_hidden_state
            output.float().pow(2).mean().backward()
            model.zero_grad(set_to_none=True)  # a compiled module's parameters are the eager model's
            return output.detach()

        return run

    # The first call compiles forward and backward; timed alone so that steady-state medians exclude it.
    start = time.perf_counter()
    compiled_output = step(compiled)()
    ctx.sync()
    compile_s = time.perf_counter() - start
    diff = max_diff(compiled_output, step(ours)())  # dropout is 0 in the v2 presets: same computation
    seconds = interleaved({"eager": step(ours), "compiled": step(compiled)}, ctx)
    flops = 3 * batch_size * seq_len * encoder_flops_per_token(config, seq_len)
    data = dict(
        backend=backend,
        compile_s=compile_s,
        seconds=seconds,
        bf16_output_max_diff=diff,
        mfu={name: mfu(flops, s, ctx) for name, s in seconds.items()},
    )
    del ours, compiled
    free_memory(ctx)
    notes = (
        f"compile {compile_s:.1f} s; MFU {percent(data['mfu']['compiled'])} (eager "
        f"{percent(data['mfu']['eager'])}); bf16 out diff {diff:.1e}"
    )
    return dict(
        data=data,
        rows=[
            row(
                f"torch.compile ({backend}) albert_hf {'tiny' if ctx.smoke else 'base'} fwd+bwd {batch_size}x{seq_len} "
                "bf16 (ref = eager)",
                ms(seconds["eager"]),
                ms(seconds["compiled"]),
                seconds["eager"] / seconds["compiled"],
                notes,
            )
        ],
    )


# ----------------------------------------------------------------------------------------------------------------------
# 8. recipes: albert-hf pretrain against transformers' run_mlm recipe at equal time
# ----------------------------------------------------------------------------------------------------------------------


def section_recipes(ctx: Context) -> dict:
    """benchmarks/mlm_recipes.py's comparison at GPU scale (`GPU_SETTING`): steps/s measured in alternating windows,
    the reference's AdamW rate swept, then each recipe trained for the same seconds at its own measured rate and
    both scored on the same held-out token-level and whole-word masks."""
    if not ctx.cuda and not ctx.smoke:
        raise Skipped("its GPU scale needs a GPU (benchmarks/mlm_recipes.py is the CPU run; --smoke runs it tiny)")
    if not (ctx.data_dir / "corpus").is_dir():
        raise Skipped(f"no data folder at {ctx.data_dir} (--data-dir)")
    import mlm_recipes

    setting = mlm_recipes.SMOKE_SETTING if ctx.smoke else mlm_recipes.GPU_SETTING
    result = mlm_recipes.compare(setting, ctx.data_dir, say=lambda message: print(message, flush=True))
    print(mlm_recipes.markdown_table(result), flush=True)
    return dict(data=asdict(result), rows=recipes_rows(result))


def recipes_rows(result) -> list[dict]:
    """Rate and steps, then each held-out figure: 'reference' is transformers' run_mlm recipe."""
    reference, ours = result.runs["reference"], result.runs["albert_hf"]
    rates = {name: result.rates[name]["median"] for name in result.runs}
    budget = result.setting["budget_s"]
    sweep = ", ".join(f"{run['learning_rate']:g}: {run['token_level']['loss']:.3f}" for run in result.sweep)
    rows = [
        row(
            f"steps/s (median of {result.setting['windows']} alternating windows)",
            f"{rates['reference']:.2f}",
            f"{rates['albert_hf']:.2f}",
            rates["albert_hf"] / rates["reference"],
            f"batch {result.setting['batch_size']} x {result.setting['seq_len']}",
        ),
        row(
            f"steps in {budget:.0f} s at the measured rate",
            f"{reference['steps']}",
            f"{ours['steps']}",
            None,
            f"reference AdamW {result.reference_learning_rate:g} (sweep, held-out loss: {sweep}); "
            f"albert_hf LAMB {result.setting['our_learning_rate']:g}",
        ),
    ]
    for masks in ("token_level", "whole_word"):
        baseline = result.baselines[masks]
        for figure in ("loss", "accuracy"):
            notes = f"{baseline['targets']} masked tokens"
            if figure == "accuracy":
                notes = f"frequency baseline {baseline['accuracy']:.3f} (always {baseline['token']!r}); " + notes
            rows.append(
                row(
                    f"held-out {masks.replace('_', '-')} MLM {figure}",
                    f"{reference[masks][figure]:.3f}",
                    f"{ours[masks][figure]:.3f}",
                    None,
                    notes,
                )
            )
    return rows


# ----------------------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    run: Callable[[Context], dict]
    gpu_s: float  # expected seconds on one H200 (an estimate: these sections have not met one yet)
    smoke_s: float  # expected seconds of --smoke on two CPU cores
    what: str
    least_gpu_s: float | None = None  # what it can shrink to when the budget is short (the learning section)


# In running order: the learning section right after the throughput it plans from, the least needed last, so that
# --budget-s cuts those first.
SECTIONS = {
    "matmul": Section(section_matmul, 5, 0.5, "bf16/fp32 matmul peak (the MFU denominator)"),
    "throughput": Section(section_throughput, 40, 1, "pretraining step, base and xxlarge, against transformers"),
    "learning": Section(
        section_learning, 300, 15, "pretrain, then fine-tune SST-2/MRPC/CoNLL against random init", least_gpu_s=180
    ),
    "bf16": Section(section_bf16, 5, 0.5, "30 LAMB steps in bf16 against fp32"),
    "memory": Section(section_memory, 10, 1, "peak memory, gradient checkpointing"),
    "compile": Section(section_compile, 50, 5, "torch.compile against eager"),
    "zero3": Section(section_zero3, 45, 15, "DeepSpeed ZeRO-3 on NCCL (gloo in smoke), 1 process"),
    # Outside the default budget: a full run skips it for time; `--sections recipes` runs it alone.
    "recipes": Section(section_recipes, 300, 15, "albert-hf pretrain against run_mlm's recipe at equal time"),
}
DEFAULT_BUDGET_S = 510.0  # the sections' H200 estimates (455 s) plus margin; with start-up, under 9 minutes


def expected_seconds(name: str, ctx: Context) -> float:
    return SECTIONS[name].smoke_s if ctx.smoke else SECTIONS[name].gpu_s


def least_seconds(name: str, ctx: Context) -> float:
    """The time a section needs to start: its estimate, or for one that shrinks to fit (the learning section's
    pretraining takes what is left), the least it can do with."""
    section = SECTIONS[name]
    return section.least_gpu_s if section.least_gpu_s and not ctx.smoke else expected_seconds(name, ctx)


def print_plan(names: list[str], ctx: Context, budget_s: float) -> None:
    """What will run and how long each part is expected to take, before anything does."""
    where = "two CPU cores, --smoke" if ctx.smoke else "one H200, estimated"
    print(f"[gpu.py] plan ({where}; a section starts only if its estimate fits what is left of --budget-s):")
    for name in names:
        least = least_seconds(name, ctx)
        shrinks = f" (at least {least:.0f} s)" if least < expected_seconds(name, ctx) else ""
        print(f"[gpu.py]   {name:<10} {expected_seconds(name, ctx):>5.0f} s  {SECTIONS[name].what}{shrinks}")
    total = sum(expected_seconds(name, ctx) for name in names)
    print(f"[gpu.py]   {'total':<10} {total:>5.0f} s  of a {budget_s:.0f} s budget", flush=True)


def run_section(name: str, ctx: Context) -> dict:
    """One section, its failure recorded instead of raised: an error must not end the run."""
    start = time.perf_counter()
    try:
        if name in ctx.fail:
            raise RuntimeError(f"failed on purpose (--fail {name})")
        outcome = SECTIONS[name].run(ctx)
        result = dict(status="ok", data=outcome["data"], rows=outcome["rows"])
        if outcome.get("errors"):  # a part failed, the rest measured: keep both
            result.update(status="error", error="; ".join(outcome["errors"]))
    except Skipped as reason:
        result = dict(status="skipped", reason=str(reason), rows=[])
    except Exception as error:
        result = dict(
            status="error",
            error=f"{type(error).__name__}: {error}",
            traceback=traceback.format_exc()[-6000:],
            rows=[],
        )
    finally:
        free_memory(ctx)
    result["seconds"] = time.perf_counter() - start
    return result


def run_sections(names: list[str], ctx: Context, save: Callable[[dict], None]) -> dict:
    """Each section in turn while its estimate fits the budget; the results are saved after every section, so a run
    stopped from outside keeps what it measured."""
    results = {}
    for name in names:
        needed = least_seconds(name, ctx)
        if needed > ctx.seconds_left():
            reason = f"time budget: {max(0.0, ctx.seconds_left()):.0f} s left, {needed:.0f} s needed"
            results[name] = dict(status="skipped", reason=reason, seconds=0.0, rows=[])
        else:
            print(f"[gpu.py] section {name} ...", flush=True)
            results[name] = run_section(name, ctx)
        result = results[name]
        detail = result.get("reason") or result.get("error", "")
        print(
            f"[gpu.py] section {name}: {result['status']} in {result['seconds']:.1f} s"
            f"{' (' + detail.splitlines()[0][:200] + ')' if detail else ''}",
            flush=True,
        )
        save(results)
    return results


def format_table(results: dict, ctx: Context) -> str:
    lines = []
    for name, result in results.items():
        for entry in result["rows"]:
            ratio = "" if entry["ratio"] is None else f"{entry['ratio']:.2f}x"
            lines.append((name, entry["case"], entry["reference"], entry["ours"], ratio, entry["notes"]))
        if result["status"] != "ok":
            message = result.get("reason") or result.get("error", "")
            lines.append((name, result["status"].upper(), "", "", "", message.splitlines()[0][:160] if message else ""))
    header = ("section", "case", "reference", "albert_hf", "ratio", "notes")
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(5)]
    formatted = [
        " | ".join(str(v).ljust(w) for v, w in zip(line[:5], widths)) + " | " + line[5] for line in [header, *lines]
    ]
    return "\n".join(
        [
            f"{ctx.meta.get('device_name', ctx.device)} | torch {torch.__version__} | peak for MFU: "
            f"{ctx.peak_flops / 1e12 if ctx.peak_flops else float('nan'):.3g} TFLOP/s ({ctx.peak_source})"
            f"{' | SMOKE (tiny config, CPU figures)' if ctx.smoke else ''}",
            "ratio = reference time / albert_hf time (> 1: albert_hf faster); 'reference' is transformers unless the "
            "case says otherwise",
            formatted[0],
            "-" * len(formatted[0]),
            *formatted[1:],
        ]
    )


def write_results(results: dict, ctx: Context, path: Path) -> None:
    """The JSON at `path` and the table beside it (`.txt`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = dict(ctx.meta, peak_flops=ctx.peak_flops, peak_source=ctx.peak_source)
    path.write_text(json.dumps(dict(meta=meta, sections=results), indent=2, default=str))
    path.with_suffix(".txt").write_text(format_table(results, ctx) + "\n")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 2 steps per measurement (CPU without CUDA)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of: {', '.join(SECTIONS)}")
    parser.add_argument(
        "--json", type=Path, default=REPO / "benchmarks" / "gpu_results.json", help="where to write the results"
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="seconds for the sections: one starts only if its expected time fits what is left",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="the shared data folder (default: $ALBERT_HF_SHARED_DATA or ../shared/data; --smoke: tests/fixtures)",
    )
    parser.add_argument(
        "--fail",
        default="",
        help="comma list of sections made to raise at once: checks that a failure is recorded and the run goes on",
    )
    parser.add_argument(
        "--parity-worker",
        nargs=5,
        metavar=("ENGINE", "CHECKPOINT", "DATA", "OUTPUT_DIR", "BATCH"),
        help=argparse.SUPPRESS,
    )  # internal: the process the zero3 section launches
    args = parser.parse_args(argv)
    for option in ("sections", "fail"):
        unknown = set(filter(None, getattr(args, option).split(","))) - SECTIONS.keys()
        if unknown:
            parser.error(f"--{option}: unknown sections {sorted(unknown)}")
    return args


def use_ieee_fp32() -> None:
    """fp32 means fp32: the equality checks and the fp32 matmul rate must not run on TF32 tensor cores.
    (torch >= 2.9 spells it fp32_precision = "ieee" and deprecates the allow_tf32 flags; the two should not be mixed.)"""
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def main(argv: list[str] | None = None) -> int:
    """Exit status 1 when a section failed (the JSON and table are written first), else 0."""
    args = parse_arguments(argv)
    if args.parity_worker:
        parity_worker(*args.parity_worker)
        return 0
    started = time.perf_counter()
    names = [name for name in SECTIONS if name in args.sections.split(",")]
    if torch.cuda.is_available():  # a CPU has no TF32; the process's settings stay as they were
        use_ieee_fp32()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ctx = Context(
        device=device,
        smoke=args.smoke,
        steps=2 if args.smoke else 6,
        warmup=1 if args.smoke else 2,
        data_dir=args.data_dir or (FIXTURES if args.smoke else DEFAULT_DATA),
        deadline=started + args.budget_s,
        fail=frozenset(filter(None, args.fail.split(","))),
    )
    ctx.meta = dict(
        device_name=torch.cuda.get_device_name() if ctx.cuda else "cpu",
        torch=torch.__version__,
        transformers=version("transformers"),
        smoke=args.smoke,
        cuda=torch.version.cuda,
        flash_attn=importlib.util.find_spec("flash_attn") is not None,
        deepspeed=importlib.util.find_spec("deepspeed") is not None,
        fp32_matmul=getattr(torch.backends.cuda.matmul, "fp32_precision", "allow_tf32=False"),
        data_dir=str(ctx.data_dir),
        budget_s=args.budget_s,
    )
    print_plan(names, ctx, args.budget_s)

    def save(results: dict) -> None:
        ctx.meta["total_s"] = time.perf_counter() - started
        write_results(results, ctx, args.json)

    results = run_sections(names, ctx, save)
    print("\n" + format_table(results, ctx))
    print(f"\nwrote {args.json} and {args.json.with_suffix('.txt')} ({ctx.meta['total_s']:.0f} s)")
    return int(any(result["status"] == "error" for result in results.values()))


if __name__ == "__main__":
    sys.exit(main())
