"""GPU benchmark and checks: albert_hf against transformers' ALBERT on one GPU, in one unattended run.

On a machine with one CUDA GPU (the run times quoted here are an H200's), from the repository root after
`pip install -e .[test]`, with torch built for CUDA:

    python benchmarks/gpu.py                   # 4-5 minutes (H200); table on stdout, JSON in
                                               # benchmarks/gpu_results.json (--json PATH to write it elsewhere)
    python benchmarks/gpu.py --sections throughput,compile     # a subset, e.g. to rerun what failed
    OMP_NUM_THREADS=1 python benchmarks/gpu.py --smoke         # tiny config, 2 steps per section, CPU without CUDA

Keeping a log next to the JSON:

    set -o pipefail; PYTHONUNBUFFERED=1 python benchmarks/gpu.py --json runs/gpu.json 2>&1 | tee runs/gpu_log.txt

`--budget-s` (420 s by default) skips the sections not yet started once that much time has passed, so that a run
under a time limit still prints its table and writes its JSON, and the skipped sections can be rerun with --sections.

Sections (each in its own try/except: an error is recorded in the table and the JSON, and the run goes on):

  1. matmul    measured bf16 and fp32 (TF32 off) matmul TFLOP/s of the chip (8192^3, CUDA events, median); the bf16
               rate is the peak MFU is measured against.
  2. throughput  AlbertForPreTraining training step (AdamW, bf16 autocast, sdpa), base 256x128 / 64x512 and xxlarge
               32x128 / 8x512, transformers and albert_hf with identical weights (fp32 outputs checked to 1e-4 with
               TF32 off first), albert_hf with `masked_positions_only=True`, and both under flash_attention_2 when
               `flash_attn` imports. Tokens/s and MFU (FLOPs: 3 x (encoder_flops_per_token + MLM head) per token).
  3. bf16      30 LAMB pretraining steps of a small model in fp32 and in bf16 autocast from the same weights: final
               losses, max |difference| of the loss curves, and the dtypes of LayerNorm outputs and losses under
               autocast (albert_hf keeps both fp32).
  4. memory    peak torch.cuda.max_memory_allocated of an AlbertModel training step, base 16x512 fp32: transformers,
               albert_hf, albert_hf with gradient checkpointing; gradients with and without checkpointing compared.
  5. zero3     tests/distributed/trainer_parity.py's training under DeepSpeed ZeRO-3 on NCCL with one GPU (torchrun,
               1 process, 120 s timeout): zero.Init partitioning, consolidated save, weights against one CPU process.
  6. compile   albert_hf base forward+backward 32x128 bf16, eager against torch.compile; compile time separately.

Ratios are reference_time / ours_time (> 1: albert_hf, or the variant named in the case, is faster).
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import torch

import albert_hf
from albert_hf import AlbertConfig
from albert_hf.modeling import AlbertLayerNorm
from albert_hf.training.lamb import Lamb, lamb_parameter_groups

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the CPU suite's helpers, shared rather than copied
from run import _kwargs, encoder_flops_per_token, masked_batch, max_diff, mlm_head_flops, paired  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
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
    peak_flops: float | None = None  # measured bf16 matmul FLOP/s (section 1)
    peak_source: str = "not measured"
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


# ----------------------------------------------------------------------------------------------------------------------
# Measurement helpers
# ----------------------------------------------------------------------------------------------------------------------


def timed(fn: Callable, ctx: Context) -> float:
    """Seconds of one call of fn. On CUDA: events around it, then wait, so queued kernels are counted once."""
    if ctx.cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    start_time = time.perf_counter()
    fn()
    return time.perf_counter() - start_time


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
        reference, ours = paired("AlbertForPreTraining", _kwargs(config))
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
    reference, ours = paired("AlbertModel", _kwargs(config))
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
    """Runs inside the launched process: trainer_parity.run_training, on the GPU for DeepSpeed engines.

    trainer_parity.py hard-codes `use_cpu=True` (it is the CPU/gloo test), so launched unchanged it would train on the
    CPU and prove nothing about NCCL; its TrainingArguments is wrapped here to leave the GPU in use. Everything else
    (DeepSpeed config with persistence threshold 0, SGD, from_pretrained under zero.Init, the save) is the test's own.
    """
    sys.path.insert(0, str(REPO / "tests" / "distributed"))
    import trainer_parity

    if engine != "single":
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


def launch(command: list[str], env: dict, timeout: int) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:6])} ... exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        )
    return wall, result


def section_zero3(ctx: Context) -> dict:
    if importlib.util.find_spec("deepspeed") is None:
        raise Skipped("deepspeed is not installed")
    script = str(Path(__file__).resolve())
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
        # The reference: one process on the CPU, exactly as the test's trainer_reference fixture.
        single_dir = workdir / "single"
        single_wall, _ = launch(
            [
                sys.executable,
                script,
                "--parity-worker",
                "single",
                str(checkpoint),
                str(data),
                str(single_dir),
                str(PARITY_BATCH),
            ],
            {**env, "CUDA_VISIBLE_DEVICES": ""},
            ZERO3_TIMEOUT_S,
        )
        if not ctx.cuda:
            raise Skipped(f"ZeRO-3 on NCCL needs a GPU (the CPU reference run worked: {single_wall:.0f} s)")
        if not torch.distributed.is_nccl_available():
            raise Skipped("this torch has no NCCL")
        zero3_dir = workdir / "zero3"
        # One process: NCCL + zero.Init + consolidated save, not cross-rank parity (that needs 2+ GPUs; the 2-process
        # parity runs on CPU/gloo in tests/test_distributed.py).
        try:
            wall, _ = launch(
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    "--nproc_per_node",
                    "1",
                    script,
                    "--parity-worker",
                    "zero3",
                    str(checkpoint),
                    str(data),
                    str(zero3_dir),
                    str(PARITY_BATCH),
                ],
                env,
                ZERO3_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(f"torchrun ZeRO-3 did not finish within {ZERO3_TIMEOUT_S} s") from error
        record = json.loads((zero3_dir / "worker.json").read_text())
        saved, loading = albert_hf.AlbertForPreTraining.from_pretrained(zero3_dir, output_loading_info=True)
        complete = not any(loading[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys"))
        reference = albert_hf.AlbertForPreTraining.from_pretrained(single_dir).state_dict()
        initial = albert_hf.AlbertForPreTraining.from_pretrained(checkpoint).state_dict()
        weights = saved.state_dict()
        diff = max(max_diff(weights[name], reference[name]) for name in reference)
        moved = max(max_diff(initial[name], reference[name]) for name in reference)
    passed = (
        complete
        and record["partitioned_after_from_pretrained"]
        and record["backend"] == "nccl"
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
        note="1 GPU: proves NCCL + zero.Init + consolidated save; cross-rank parity needs 2+ GPUs",
    )
    notes = (
        f"{'PASS' if passed else 'FAIL'}: backend {record['backend']}, partitioned "
        f"{record['partitioned_after_from_pretrained']}, save complete {complete}, weights vs 1 CPU process "
        f"{diff:.1e} (moved {moved:.2f}); 1 GPU, so no cross-rank parity"
    )
    return dict(
        data=data,
        rows=[
            row(
                "ZeRO-3 torchrun 1 proc (NCCL) trainer_parity",
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


def section_compile(ctx: Context) -> dict:
    if not ctx.cuda:
        raise Skipped("torch.compile is measured on the GPU only (on CPU it would need minutes of C++ compilation)")
    config = ctx.config("base")
    batch_size, seq_len = 32, 128
    torch.manual_seed(0)
    ours = albert_hf.AlbertModel(AlbertConfig(**_kwargs(config), attn_implementation="sdpa")).to(ctx.device).train()
    compiled = torch.compile(ours)
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
                f"torch.compile albert_hf base fwd+bwd {batch_size}x{seq_len} bf16 (ref = eager)",
                ms(seconds["eager"]),
                ms(seconds["compiled"]),
                seconds["eager"] / seconds["compiled"],
                notes,
            )
        ],
    )


# ----------------------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------------------

SECTIONS = {
    "matmul": section_matmul,
    "throughput": section_throughput,
    "bf16": section_bf16,
    "memory": section_memory,
    "zero3": section_zero3,
    "compile": section_compile,
}


def run_sections(names: list[str], ctx: Context, budget_s: float) -> dict:
    started, results = time.perf_counter(), {}
    for name in names:
        if time.perf_counter() - started > budget_s:
            reason = f"time budget of {budget_s:.0f} s spent"
            results[name] = dict(status="skipped", reason=reason, seconds=0.0, rows=[])
            continue
        print(f"[gpu.py] section {name} ...", flush=True)
        start = time.perf_counter()
        try:
            outcome = SECTIONS[name](ctx)
            results[name] = dict(status="ok", data=outcome["data"], rows=outcome["rows"])
        except Skipped as reason:
            results[name] = dict(status="skipped", reason=str(reason), rows=[])
        except Exception as error:  # one section's failure must not end the run
            results[name] = dict(
                status="error",
                error=f"{type(error).__name__}: {error}",
                traceback=traceback.format_exc()[-6000:],
                rows=[],
            )
        finally:
            free_memory(ctx)
        results[name]["seconds"] = time.perf_counter() - start
        print(f"[gpu.py] section {name}: {results[name]['status']} in {results[name]['seconds']:.1f} s", flush=True)
    return results


def print_table(results: dict, ctx: Context) -> None:
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
    print(
        f"\n{ctx.meta.get('device_name', ctx.device)} | torch {torch.__version__} | peak for MFU: "
        f"{ctx.peak_flops / 1e12 if ctx.peak_flops else float('nan'):.3g} TFLOP/s ({ctx.peak_source})"
        f"{' | SMOKE (tiny config)' if ctx.smoke else ''}"
    )
    print(
        "ratio = reference time / albert_hf time (> 1: albert_hf faster); 'reference' is transformers unless the "
        "case says otherwise"
    )
    formatted = [
        " | ".join(str(v).ljust(w) for v, w in zip(line[:5], widths)) + " | " + line[5] for line in [header, *lines]
    ]
    print(formatted[0])
    print("-" * len(formatted[0]))
    print("\n".join(formatted[1:]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny config, 2 steps per section (CPU without CUDA)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of: {', '.join(SECTIONS)}")
    parser.add_argument(
        "--json", type=Path, default=REPO / "benchmarks" / "gpu_results.json", help="where to write the results"
    )
    parser.add_argument(
        "--budget-s", type=float, default=420.0, help="skip the remaining sections once this many seconds have passed"
    )
    parser.add_argument(
        "--parity-worker",
        nargs=5,
        metavar=("ENGINE", "CHECKPOINT", "DATA", "OUTPUT_DIR", "BATCH"),
        help=argparse.SUPPRESS,
    )  # internal: the process section 5 launches
    args = parser.parse_args(argv)
    if args.parity_worker:
        parity_worker(*args.parity_worker)
        return
    names = [name for name in args.sections.split(",") if name]
    unknown = set(names) - SECTIONS.keys()
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")

    # fp32 means fp32: the equality checks and the fp32 matmul rate must not run on TF32 tensor cores.
    # (torch >= 2.9 spells it fp32_precision = "ieee" and deprecates the allow_tf32 flags; the two should not be mixed.)
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ctx = Context(device=device, smoke=args.smoke, steps=2 if args.smoke else 10, warmup=1 if args.smoke else 3)
    ctx.meta = dict(
        device_name=torch.cuda.get_device_name() if ctx.cuda else "cpu",
        torch=torch.__version__,
        transformers=version("transformers"),
        smoke=args.smoke,
        cuda=torch.version.cuda,
        flash_attn=importlib.util.find_spec("flash_attn") is not None,
        deepspeed=importlib.util.find_spec("deepspeed") is not None,
        fp32_matmul=getattr(torch.backends.cuda.matmul, "fp32_precision", "allow_tf32=False"),
    )
    started = time.perf_counter()
    results = run_sections(names, ctx, args.budget_s)
    ctx.meta.update(total_s=time.perf_counter() - started, peak_flops=ctx.peak_flops, peak_source=ctx.peak_source)
    print_table(results, ctx)
    path = args.json
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(meta=ctx.meta, sections=results), indent=2, default=str))
    print(f"\nwrote {path} ({ctx.meta['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
