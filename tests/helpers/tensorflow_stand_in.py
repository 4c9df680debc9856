"""google-research/albert's `tokenization.py`, imported with the project's one TensorFlow stand-in.

The albert-tensorflow wheel (google-research/albert 1.1 on PyPI) ships the original `tokenization.py`. It imports
tensorflow only to log one line (`tf.logging.info`) and to open WordPiece vocabulary files (`tf.gfile.GFile`), neither
of which touches tokenization with a SentencePiece model. The stand-in is `benchmarks/tf_standin/tensorflow`, which
benchmarks/pretraining_data.py also runs google-research's BERT pretraining data code with. `import_google_tokenization`
imports that module with the stand-in in place of tensorflow, so the tests compare against google-research's own code
without installing tensorflow, and without leaving a fake `tensorflow` in `sys.modules` for other libraries to find.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

STAND_IN_FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "tf_standin"


def _tensorflow_modules() -> dict[str, types.ModuleType]:
    return {name: module for name, module in sys.modules.items() if name.split(".")[0] == "tensorflow"}


def import_google_tokenization() -> types.ModuleType:
    """`albert.tokenization` from the albert-tensorflow wheel (a test dependency), imported with the stand-in."""
    if "albert.tokenization" in sys.modules:
        return sys.modules["albert.tokenization"]
    previous = _tensorflow_modules()
    for name in previous:
        del sys.modules[name]
    sys.path.insert(0, str(STAND_IN_FOLDER))
    try:
        return importlib.import_module("albert.tokenization")
    except ModuleNotFoundError as error:
        if error.name != "albert":
            raise
        raise ModuleNotFoundError(
            "google-research's ALBERT tokenization is a test dependency: pip install 'albert-tensorflow==1.1'"
        ) from error
    finally:
        sys.path.remove(str(STAND_IN_FOLDER))
        for name in _tensorflow_modules():
            del sys.modules[name]
        sys.modules.update(previous)
