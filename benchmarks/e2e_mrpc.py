"""End-to-end: one epoch of MRPC through albert_hf's run_glue and through transformers' own example recipe.

    python benchmarks/e2e_mrpc.py                           # ALBERT-base shape, the whole epoch (long on 2 cores)
    python benchmarks/e2e_mrpc.py --config_overrides hidden_size=256,num_attention_heads=4,intermediate_size=1024

Both runs start from the same weights (a checkpoint written by transformers' AlbertForSequenceClassification in the
official layout; no pretrained weights are reachable offline, so accuracy is that of a model trained from scratch) with
the same seed and the paper's MRPC settings (lr 2e-5, global batch 32, linear schedule, 25% warm-up as in 200/800
steps of Table 14), for one epoch:

  * transformers' recipe (examples/pytorch/text-classification/run_glue.py): every input padded to max_seq_length 128,
    transformers.AlbertForSequenceClassification, Trainer with the default collator;
  * albert_hf: `albert_hf.scripts.glue.main` (the code of `albert-hf glue` / examples/glue/run_glue.py) with dynamic
    padding and length-grouped batches.

Prints wall time, dev accuracy and F1 for each, and the speed-up.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from datasets import Dataset

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("ALBERT_HF_SHARED_DATA", REPO.parent / "shared" / "data"))
PAPER = dict(learning_rate=2e-5, batch_size=32, warmup_fraction=0.25, seed=42)


def warmup_steps(num_examples: int) -> int:
    """25% of one epoch's steps, as 200 of Table 14's 800 MRPC steps."""
    return round(PAPER["warmup_fraction"] * -(-num_examples // PAPER["batch_size"]))


def read_mrpc(path: Path) -> Dataset:
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    return Dataset.from_dict(
        {"label": [int(r[0]) for r in rows], "sentence1": [r[3] for r in rows], "sentence2": [r[4] for r in rows]}
    )


def accuracy_and_f1(predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import f1_score

    return {"accuracy": float((predictions == labels).mean()), "f1": float(f1_score(labels, predictions))}


def transformers_recipe(checkpoint: Path, spiece: Path, data_dir: Path, output_dir: Path, max_train: int | None):
    """What transformers' run_glue.py does for ALBERT with its defaults: pad_to_max_length, max_seq_length 128."""
    tokenizer = transformers.AlbertTokenizer(vocab_file=str(spiece))
    train, dev = read_mrpc(data_dir / "train.tsv"), read_mrpc(data_dir / "dev.tsv")
    if max_train:
        train = train.select(range(max_train))

    def encode(batch):
        return tokenizer(
            batch["sentence1"],
            batch["sentence2"],
            padding="max_length",
            max_length=128,
            truncation=True,
            return_token_type_ids=True,
        )

    train = train.map(encode, batched=True, remove_columns=["sentence1", "sentence2"])
    dev = dev.map(encode, batched=True, remove_columns=["sentence1", "sentence2"])
    model = transformers.AlbertForSequenceClassification.from_pretrained(checkpoint)
    args = transformers.TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=PAPER["batch_size"],
        per_device_eval_batch_size=64,
        learning_rate=PAPER["learning_rate"],
        warmup_steps=warmup_steps(len(train)),
        num_train_epochs=1,
        seed=PAPER["seed"],
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=50,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=dev,
        compute_metrics=lambda p: accuracy_and_f1(p.predictions.argmax(-1), p.label_ids),
    )
    start = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - start
    metrics = trainer.evaluate()
    return train_seconds, {"accuracy": metrics["eval_accuracy"], "f1": metrics["eval_f1"]}


def albert_hf_recipe(checkpoint: Path, spiece: Path, data_dir: Path, output_dir: Path, max_train: int | None):
    from albert_hf.scripts import glue

    argv = [
        "--task_name",
        "mrpc",
        "--data_dir",
        str(data_dir),
        "--model_name_or_path",
        str(checkpoint),
        "--tokenizer_name_or_path",
        str(spiece),
        "--output_dir",
        str(output_dir),
        "--do_train",
        "--do_eval",
        "--max_seq_length",
        "128",
        "--per_device_train_batch_size",
        str(PAPER["batch_size"]),
        "--per_device_eval_batch_size",
        "64",
        "--learning_rate",
        str(PAPER["learning_rate"]),
        "--warmup_steps",
        str(warmup_steps(max_train or 3668)),
        "--num_train_epochs",
        "1",
        "--seed",
        str(PAPER["seed"]),
        "--use_cpu",
        "--report_to",
        "none",
        "--save_strategy",
        "no",
        "--logging_steps",
        "50",
        "--disable_tqdm",
        "true",
        "--train_sampling_strategy",
        "group_by_length",
    ]
    if max_train:
        argv += ["--max_train_samples", str(max_train)]
    start = time.perf_counter()
    glue.main(argv)
    elapsed = time.perf_counter() - start
    metrics = json.loads((output_dir / "eval_results.json").read_text())
    train_seconds = json.loads((output_dir / "train_results.json").read_text()).get("train_runtime", elapsed)
    return train_seconds, {"accuracy": metrics["eval_accuracy"], "f1": metrics.get("eval_f1", float("nan"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--preset", default="base-v2")
    parser.add_argument("--config_overrides", default="", help="e.g. hidden_size=256,num_attention_heads=4")
    parser.add_argument("--max_train_samples", type=int, default=None)
    args = parser.parse_args()

    from albert_hf import AlbertConfig
    from albert_hf.argument_parsing import parse_config_overrides

    config = AlbertConfig.preset(args.preset, **parse_config_overrides(args.config_overrides))
    spiece = args.data_dir / "spiece" / "albert-30k-clean.model"
    mrpc = args.data_dir / "glue" / "MRPC"
    with tempfile.TemporaryDirectory() as workdir:
        workdir = Path(workdir)
        torch.manual_seed(PAPER["seed"])
        fields = {k: v for k, v in config.to_diff_dict().items() if k not in ("model_type", "sharing", "auto_map")}
        reference_config = transformers.AlbertConfig(**fields)
        transformers.AlbertForSequenceClassification(reference_config).save_pretrained(workdir / "init")

        ref_seconds, ref_metrics = transformers_recipe(
            workdir / "init", spiece, mrpc, workdir / "ref", args.max_train_samples
        )
        ours_seconds, ours_metrics = albert_hf_recipe(
            workdir / "init", spiece, mrpc, workdir / "ours", args.max_train_samples
        )

    print(
        f"\nMRPC, one epoch, {args.preset} {args.config_overrides or ''} from the same initial weights, seed {PAPER['seed']}"
    )
    print(f"{'recipe':<46} {'train s':>9} {'dev acc':>8} {'dev F1':>7}")
    print(
        f"{'transformers run_glue (pad to 128)':<46} {ref_seconds:>9.1f} {ref_metrics['accuracy']:>8.4f} "
        f"{ref_metrics['f1']:>7.4f}"
    )
    print(
        f"{'albert_hf glue (dynamic padding, length groups)':<46} {ours_seconds:>9.1f} {ours_metrics['accuracy']:>8.4f} "
        f"{ours_metrics['f1']:>7.4f}"
    )
    print(f"speed-up: {ref_seconds / ours_seconds:.2f}x")


if __name__ == "__main__":
    main()
