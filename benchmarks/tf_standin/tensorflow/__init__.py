"""A stand-in for the few `tensorflow` names that google-research's BERT `create_pretraining_data.py` and ALBERT's
`tokenization.py` use (flags, logging, file access, the TFRecord writer), so that their instance creation can be run
and measured as published without installing TensorFlow. The project's one stand-in: benchmarks/pretraining_data.py
puts this folder first on sys.path of the subprocess that runs the original pipeline, and
tests/helpers/tensorflow_stand_in.py imports ALBERT's `tokenization.py` with it (and removes it again). Nothing here
changes what their algorithm computes: files are read with `open`, logging goes to Python's logging.
"""

import glob as _glob
import logging as _logging
import sys as _sys


class _Flags:
    """tf.flags: DEFINE_* record defaults on FLAGS; nothing is parsed (the benchmark calls functions directly)."""

    class _Values:
        pass

    FLAGS = _Values()

    def _define(self, name, default, help_=None, *args, **kwargs):
        setattr(self.FLAGS, name, default)

    DEFINE_string = DEFINE_bool = DEFINE_boolean = DEFINE_integer = DEFINE_float = DEFINE_enum = _define

    def mark_flag_as_required(self, name):
        pass


flags = _Flags()


class _Logging:
    DEBUG, INFO, WARN, ERROR = _logging.DEBUG, _logging.INFO, _logging.WARNING, _logging.ERROR
    _logger = _logging.getLogger("tensorflow")

    def set_verbosity(self, level):
        self._logger.setLevel(level)

    def info(self, *args):
        self._logger.info(*args)

    def warning(self, *args):
        self._logger.warning(*args)

    warn = warning


logging = _Logging()


class _Gfile:
    @staticmethod
    def GFile(path, mode="r"):  # noqa: N802 - TensorFlow's name
        return open(path, mode, encoding=None if "b" in mode else "utf-8")

    Open = GFile

    @staticmethod
    def Glob(pattern):  # noqa: N802
        return sorted(_glob.glob(pattern))


gfile = _Gfile()


class _PythonIO:
    class TFRecordWriter:
        """Not used by the benchmark (it times create_training_instances, not the TFRecord serialisation)."""

        def __init__(self, path):
            raise NotImplementedError("the TensorFlow stand-in does not write TFRecords")


python_io = _PythonIO()


class _App:
    @staticmethod
    def run(main=None, argv=None):
        _sys.exit(main(argv or _sys.argv))


app = _App()
