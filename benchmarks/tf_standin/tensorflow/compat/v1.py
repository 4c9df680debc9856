"""`tensorflow.compat.v1` of the stand-in: the same names (see tensorflow/__init__.py)."""

from tensorflow import app, flags, gfile, logging, python_io  # noqa: F401
