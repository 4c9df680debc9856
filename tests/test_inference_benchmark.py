"""benchmarks/inference.py --smoke: every row of the adaptive-depth benchmark at tiny size, trained by the real
`albert-hf glue --early_exit` job on the SST-2 excerpts."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from helpers.data import REPO_ROOT


def load_benchmark():
    spec = importlib.util.spec_from_file_location("inference_benchmark", REPO_ROOT / "benchmarks" / "inference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_smoke_runs_every_row_and_writes_the_figures(shared_data, tmp_path):
    benchmark = load_benchmark()
    out = tmp_path / "figures.json"
    argv = ["--smoke", "--data", str(shared_data), "--work_dir", str(tmp_path / "work"), "--threads", "1"]
    benchmark.main([*argv, "--json", str(out), "--plot", str(tmp_path / "plot.png")])

    figures = json.loads(out.read_text())
    # Both exit variants were trained by the job's --early_exit and measured against each other.
    for variant, shared in (("per_exit", False), ("shared", True)):
        config = json.loads((tmp_path / "work" / variant / "config.json").read_text())
        assert config["early_exit"] is True and config["early_exit_shared_classifier"] is shared
    assert figures["chosen_variant"] in ("per_exit", "shared")
    rows = {(row["engine"], row["mode"]) for row in figures["rows"]}
    modes = ["full depth", *(f"patience {p}" for p in range(1, 7)), "fixed depth 2", "fixed depth 4"]
    expected = {(engine, mode) for engine in ("PyTorch fp32", "ORT fp32", "ORT int8") for mode in modes}
    expected |= {("transformers fp32", "full depth")}
    expected |= {
        ("DistilBERT (6 layers, random weights)", "speed only"),
        ("BERT (12 layers, random weights)", "speed only"),
    }
    assert rows == expected
    for row in figures["rows"]:
        assert row["b1_ms"] > 0 and row["b32_ms"] > 0
        if row["mode"].startswith("fixed depth"):
            assert row["mean_depth"] == int(row["mode"].rsplit(" ", 1)[1])
    full = next(r for r in figures["rows"] if r == {**r, "engine": "PyTorch fp32", "mode": "full depth"})
    stock = next(r for r in figures["rows"] if r["engine"] == "transformers fp32")
    assert full["accuracy"] == stock["accuracy"]  # same weights, same predictions
    assert set(figures["targets"]["verdicts"].values()) <= {"met", "missed"}
    assert (tmp_path / "plot.png").stat().st_size > 0
