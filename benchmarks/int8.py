"""int8 deployment: file size, CPU latency and dev accuracy of a fine-tuned ALBERT sequence classifier, five ways.

No pretrained ALBERT weights are reachable offline, so the classifier is trained here from scratch (random init, the
albert-30k-clean SentencePiece vocabulary, the architecture of --size) on the SST-2 or MRPC training set, then:

  transformers fp32   the same weights in transformers.AlbertForSequenceClassification (export_to_transformers)
  albert_hf fp32      albert_hf.AlbertForSequenceClassification
  ONNX fp32           albert-hf export (onnxruntime, shared layer stored once)
  ONNX int8           albert-hf export --quantize int8 (onnxruntime dynamic int8: MatMul weights + word embeddings)
  PyTorch int8        torch.ao.quantization.quantize_dynamic over nn.Linear

Latency: median over batches of the dev set (batch 1: the first --latency_examples examples one by one; batch 32:
the whole dev set in batches of 32, padded to the longest of each batch), one intra-op thread for every backend so
that the numbers compare per core on a shared machine. Ratios are against transformers fp32.

    nice -n 15 python benchmarks/int8.py --task sst2 --train_steps 1500
    nice -n 15 python benchmarks/int8.py --task mrpc --train_steps 600
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import albert_hf
from albert_hf import AlbertConfig
from albert_hf.convert import export_to_transformers
from albert_hf.onnx_export import export, load_pytorch_int8
from albert_hf.tokenization import AlbertHFTokenizer

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "data"
if not SHARED.exists():
    SHARED = Path("/work/shared/data")
SIZES = {
    # embedding, hidden, layers, heads, intermediate
    "small": (128, 256, 6, 4, 1024),
    "base": (128, 768, 12, 12, 3072),  # albert-base-v2's shape
}


def read_task(task: str, split: str) -> tuple[list, list[int]]:
    folder = SHARED / "glue" / {"sst2": "SST-2", "mrpc": "MRPC"}[task]
    with open(folder / f"{split}.tsv", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if task == "sst2":
        return [(row["sentence"],) for row in rows], [int(row["label"]) for row in rows]
    return [(row["#1 String"], row["#2 String"]) for row in rows], [int(row["Quality"]) for row in rows]


def encode(tokenizer, texts: list[tuple], max_length: int) -> dict[str, torch.Tensor]:
    columns = list(zip(*texts))
    return tokenizer(
        *columns,
        truncation=True,
        max_length=max_length,
        padding="longest",
        return_tensors="pt",
        return_token_type_ids=True,
    )


def train(task: str, size: str, steps: int, output: Path, tokenizer, max_length: int, seed: int) -> Path:
    """Fine-tune from scratch (AdamW, linear warmup/decay, batch 32) and save; reused when already there."""
    if (output / "config.json").exists():
        return output
    texts, labels = read_task(task, "train")
    embedding, hidden, layers, heads, intermediate = SIZES[size]
    config = AlbertConfig(
        vocab_size=len(tokenizer),
        embedding_size=embedding,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=512,
        num_labels=2,
        pad_token_id=tokenizer.pad_token_id,
        hidden_dropout_prob=0.1,
        classifier_dropout_prob=0.1,
    )
    torch.manual_seed(seed)
    model = albert_hf.AlbertForSequenceClassification(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / (0.1 * steps), max(0.0, (steps - step) / (0.9 * steps)))
    )
    generator = np.random.default_rng(seed)
    order, position, start = generator.permutation(len(texts)), 0, time.perf_counter()
    for step in range(steps):
        if position + 32 > len(order):
            order, position = generator.permutation(len(texts)), 0
        batch = order[position : position + 32]
        position += 32
        inputs = encode(tokenizer, [texts[i] for i in batch], max_length)
        loss = model(**inputs, labels=torch.tensor([labels[i] for i in batch])).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 100 == 0 or step == steps - 1:
            print(f"  step {step}: loss {loss.item():.3f} ({time.perf_counter() - start:.0f} s)", flush=True)
    model.eval().save_pretrained(output)
    tokenizer.save_pretrained(output)
    return output


def onnx_runner(path: Path):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def run(inputs: dict[str, torch.Tensor]) -> np.ndarray:
        return session.run(None, {name: tensor.numpy() for name, tensor in inputs.items()})[0]

    return run


def torch_runner(model):
    model = model.eval()

    def run(inputs: dict[str, torch.Tensor]) -> np.ndarray:
        with torch.inference_mode():
            return model(**inputs).logits.numpy()

    return run


def measure(run, batches: list[dict], labels: list[int], single: list[dict]) -> dict:
    run(batches[0])  # warm-up (graph optimisation, allocation)
    predictions, batch_times = [], []
    for inputs in batches:
        start = time.perf_counter()
        logits = run(inputs)
        batch_times.append(time.perf_counter() - start)
        predictions.extend(logits.argmax(-1).tolist())
    single_times = []
    for inputs in single:
        start = time.perf_counter()
        run(inputs)
        single_times.append(time.perf_counter() - start)
    return {
        "accuracy": 100.0 * float(np.mean(np.array(predictions) == np.array(labels))),
        "batch32_ms": 1000 * statistics.median(batch_times),
        "batch1_ms": 1000 * statistics.median(single_times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=["sst2", "mrpc"], default="sst2")
    parser.add_argument("--size", choices=list(SIZES), default="small")
    parser.add_argument("--train_steps", type=int, default=1500)
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--latency_examples", type=int, default=100)
    parser.add_argument("--workdir", default="/tmp/albert_hf_int8")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)

    tokenizer = AlbertHFTokenizer(vocab_file=str(SHARED / "spiece" / "albert-30k-clean.model"))
    workdir = Path(args.workdir) / f"{args.task}-{args.size}-{args.train_steps}"
    print(f"training {args.size} ALBERT from scratch on {args.task} ({args.train_steps} steps of 32) in {workdir}")
    trained = train(
        args.task, args.size, args.train_steps, workdir / "albert_hf", tokenizer, args.max_length, args.seed
    )
    model = albert_hf.AlbertForSequenceClassification.from_pretrained(trained).eval()
    stock_dir = export_to_transformers(model, workdir / "transformers")
    import transformers

    stock = transformers.AlbertForSequenceClassification.from_pretrained(stock_dir).eval()
    start = time.perf_counter()
    files = export(trained, workdir / "export", quantize="int8")
    print(f"export + quantization: {time.perf_counter() - start:.0f} s")

    texts, labels = read_task(args.task, "dev")
    batches = [encode(tokenizer, texts[i : i + 32], args.max_length) for i in range(0, len(texts), 32)]
    single = [encode(tokenizer, texts[i : i + 1], args.max_length) for i in range(args.latency_examples)]
    candidates = {
        "transformers fp32": (torch_runner(stock), stock_dir / "model.safetensors"),
        "albert_hf fp32": (torch_runner(model), trained / "model.safetensors"),
        "ONNX fp32": (onnx_runner(files["onnx"]), files["onnx"]),
        "ONNX int8": (onnx_runner(files["onnx_int8"]), files["onnx_int8"]),
        "PyTorch int8": (
            torch_runner(
                load_pytorch_int8(albert_hf.AlbertForSequenceClassification, model.config, files["pytorch_int8"])
            ),
            files["pytorch_int8"],
        ),
    }
    rows = {}
    for name, (run, path) in candidates.items():
        rows[name] = {"size_mb": path.stat().st_size / 1e6, **measure(run, batches, labels, single)}
        print(name, rows[name], flush=True)

    reference, fp32_size = rows["transformers fp32"], rows["albert_hf fp32"]["size_mb"]
    print()
    print(
        f"{args.task} dev ({len(labels)} examples), {args.size} ALBERT trained from scratch "
        f"({args.train_steps} steps), 1 thread"
    )
    header = (
        f"{'model':<18} {'file MB':>8} {'x fp32 st':>9} {'b1 ms':>7} {'b1 speedup':>10} {'b32 ms':>8} "
        f"{'b32 speedup':>11} {'dev acc':>8} {'acc - fp32':>10}"
    )
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        print(
            f"{name:<18} {row['size_mb']:>8.2f} {row['size_mb'] / fp32_size:>9.2f} {row['batch1_ms']:>7.2f} "
            f"{reference['batch1_ms'] / row['batch1_ms']:>10.2f} {row['batch32_ms']:>8.1f} "
            f"{reference['batch32_ms'] / row['batch32_ms']:>11.2f} {row['accuracy']:>8.2f} "
            f"{row['accuracy'] - rows['albert_hf fp32']['accuracy']:>+10.2f}"
        )


if __name__ == "__main__":
    main()
