"""Mutation check: deliberate one-line breaks of the model, the collator, LAMB and the pretraining loop must each make
at least one test fail.

Each mutation is applied to a fresh copy of the repository (never to this checkout), the tests that guard that part
run against the copy, and the table says which of them caught the break. A mutation that no test catches is a test
that proves less than the docs claim.

    python benchmarks/mutation_check.py                 # every mutation
    python benchmarks/mutation_check.py --only tying LAMB   # those whose name contains "tying" or "LAMB"
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # relative to the repository root
    old: str  # must occur exactly once
    new: str
    tests: tuple[str, ...]  # pytest node ids or files that should catch it


MUTATIONS = [
    Mutation(
        "wrong activation (gelu for gelu_new)",
        "albert_hf/modeling.py",
        'FUSED_ACTIVATIONS = {"gelu_new": "gelu_pytorch_tanh"}',
        'FUSED_ACTIVATIONS = {"gelu_new": "gelu"}',
        ("tests/test_modeling.py",),
    ),
    Mutation(
        "no weight tying",
        "albert_hf/modeling.py",
        '_TIED_MLM_KEYS = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight"}',
        "_TIED_MLM_KEYS = {}",
        ("tests/test_modeling.py", "tests/test_overfit.py"),
    ),
    Mutation(
        "n-grams off (max_ngram 1)",
        "albert_hf/data/collator.py",
        "lengths = np.arange(1, self.max_ngram + 1)",
        "lengths = np.arange(1, 2)",
        ("tests/test_collator.py",),
    ),
    Mutation(
        "n-gram probabilities uniform",
        "albert_hf/data/collator.py",
        "self._ngram_probs = (1.0 / lengths) / (1.0 / lengths).sum()",
        "self._ngram_probs = np.ones(len(lengths)) / len(lengths)",
        ("tests/test_collator.py",),
    ),
    Mutation(
        "80/10/10 swapped (10% [MASK], 80% random)",
        "albert_hf/data/collator.py",
        "to_mask = positions[draw < self.mask_replace_prob]",
        "to_mask = positions[draw >= self.mask_replace_prob]",
        ("tests/test_collator.py",),
    ),
    Mutation(
        "LAMB trust ratio removed",
        "albert_hf/training/lamb.py",
        "    return torch.where((weight_norm > 0) & (update_norm > 0), ratio, one)",
        "    return one",
        ("tests/test_lamb.py",),
    ),
    Mutation(
        "loss wiring: MLM loss left out of the total",
        "albert_hf/modeling.py",
        "total_loss = sum(term for term in (mlm_loss, sop_loss) if term is not None)",
        "total_loss = sop_loss if sop_loss is not None else mlm_loss",
        ("tests/test_overfit.py",),
    ),
    Mutation(
        "label alignment: MLM labels shifted by one position",
        "albert_hf/data/collator.py",
        "labels[positions] = input_ids[positions]",
        "labels[positions] = input_ids[np.minimum(positions + 1, len(input_ids) - 1)]",
        ("tests/test_overfit.py",),
    ),
    Mutation(
        "masking: chosen tokens left in place",
        "albert_hf/data/collator.py",
        "masked[to_mask] = self.tokenizer.mask_token_id",
        "masked[to_mask] = input_ids[to_mask]",
        ("tests/test_overfit.py",),
    ),
    Mutation(
        "optimizer step does nothing",
        "albert_hf/training/trainer.py",
        "        return super().create_optimizer(model)",
        "        optimizer = super().create_optimizer(model)\n        optimizer.step = lambda *a, **k: None\n"
        "        return optimizer",
        ("tests/test_overfit.py",),
    ),
]


def copy_repository(destination: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", "runs", ".hypothesis", "build")
    for name in ("albert_hf", "tests", "pyproject.toml"):
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=ignore)
        else:
            shutil.copy2(source, destination / name)


def apply(mutation: Mutation, root: Path) -> None:
    path = root / mutation.path
    text = path.read_text(encoding="utf-8")
    if text.count(mutation.old) != 1:
        raise SystemExit(f"{mutation.name}: the line to break occurs {text.count(mutation.old)} times in {path}")
    path.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")


def run_tests(root: Path, tests: tuple[str, ...]) -> tuple[bool, str]:
    """(caught, first failing test id or the reason)."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", *tests]
    result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    failed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    if result.returncode == 0:
        return False, "all passed"
    return True, failed[0] if failed else f"pytest exit {result.returncode}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", help="run the mutations whose name contains one of these texts")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or any(text in m.name for text in args.only)]
    # Control: the guarding tests must pass on the unbroken copy, or a "caught" below would mean nothing.
    with tempfile.TemporaryDirectory(prefix="mutation-control-") as scratch:
        copy_repository(Path(scratch))
        for tests in dict.fromkeys(m.tests for m in chosen):
            failed, detail = run_tests(Path(scratch), tests)
            if failed:
                raise SystemExit(f"the unbroken copy already fails {' '.join(tests)}: {detail}")
    rows, escaped = [], 0
    for mutation in chosen:
        with tempfile.TemporaryDirectory(prefix="mutation-") as scratch:
            root = Path(scratch)
            copy_repository(root)
            apply(mutation, root)
            start = time.perf_counter()
            caught, detail = run_tests(root, mutation.tests)
            rows.append((mutation.name, "caught" if caught else "NOT CAUGHT", detail, time.perf_counter() - start))
            escaped += not caught
            print(f"{mutation.name}: {rows[-1][1]} ({detail})", flush=True)
    print("\n| mutation | result | first failing test | seconds |\n| --- | --- | --- | ---: |")
    for name, result, detail, seconds in rows:
        print(f"| {name} | {result} | `{detail}` | {seconds:.0f} |")
    return 1 if escaped else 0


if __name__ == "__main__":
    sys.exit(main())
