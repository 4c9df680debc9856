"""Side-by-side benchmark: albert_hf against transformers' ALBERT with identical weights, in the same process.

    python benchmarks/run.py                       # every case, table on stdout, JSON in benchmarks/results.json
    python benchmarks/run.py --cases model --sizes base --seq-lens 128 --repeats 3

Each case builds both models from one set of weights, checks that their outputs agree (fp32: 1e-5), then times them
interleaved (reference, ours, reference, ours, ...) after a warm-up and reports medians and the ratio
reference_time / ours_time (> 1: albert_hf is faster). Model FLOPs utilisation (MFU) is measured against the fp32
GEMM rate of this machine, measured in the same run at the cases' thread count: the best rate over the matrix shapes
the models actually run (and one 2048^3 product), so that no case can exceed 100%. Peak memory is the resident-set high-water mark of a fresh
subprocess per measurement (CPU has no allocator statistics).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import transformers
from common import (
    DEFAULT_DATA,
    REPO,
    config_kwargs,
    encoder_flops_per_token,
    masked_batch,
    max_diff,
    mlm_head_flops,
    paired,
)

from albert_hf import AlbertConfig

# ----------------------------------------------------------------------------------------------------------------------
# Measurement helpers
# ----------------------------------------------------------------------------------------------------------------------


def model_gemm_shapes(config: AlbertConfig, tokens: int) -> list[tuple[int, int, int]]:
    """(m, k, n) of the matrix products a forward pass over `tokens` tokens runs: the embedding projection E -> H,
    the four H x H attention projections, the FFN's H -> I and I -> H."""
    E, H, I = config.embedding_size, config.hidden_size, config.intermediate_size
    return [(tokens, E, H), (tokens, H, H), (tokens, H, I), (tokens, I, H)]


def gemm_peak_gflops(
    dtype: torch.dtype = torch.float32, shapes: list[tuple[int, int, int]] | None = None, repeats: int = 10
) -> float:
    """The machine's best sustained matmul rate over `shapes` (m, k, n) (default one 2048^3 product), at the current
    thread count: the limit MFU is measured against. Taken over the shapes the model itself runs, no case can beat it
    by running a shape the peak did not try (one square 2048^3 product was slower than ALBERT-base's own products,
    which gave an MFU of 105%)."""
    best = 0.0
    for m, k, n in shapes or [(2048, 2048, 2048)]:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        a @ b
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        best = max(best, 2 * m * k * n / statistics.median(times) / 1e9)
    return best


def peak_shapes(sizes: list[str], seq_lens: list[int]) -> list[tuple[int, int, int]]:
    """The square 2048^3 product and every GEMM shape of the cases' models: the model cases' 1024 tokens per batch,
    the inference case's batches of 32 SST-2 sentences (about 32 x 32 tokens) and each sequence length."""
    token_counts = sorted({1024, 32 * 32, *seq_lens, *(8 * s for s in seq_lens)})
    shapes = {(2048, 2048, 2048)}
    for size in {*sizes, "base"}:
        config = AlbertConfig.preset(size)
        for tokens in token_counts:
            shapes.update(model_gemm_shapes(config, tokens))
    return sorted(shapes)


def interleaved_medians(reference_fn, ours_fn, repeats: int, warmup: int = 1) -> tuple[float, float]:
    for _ in range(warmup):
        reference_fn()
        ours_fn()
    reference_times, ours_times = [], []
    for _ in range(repeats):
        for fn, times in ((reference_fn, reference_times), (ours_fn, ours_times)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(reference_times), statistics.median(ours_times)


# ----------------------------------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------------------------------


def case_model(size: str, seq_len: int, batch_size: int, backward: bool, repeats: int, peak: float, bf16: bool):
    config = AlbertConfig.preset(size)
    reference, ours = paired("AlbertModel", config_kwargs(config))
    reference.train(backward), ours.train(backward)
    input_ids = torch.randint(5, config.vocab_size, (batch_size, seq_len))
    attention_mask = torch.ones_like(input_ids)

    def step(model):
        def run():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), torch.set_grad_enabled(backward):
                output = model(input_ids, attention_mask=attention_mask).last_hidden_state
            if backward:
                output.float().pow(2).mean().backward()
                model.zero_grad(set_to_none=True)
            return output

        return run

    with torch.no_grad():
        diff = max_diff(reference(input_ids).last_hidden_state, ours(input_ids).last_hidden_state)
    t_ref, t_ours = interleaved_medians(step(reference), step(ours), repeats)
    flops = batch_size * seq_len * encoder_flops_per_token(config, seq_len) * (3 if backward else 1)
    name = f"{size} {'fwd+bwd' if backward else 'fwd'} {batch_size}x{seq_len}{' bf16' if bf16 else ''}"
    return dict(
        case=name,
        reference_s=t_ref,
        ours_s=t_ours,
        max_diff=diff,
        mfu_ours=flops / t_ours / 1e9 / peak,
        mfu_reference=flops / t_ref / 1e9 / peak,
    )


def case_pretraining_step(size: str, batch_size: int, seq_len: int, repeats: int, peak: float, bf16: bool):
    config = AlbertConfig.preset(size)
    reference, ours = paired("AlbertForPreTraining", config_kwargs(config))
    batch = masked_batch(config, batch_size, seq_len)
    optimizers = {id(m): torch.optim.AdamW(m.parameters(), lr=1e-5) for m in (reference, ours)}

    def step(model, **extra):
        def run():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(**batch, **extra).loss
            loss.backward()
            optimizers[id(model)].step()
            optimizers[id(model)].zero_grad(set_to_none=True)

        return run

    reference.eval(), ours.eval()  # dropout off for the equality check (the SOP head has dropout 0.1)
    with torch.no_grad():
        diff = abs(reference(**batch).loss.item() - ours(**batch, masked_positions_only=True).loss.item())
    reference.train(), ours.train()
    t_ref, t_ours = interleaved_medians(step(reference), step(ours, masked_positions_only=True), repeats)
    tokens = batch_size * seq_len
    masked = int(batch["labels"].ne(-100).sum())
    flops_ours = 3 * (tokens * encoder_flops_per_token(config, seq_len) + masked * mlm_head_flops(config))
    flops_ref = 3 * (tokens * encoder_flops_per_token(config, seq_len) + tokens * mlm_head_flops(config))
    return dict(
        case=f"pretraining step {size} {batch_size}x{seq_len}{' bf16' if bf16 else ''} (AdamW)",
        reference_s=t_ref,
        ours_s=t_ours,
        max_diff=diff,
        mfu_ours=flops_ours / t_ours / 1e9 / peak,
        mfu_reference=flops_ref / t_ref / 1e9 / peak,
    )


def glue_sentences(data_dir: Path, task: str, split: str, columns: tuple[int, ...], limit: int | None = None):
    rows = (data_dir / "glue" / task / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]
    pairs = [tuple(row.split("\t")[c] for c in columns) for row in rows if row.strip()]
    return pairs[:limit] if limit else pairs


def real_batches(data_dir: Path, task: str, split: str, columns, batch_size: int, num_batches: int):
    """Consecutive batches of real GLUE text, tokenized with the real ALBERT vocabulary, dynamically padded."""
    tokenizer = transformers.AlbertTokenizer(vocab_file=str(data_dir / "spiece" / "albert-30k-clean.model"))
    texts = glue_sentences(data_dir, task, split, columns, batch_size * num_batches)
    batches = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        encoded = tokenizer(
            *zip(*chunk), padding=True, truncation=True, max_length=128, return_tensors="pt", return_token_type_ids=True
        )
        batches.append(dict(encoded))
    return batches


def case_finetuning(data_dir: Path, size: str, repeats: int, peak: float, bf16: bool):
    config = AlbertConfig.preset(size)
    reference, ours = paired("AlbertForSequenceClassification", config_kwargs(config))
    batches = real_batches(data_dir, "MRPC", "train", (3, 4), batch_size=8, num_batches=4)
    labels = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1])

    def epoch(model):
        def run():
            for batch in batches:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    loss = model(**batch, labels=labels[: batch["input_ids"].shape[0]]).loss
                loss.backward()
                model.zero_grad(set_to_none=True)

        return run

    with torch.no_grad():
        diff = max_diff(reference.eval()(**batches[0]).logits, ours.eval()(**batches[0]).logits)
    reference.train(), ours.train()
    t_ref, t_ours = interleaved_medians(epoch(reference), epoch(ours), repeats)
    flops = sum(3 * b["input_ids"].numel() * encoder_flops_per_token(config, b["input_ids"].shape[1]) for b in batches)
    lengths = [b["input_ids"].shape[1] for b in batches]
    return dict(
        case=f"fine-tune {size} MRPC 4x8 real batches (len {min(lengths)}-{max(lengths)})",
        reference_s=t_ref,
        ours_s=t_ours,
        max_diff=diff,
        mfu_ours=flops / t_ours / 1e9 / peak,
        mfu_reference=flops / t_ref / 1e9 / peak,
    )


def case_inference(data_dir: Path, size: str, repeats: int, peak: float):
    config = AlbertConfig.preset(size)
    reference, ours = paired("AlbertForSequenceClassification", config_kwargs(config))
    reference.eval(), ours.eval()
    batches = real_batches(data_dir, "SST-2", "dev", (0,), batch_size=32, num_batches=4)

    def run_all(model):
        def run():
            with torch.inference_mode():
                for batch in batches:
                    model(**batch)

        return run

    with torch.inference_mode():
        diff = max(max_diff(reference(**b).logits, ours(**b).logits) for b in batches)
    t_ref, t_ours = interleaved_medians(run_all(reference), run_all(ours), repeats)
    sentences = sum(b["input_ids"].shape[0] for b in batches)
    flops = sum(b["input_ids"].numel() * encoder_flops_per_token(config, b["input_ids"].shape[1]) for b in batches)
    return dict(
        case=f"inference {size} SST-2 dev, {sentences} sentences ({sentences / t_ours:.0f}/s ours)",
        reference_s=t_ref,
        ours_s=t_ours,
        max_diff=diff,
        mfu_ours=flops / t_ours / 1e9 / peak,
        mfu_reference=flops / t_ref / 1e9 / peak,
    )


def case_onnx(size: str, batch_size: int, seq_len: int, repeats: int, peak: float, workdir: Path):
    """Inference latency: transformers' ALBERT in PyTorch against albert_hf exported to ONNX under onnxruntime."""
    import onnxruntime

    from albert_hf.onnx_export import export_onnx

    config = AlbertConfig.preset(size)
    reference, ours = paired("AlbertForSequenceClassification", config_kwargs(config))
    reference.eval(), ours.eval()
    path = workdir / f"albert-{size}.onnx"
    export_onnx(ours, path)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    input_ids = torch.randint(5, config.vocab_size, (batch_size, seq_len))
    feed = dict(
        input_ids=input_ids.numpy(),
        attention_mask=torch.ones_like(input_ids).numpy(),
        token_type_ids=torch.zeros_like(input_ids).numpy(),
    )

    def run_reference():
        with torch.inference_mode():
            return reference(input_ids).logits

    diff = float(abs(session.run(None, feed)[0] - run_reference().numpy()).max())
    t_ref, t_ours = interleaved_medians(run_reference, lambda: session.run(None, feed), repeats)
    flops = batch_size * seq_len * encoder_flops_per_token(config, seq_len)
    megabytes = path.stat().st_size / 2**20
    return dict(
        case=f"onnxruntime {size} {batch_size}x{seq_len} ({megabytes:.0f} MiB file)",
        reference_s=t_ref,
        ours_s=t_ours,
        max_diff=diff,
        mfu_ours=flops / t_ours / 1e9 / peak,
        mfu_reference=flops / t_ref / 1e9 / peak,
    )


def case_tokenization(data_dir: Path, repeats: int) -> dict:
    """Batch-encode all SST-2 training sentences (batches of 1000): albert_hf's tokenizer against transformers'.

    The tokenizers are not output-equal by design (transformers' differs from the original ALBERT tokenization on
    about a third of real texts, see benchmarks/tokenizer_agreement.py), so `max_diff` is the fraction of sentences
    whose ids differ."""
    from bench_tokenizer import SOURCES, encode_all, load_both

    load, call = SOURCES["GLUE sentences (SST-2)"]  # as the GLUE job calls a tokenizer
    sentences = load(data_dir)
    ours, reference = load_both(data_dir / "spiece" / "albert-30k-clean.model")
    t_ref, t_ours = interleaved_medians(
        lambda: encode_all(call, reference, sentences, 1000), lambda: encode_all(call, ours, sentences, 1000), repeats
    )
    sample = sentences[::20]
    differ = sum(
        a != b for a, b in zip(reference(sample, return_token_type_ids=False)["input_ids"], ours(sample)["input_ids"])
    )
    return dict(
        case=f"tokenize SST-2 train, {len(sentences)} sentences ({len(sentences) / t_ours:,.0f}/s ours)",
        reference_s=t_ref,
        ours_s=t_ours,
        max_diff=differ / len(sample),
        mfu_ours=None,
        mfu_reference=None,
    )


def case_compile(size: str, seq_len: int, batch_size: int, repeats: int, peak: float) -> dict:
    """forward+backward of both models under `torch.compile` (default mode); compile time is reported, not timed."""
    config = AlbertConfig.preset(size)
    reference, ours = paired("AlbertModel", config_kwargs(config))
    input_ids = torch.randint(5, config.vocab_size, (batch_size, seq_len))
    attention_mask = torch.ones_like(input_ids)
    compile_seconds = {}

    def compiled_step(model, name):
        compiled = torch.compile(model)

        def run():
            compiled(input_ids, attention_mask=attention_mask).last_hidden_state.pow(2).mean().backward()
            model.zero_grad(set_to_none=True)

        start = time.perf_counter()
        run()  # compiles forward and backward
        compile_seconds[name] = time.perf_counter() - start
        return run

    run_reference, run_ours = compiled_step(reference, "reference"), compiled_step(ours, "ours")
    with torch.no_grad():
        diff = max_diff(reference(input_ids).last_hidden_state, ours(input_ids).last_hidden_state)
    t_ref, t_ours = interleaved_medians(run_reference, run_ours, repeats)
    flops = 3 * batch_size * seq_len * encoder_flops_per_token(config, seq_len)
    return dict(
        case=f"{size} fwd+bwd {batch_size}x{seq_len} torch.compile (compile {compile_seconds['reference']:.0f}"
        f"/{compile_seconds['ours']:.0f} s)",
        reference_s=t_ref,
        ours_s=t_ours,
        max_diff=diff,
        mfu_ours=flops / t_ours / 1e9 / peak,
        mfu_reference=flops / t_ref / 1e9 / peak,
    )


MEMORY_PROBE = """
import sys, torch, transformers, albert_hf
impl, checkpointing, size, seq_len, batch = sys.argv[1], sys.argv[2] == "1", sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
torch.manual_seed(0)
config = albert_hf.AlbertConfig.preset(size)
fields = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
if impl == "transformers":
    model = transformers.AlbertModel(transformers.AlbertConfig(**{f: getattr(config, f) for f in fields}))
else:
    model = albert_hf.AlbertModel(config)
model.train()
if checkpointing:
    model.gradient_checkpointing_enable()
input_ids = torch.randint(5, 30000, (batch, seq_len))

def status_kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))

# getrusage's ru_maxrss survives exec (a child of a large benchmark process starts at the parent's size), so the peak
# is read from this process's own counters: reset the high-water mark (clear_refs 5), then VmHWM after the step.
with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")
before = status_kib("VmRSS")
model(input_ids).last_hidden_state.pow(2).mean().backward()
grad = next(model.encoder.parameters()).grad
print(status_kib("VmHWM") - before, float(grad.double().norm()))
"""


def case_memory(size: str, seq_len: int, batch_size: int) -> list[dict]:
    """Activation memory of one training step at long sequence length, with and without checkpointing (Linux)."""
    results = []
    for impl, checkpointing in (("transformers", False), ("albert_hf", False), ("albert_hf", True)):
        output = subprocess.run(
            [sys.executable, "-c", MEMORY_PROBE, impl, str(int(checkpointing)), size, str(seq_len), str(batch_size)],
            capture_output=True,
            text=True,
            check=True,
            env=os.environ | {"PYTHONPATH": str(REPO)},
        ).stdout.split()
        results.append(
            dict(impl=impl, checkpointing=checkpointing, peak_mib=int(output[0]) / 1024, grad_norm=float(output[1]))
        )
    return results


# ----------------------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------------------


def print_header(peak: float) -> None:
    print(
        f"\nfp32 GEMM peak measured in this run: {peak:.1f} GFLOP/s (best over 2048^3 and the models' own GEMM shapes, "
        f"{torch.get_num_threads()} threads, as the cases run)"
    )
    header = f"{'case':<58} {'transformers s':>14} {'albert_hf s':>12} {'speed-up':>9} {'MFU ours':>9} {'MFU ref':>8} {'max diff':>9}"
    print(header)
    print("-" * len(header), flush=True)


def print_row(row: dict) -> None:
    mfu = (
        f"{row['mfu_ours']:>8.0%} {row['mfu_reference']:>8.0%}" if row["mfu_ours"] is not None else f"{'-':>8} {'-':>8}"
    )
    print(
        f"{row['case']:<58} {row['reference_s']:>14.4f} {row['ours_s']:>12.4f} "
        f"{row['reference_s'] / row['ours_s']:>8.2f}x {mfu} {row['max_diff']:>9.1e}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--cases",
        default="model,pretrain,finetune,inference,tokenize,compile,onnx,memory,bf16",
        help="comma list of: model, pretrain, finetune, inference, tokenize, compile, onnx, memory, bf16",
    )
    parser.add_argument("--sizes", default="base,large")
    parser.add_argument("--seq-lens", default="128,512")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per side; steps vary by ~10%% here")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results.json")
    args = parser.parse_args(argv)
    cases = set(args.cases.split(","))
    sizes, seq_lens = args.sizes.split(","), [int(s) for s in args.seq_lens.split(",")]

    peak = gemm_peak_gflops(shapes=peak_shapes(sizes, seq_lens))
    bf16_peak = None
    if "bf16" in cases:
        bf16_peak = gemm_peak_gflops(torch.bfloat16, size=512, repeats=3)
        print(f"bf16 GEMM rate: {bf16_peak:.1f} GFLOP/s, {bf16_peak / peak:.3f}x the fp32 rate")
        if bf16_peak < peak:
            # Without native bf16 matmul (AVX512-BF16 / AMX) PyTorch runs a reference kernel, hundreds of times
            # slower: a bf16 step of ALBERT-base would take hours. Nothing to learn from timing it.
            print("  bf16 cases skipped: this CPU has no native bf16 matmul (no AVX512-BF16/AMX)")
            cases.discard("bf16")
    rows: list[dict] = []
    print_header(peak)

    def add(row: dict) -> None:  # print as it comes: a long run that stops keeps what it measured
        rows.append(row)
        print_row(row)

    if "model" in cases:
        for size in sizes:
            for seq_len in seq_lens:
                batch = max(1, 1024 // seq_len)  # 8 x 128, 2 x 512: same token count
                for backward in (False, True):
                    add(case_model(size, seq_len, batch, backward, args.repeats, peak, bf16=False))
    if "pretrain" in cases:
        add(case_pretraining_step("base", 8, 128, args.repeats, peak, bf16=False))
    if "bf16" in cases:
        add(case_pretraining_step("base", 8, 128, args.repeats, peak, bf16=True))
        add(case_model("base", 128, 8, True, args.repeats, peak, bf16=True))
    if "finetune" in cases and args.data_dir.is_dir():
        add(case_finetuning(args.data_dir, "base", args.repeats, peak, bf16=False))
    if "inference" in cases and args.data_dir.is_dir():
        add(case_inference(args.data_dir, "base", args.repeats, peak))
    if "tokenize" in cases and args.data_dir.is_dir():
        add(case_tokenization(args.data_dir, args.repeats))
    if "compile" in cases:
        add(case_compile("base", 128, 8, args.repeats, peak))
    if "onnx" in cases:
        import tempfile

        with tempfile.TemporaryDirectory() as workdir:
            add(case_onnx("base", 8, 128, args.repeats, peak, Path(workdir)))

    memory = []
    if "memory" in cases:
        memory = case_memory("base", 512, 4)
        print("\ntraining step memory, base 4x512 (peak RSS growth of a fresh process during forward+backward):")
        for row in memory:
            print(
                f"  {row['impl']:<13} checkpointing={str(row['checkpointing']):<5} {row['peak_mib']:>8.0f} MiB   "
                f"grad norm {row['grad_norm']:.10e}"
            )
    results = dict(gemm_peak_gflops=peak, bf16_gemm_gflops=bf16_peak, cases=rows, memory=memory)
    args.json.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
