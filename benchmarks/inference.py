"""ALBERT fast at inference: adaptive depth (early exit), ONNX Runtime and int8, side by side on SST-2.

A 12-layer ALBERT (the base depth, width 128 so that it trains on 2 CPU cores) is fine-tuned FROM SCRATCH on SST-2
with exit classifiers (`albert-hf glue --early_exit`): no pretrained ALBERT is reachable offline, so the accuracies
are those of a small model trained from random weights, not of ALBERT-base. Two variants are trained, one classifier
per exit and one classifier shared by every exit, and the better on dev is measured. Then, in one run, SST-2 dev
accuracy and latency at batch 1 and batch 32 (median over the dev set's batches; threads stated) for:

    transformers' AlbertForSequenceClassification fp32 (the same weights, through albert_hf.convert)
    albert_hf full depth, patience 1..6, fixed depths  (PyTorch fp32, ONNX Runtime fp32, ONNX Runtime int8)
    transformers' DistilBERT (6 layers) and BERT (12 layers) at the same width, random weights: speed only

    PYTHONPATH=. python benchmarks/inference.py [--json out.json] [--plot docs/inference_tradeoff.png]
    PYTHONPATH=. python benchmarks/inference.py --smoke      # every row at tiny size, seconds

`--stage train` only trains (into --work_dir), `--stage measure` measures models trained there earlier.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO.parent / "shared" / "data"))

FULL = dict(
    width="embedding_size=128,hidden_size=128,num_attention_heads=2,intermediate_size=512,num_hidden_layers=12",
    max_train_samples=30000,
    max_eval_samples=None,
    max_seq_length=64,
    epochs=1.0,
    learning_rate=5e-4,
    patiences=(1, 2, 3, 4, 5, 6),
    depths=(2, 3, 4, 6, 8),
)
SMOKE = dict(
    width="embedding_size=16,hidden_size=16,num_attention_heads=2,intermediate_size=32,num_hidden_layers=12",
    max_train_samples=64,
    max_eval_samples=40,
    max_seq_length=32,
    epochs=1.0,
    learning_rate=1e-3,
    patiences=(1, 2, 3, 4, 5, 6),
    depths=(2, 4),
)
VARIANTS = {"per_exit": [], "shared": ["--early_exit_shared_classifier"]}


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="every row at tiny size (seconds)")
    parser.add_argument("--stage", choices=("all", "train", "measure"), default="all")
    parser.add_argument("--variant", choices=sorted(VARIANTS), help="--stage train: only this variant")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="the shared data folder (glue/SST-2, spiece/)")
    parser.add_argument("--work_dir", default=None, help="trained models (default: a temporary folder)")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (default: torch's)")
    parser.add_argument("--json", default=None, help="write the table's figures here")
    parser.add_argument("--plot", default=None, help="save the accuracy-vs-latency plot here (png)")
    return parser.parse_args(argv)


def train(variant: str, settings: dict, data: str, output_dir: Path) -> None:
    """`albert-hf glue --early_exit` on SST-2 from scratch (the real job)."""
    from albert_hf.scripts.glue import main

    argv = [
        "--task_name", "sst2",
        "--data_dir", os.path.join(data, "glue", "SST-2"),
        "--tokenizer_name_or_path", os.path.join(data, "spiece", "albert-30k-clean.model"),
        "--config_overrides", settings["width"],
        "--early_exit", *VARIANTS[variant],
        "--do_train", "--do_eval",
        "--max_train_samples", str(settings["max_train_samples"]),
        "--num_train_epochs", str(settings["epochs"]),
        "--learning_rate", str(settings["learning_rate"]),
        "--warmup_steps", "0.1",
        "--per_device_train_batch_size", "32",
        "--per_device_eval_batch_size", "128",
        "--max_seq_length", str(settings["max_seq_length"]),
        "--train_sampling_strategy", "group_by_length",
        "--save_strategy", "no",
        "--report_to", "none",
        "--logging_steps", "100",
        "--disable_tqdm", "true",
        "--output_dir", str(output_dir),
        "--overwrite_output_dir",
        "--seed", "0",
    ]  # fmt: skip
    if settings["max_eval_samples"]:
        argv += ["--max_eval_samples", str(settings["max_eval_samples"])]
    main(argv)


# ---- data and models -------------------------------------------------------------------------------------------------


def dev_batches(model_dir: Path, data: str, settings: dict, batch_size: int) -> tuple[list[dict], np.ndarray]:
    """SST-2 dev in consecutive batches (padded to each batch's longest), tokenized as the job does; and the labels."""
    from albert_hf.data.glue_files import GLUE_TASKS, load_glue_tsv
    from albert_hf.tokenization import AlbertHFTokenizer

    dev = load_glue_tsv(os.path.join(data, "glue", "SST-2"), GLUE_TASKS["sst2"], ["validation"])["validation"]
    if settings["max_eval_samples"]:
        dev = dev.select(range(settings["max_eval_samples"]))
    tokenizer = AlbertHFTokenizer.from_pretrained(model_dir)
    sentences, labels = list(dev["sentence1"]), np.asarray(dev["label"])
    batches = []
    for start in range(0, len(sentences), batch_size):
        encoded = tokenizer(
            sentences[start : start + batch_size],
            padding=True,
            truncation=True,
            max_length=settings["max_seq_length"],
            return_tensors="pt",
            return_token_type_ids=True,
        )
        batches.append({key: encoded[key] for key in ("input_ids", "attention_mask", "token_type_ids")})
    return batches, labels


def transformers_twin(model):
    """transformers' AlbertForSequenceClassification with the same weights (its last exit is the usual classifier)."""
    import transformers

    from albert_hf.convert import to_transformers_config

    config = model.config.to_dict()
    stock_config = to_transformers_config(
        type(model.config)(**{**config, "early_exit": False, "early_exit_shared_classifier": False})
    )
    stock_config._attn_implementation = model.config._attn_implementation
    twin = transformers.AlbertForSequenceClassification(stock_config)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("exit_classifiers.")}
    twin.load_state_dict(state, strict=True)
    return twin.eval()


def random_baselines(config, num_labels: int = 2) -> dict:
    """transformers' DistilBERT (6 layers) and BERT (12 layers) at the ALBERT's width: speed only."""
    import transformers

    common = dict(vocab_size=config.vocab_size, max_position_embeddings=config.max_position_embeddings)
    distil = transformers.DistilBertConfig(
        dim=config.hidden_size,
        hidden_dim=config.intermediate_size,
        n_layers=6,
        n_heads=config.num_attention_heads,
        num_labels=num_labels,
        **common,
    )
    bert = transformers.BertConfig(
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=12,
        num_attention_heads=config.num_attention_heads,
        num_labels=num_labels,
        **common,
    )
    torch.manual_seed(0)
    return {
        "DistilBERT (6 layers, random weights)": transformers.DistilBertForSequenceClassification(distil).eval(),
        "BERT (12 layers, random weights)": transformers.BertForSequenceClassification(bert).eval(),
    }


# ---- timing -------------------------------------------------------------------------------------------------------


@dataclass
class Run:
    """Predictions (all dev examples, in order), exit depths, and the median latency of one call, in ms."""

    predictions: np.ndarray
    depths: np.ndarray
    median_ms: float


def timed(call, batches: list[dict]) -> Run:
    """`call(batch) -> (logits, depths or None)` over every batch (after one warm-up call): predictions and the
    median wall time of a call."""
    call(batches[0])
    times, predictions, depths = [], [], []
    for batch in batches:
        start = time.perf_counter()
        logits, depth = call(batch)
        times.append((time.perf_counter() - start) * 1000)
        predictions.append(np.asarray(logits).argmax(-1))
        size = len(batch["input_ids"])
        depths.append(np.full(size, -1) if depth is None else np.asarray(depth))
    return Run(np.concatenate(predictions), np.concatenate(depths), statistics.median(times))


def torch_call(model, **settings):
    """A call of an albert_hf model with the given config settings (patience, depth) for this run."""

    def call(batch):
        with torch.inference_mode():
            output = model(**batch)
        return output.logits.numpy(), getattr(output, "exit_layers", None)

    def configured(batch):
        saved = {name: getattr(model.config, name) for name in settings}
        for name, value in settings.items():
            setattr(model.config, name, value)
        try:
            return call(batch)
        finally:
            for name, value in saved.items():
                setattr(model.config, name, value)

    return configured if settings else call


def onnx_call(runner, patience: int, num_layers: int | None):
    def call(batch):
        feed = {key: value.numpy() for key, value in batch.items()}
        return runner(**feed, patience=patience, num_layers=num_layers)

    return call


# ---- the measurement ----------------------------------------------------------------------------------------------


def modes(settings: dict, num_layers: int) -> list[tuple[str, int, int | None]]:
    """(name, patience, fixed depth) of every albert_hf row."""
    rows = [("full depth", 0, None)]
    rows += [(f"patience {p}", p, None) for p in settings["patiences"]]
    rows += [(f"fixed depth {d}", 0, d) for d in settings["depths"] if d < num_layers]
    return rows


def choose_keep_fp32(folder: Path, config, batches: list[dict], labels: np.ndarray, threads: int) -> tuple:
    """Which shared-layer matrices stay fp32 in int8: the fewest whose int8 dev accuracy at every depth stays within
    1 point of fp32's. Returns (kept modules, per-candidate table of accuracy and max logit error per depth)."""
    from albert_hf.onnx_export import OnnxExitModel, layer_quantization_error, quantize_exit_onnx

    fp32 = OnnxExitModel(folder, config, threads=threads)
    depths = range(1, config.num_layer_applications + 1)
    reference = {d: timed(onnx_call(fp32, 0, d), batches).predictions for d in depths}
    reference_accuracy = {d: float((reference[d] == labels).mean()) for d in depths}
    report, chosen = {}, None
    for keep in ((), ("ffn_output",), ("ffn", "ffn_output")):
        quantize_exit_onnx(folder, keep_fp32=keep)
        int8 = OnnxExitModel(folder, config, int8=True, threads=threads)
        accuracy = {d: float((timed(onnx_call(int8, 0, d), batches).predictions == labels).mean()) for d in depths}
        errors = layer_quantization_error(fp32, int8, batches[:4])
        report[",".join(keep) or "none"] = {"accuracy": accuracy, "max_logit_error": errors}
        if chosen is None and all(accuracy[d] >= reference_accuracy[d] - 0.01 for d in depths):
            chosen = keep
            break
    chosen = ("ffn", "ffn_output") if chosen is None else chosen
    quantize_exit_onnx(folder, keep_fp32=chosen)
    return chosen, {"fp32_accuracy": reference_accuracy, "candidates": report}


def measure(args: argparse.Namespace, settings: dict, work_dir: Path) -> dict:
    from albert_hf import AlbertForSequenceClassification
    from albert_hf.onnx_export import OnnxExitModel, export_exit_onnx

    threads = torch.get_num_threads()
    load_before = os.getloadavg()
    variants = {}
    for variant in VARIANTS:
        results = json.loads((work_dir / variant / "eval_results.json").read_text())
        minutes = (work_dir / variant / "train_minutes.txt").read_text().strip()
        variants[variant] = {"dev_accuracy_full_depth": results["eval_accuracy"], "train_minutes": float(minutes)}
    chosen = max(VARIANTS, key=lambda v: variants[v]["dev_accuracy_full_depth"])
    model_dir = work_dir / chosen
    model = AlbertForSequenceClassification.from_pretrained(model_dir).eval()
    config = model.config
    num_layers = config.num_layer_applications
    batches = {size: dev_batches(model_dir, args.data, settings, size) for size in (1, 32)}
    labels = batches[32][1]

    onnx_dir = work_dir / "onnx"
    export_exit_onnx(model, onnx_dir)
    keep_fp32, quantization = choose_keep_fp32(onnx_dir, config, batches[32][0], labels, threads)
    runners = {
        "ORT fp32": OnnxExitModel(onnx_dir, config, threads=threads),
        "ORT int8": OnnxExitModel(onnx_dir, config, int8=True, threads=threads),
    }

    rows = []

    def add(engine: str, mode: str, call, accuracy: bool = True):
        runs = {size: timed(call, batches[size][0]) for size in (1, 32)}
        row = {"engine": engine, "mode": mode, "b1_ms": runs[1].median_ms, "b32_ms": runs[32].median_ms}
        if accuracy:
            row["accuracy"] = float((runs[32].predictions == labels).mean())
            depths = runs[32].depths
            row["mean_depth"] = float(depths.mean()) if (depths >= 0).all() else float(num_layers)
        rows.append(row)
        print(json.dumps(row), flush=True)

    add("transformers fp32", "full depth", torch_call(transformers_twin(model)))
    for name, patience, depth in modes(settings, num_layers):
        add("PyTorch fp32", name, torch_call(model, early_exit_patience=patience, num_layers_at_inference=depth))
        for engine, runner in runners.items():
            add(engine, name, onnx_call(runner, patience, depth))
    for name, baseline in random_baselines(config).items():
        add(name, "speed only", torch_call(baseline), accuracy=False)

    result = {
        "settings": {k: v for k, v in settings.items()},
        "threads": threads,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "variants": variants,
        "chosen_variant": chosen,
        "int8_keep_fp32": list(keep_fp32),
        "quantization": quantization,
        "rows": rows,
    }
    result["targets"] = targets(rows)
    print_report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(rows, args.plot)
    return result


def find(rows: list[dict], engine: str, mode: str) -> dict:
    return next(row for row in rows if row["engine"] == engine and row["mode"] == mode)


def targets(rows: list[dict]) -> dict:
    """The issue's targets at the operating point: the fastest PyTorch fp32 mode (batch 1) within 1 point of full
    depth's accuracy."""
    full = find(rows, "PyTorch fp32", "full depth")
    candidates = [row for row in rows if row["engine"] == "PyTorch fp32" and row["accuracy"] >= full["accuracy"] - 0.01]
    point = min(candidates, key=lambda row: row["b1_ms"])
    stock = find(rows, "transformers fp32", "full depth")
    int8 = find(rows, "ORT int8", point["mode"])
    distil = next(row for row in rows if row["engine"].startswith("DistilBERT"))
    checks = {
        "operating point": point["mode"],
        "PyTorch fp32 b1 speed-up over full depth (>= 2)": full["b1_ms"] / point["b1_ms"],
        "PyTorch fp32 b32 speed-up over full depth (>= 2)": full["b32_ms"] / point["b32_ms"],
        "ORT int8 b1 speed-up over transformers fp32 (>= 4)": stock["b1_ms"] / int8["b1_ms"],
        "ORT int8 b32 speed-up over transformers fp32 (>= 3)": stock["b32_ms"] / int8["b32_ms"],
        "ORT int8 accuracy minus full depth (>= -0.01)": int8["accuracy"] - full["accuracy"],
        "DistilBERT b1 ms / PyTorch exits b1 ms (>= 1)": distil["b1_ms"] / point["b1_ms"],
        "DistilBERT b32 ms / PyTorch exits b32 ms (>= 1)": distil["b32_ms"] / point["b32_ms"],
    }
    thresholds = [2, 2, 4, 3, -0.01, 1, 1]
    verdicts = {
        name: "met" if value >= low else "missed" for (name, value), low in zip(list(checks.items())[1:], thresholds)
    }
    return {"figures": checks, "verdicts": verdicts}


def print_report(result: dict) -> None:
    rows = result["rows"]
    full = find(rows, "PyTorch fp32", "full depth")
    stock = find(rows, "transformers fp32", "full depth")
    print(
        f"\nthreads: {result['threads']}; load average before {result['load_average_before']}, after "
        f"{result['load_average_after']}"
    )
    for name, figures in result["variants"].items():
        print(
            f"variant {name}: full-depth dev accuracy {figures['dev_accuracy_full_depth']:.4f}, "
            f"trained in {figures['train_minutes']} min"
        )
    print(f"measured: {result['chosen_variant']}; int8 keeps fp32: {result['int8_keep_fp32'] or 'nothing'}\n")
    print(
        "| engine | mode | SST-2 dev acc | mean exit layer | b1 median ms | b32 median ms | b1 x vs full | "
        "b32 x vs full | b1 x vs transformers | b32 x vs transformers |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        accuracy = f"{row['accuracy']:.4f}" if "accuracy" in row else "-"
        depth = f"{row['mean_depth']:.2f}" if "mean_depth" in row else "-"
        print(
            f"| {row['engine']} | {row['mode']} | {accuracy} | {depth} | {row['b1_ms']:.2f} | {row['b32_ms']:.2f} | "
            f"{full['b1_ms'] / row['b1_ms']:.2f} | {full['b32_ms'] / row['b32_ms']:.2f} | "
            f"{stock['b1_ms'] / row['b1_ms']:.2f} | {stock['b32_ms'] / row['b32_ms']:.2f} |"
        )
    print("\n| target | figure | verdict |\n|---|---|---|")
    figures, verdicts = result["targets"]["figures"], result["targets"]["verdicts"]
    print(f"| operating point | {figures['operating point']} | |")
    for name, verdict in verdicts.items():
        print(f"| {name} | {figures[name]:.3f} | {verdict} |")


def plot(rows: list[dict], path: str) -> None:
    """SST-2 dev accuracy against batch-1 latency, one series per engine; DistilBERT/BERT latency as vertical lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for axis, key, title in zip(axes, ("b1_ms", "b32_ms"), ("batch 1", "batch 32")):
        for engine in ("PyTorch fp32", "ORT fp32", "ORT int8", "transformers fp32"):
            points = [row for row in rows if row["engine"] == engine]
            axis.plot([r[key] for r in points], [r["accuracy"] for r in points], "o", label=engine)
        for row in rows:
            if "accuracy" not in row:
                axis.axvline(row[key], linestyle="--", color="grey")
                axis.annotate(row["engine"].split(" ")[0], (row[key], axis.get_ylim()[0]), rotation=90, fontsize=8)
        axis.set_xscale("log")
        axis.set_xlabel(f"median latency per call, {title} (ms, log)")
        axis.set_ylabel("SST-2 dev accuracy")
        axis.set_title(title)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv=None) -> dict:
    args = parse_arguments(argv)
    settings = SMOKE if args.smoke else FULL
    if args.threads:
        torch.set_num_threads(args.threads)
    work_dir = Path(args.work_dir or __import__("tempfile").mkdtemp(prefix="inference_bench_"))
    if args.stage in ("all", "train"):
        for variant in [args.variant] if args.variant else VARIANTS:
            start = time.perf_counter()
            train(variant, settings, args.data, work_dir / variant)
            minutes = (time.perf_counter() - start) / 60
            (work_dir / variant / "train_minutes.txt").write_text(f"{minutes:.1f}\n")
    if args.stage == "train":
        return {}
    return measure(args, settings, work_dir)


if __name__ == "__main__":
    main()
