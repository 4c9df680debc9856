"""Optional heavy dependencies of some tests (DeepSpeed, ONNX Runtime, sentence-transformers): skipped with a reason where they are not
installed, never in CI.

A test that needs one says so with the `needs` marker, on the test, on one parameter (`pytest.param("zero2",
marks=pytest.mark.needs("deepspeed"))`) or on the module (`pytestmark`); conftest.py checks it before the test runs.
Outside CI a missing module skips the test with the `pip install` that brings it. In CI (`ALBERT_HF_CI=1`, set by
.ci/run, or the `CI` variable CI services set) the same test fails instead: the test extras install every one of these,
so a missing module there is a broken install, never a reason to run less.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

# Module -> the extra of albert_hf that installs it (all are in the `test` extra too).
EXTRAS = {
    "deepspeed": "deepspeed",
    "onnx": "onnx",
    "onnxruntime": "onnx",
    "onnxscript": "onnx",
    "sentence_transformers": "sentence-transformers",
}


def in_ci() -> bool:
    return any(os.environ.get(name, "").lower() not in ("", "0", "false") for name in ("ALBERT_HF_CI", "CI"))


def missing(modules) -> list[str]:
    return [module for module in modules if not _installed(module)]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None in sys.modules
        return False


def check(item: pytest.Item) -> None:
    """Skip (outside CI) or fail (in CI) `item` when a module its `needs` markers name is not installed."""
    wanted = [module for marker in item.iter_markers("needs") for module in marker.args]
    absent = missing(wanted)
    if not absent:
        return
    install = " ".join(sorted({f'"albert_hf[{EXTRAS.get(module, "test")}]"' for module in absent}))
    if in_ci():
        pytest.fail(
            f"{', '.join(absent)} not installed in CI, where every optional dependency is: pip install {install}"
        )
    pytest.skip(f"{', '.join(absent)} not installed (pip install {install}); CI runs this test")


# The engines of the multi-process tests that run on an optional dependency.
ENGINE_NEEDS = {engine: ("deepspeed",) for engine in ("zero1", "zero2", "zero3", "zero3_persistent", "zero3_offload")}


def engines(*names: str) -> list:
    """`names` as a test's parameters, each engine marked with the modules it runs on
    (`@pytest.mark.parametrize("engine", engines("ddp", "zero2", "zero3"))`)."""
    return [
        pytest.param(name, marks=pytest.mark.needs(*ENGINE_NEEDS[name])) if name in ENGINE_NEEDS else name
        for name in names
    ]
