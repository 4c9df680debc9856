"""A stand-in for the two `tensorflow` names google-research/albert's `tokenization.py` uses.

The albert-tensorflow wheel (google-research/albert 1.1 on PyPI) ships the original `tokenization.py`. It imports
tensorflow only to log one line (`tf.logging.info`) and to open WordPiece vocabulary files (`tf.gfile.GFile`), neither
of which touches tokenization with a SentencePiece model. `import_google_tokenization` imports that module with this
stand-in in place of tensorflow, so the tests compare against google-research's own code without installing
tensorflow, and without leaving a fake `tensorflow` in `sys.modules` for other libraries to find.
"""

from __future__ import annotations

import importlib
import sys
import types


def _stand_in() -> types.ModuleType:
    module = types.ModuleType("tensorflow", "stand-in for the tensorflow names albert/tokenization.py uses")
    module.logging = types.SimpleNamespace(info=lambda *args, **kwargs: None)
    module.gfile = types.SimpleNamespace(GFile=open)
    return module


def import_google_tokenization() -> types.ModuleType:
    """`albert.tokenization` from the albert-tensorflow wheel (a test dependency), imported with the stand-in."""
    if "albert.tokenization" in sys.modules:
        return sys.modules["albert.tokenization"]
    previous = sys.modules.get("tensorflow")
    sys.modules["tensorflow"] = _stand_in()
    try:
        return importlib.import_module("albert.tokenization")
    except ModuleNotFoundError as error:
        if error.name != "albert":
            raise
        raise ModuleNotFoundError(
            "google-research's ALBERT tokenization is a test dependency: pip install 'albert-tensorflow==1.1'"
        ) from error
    finally:
        if previous is None:
            del sys.modules["tensorflow"]
        else:
            sys.modules["tensorflow"] = previous
