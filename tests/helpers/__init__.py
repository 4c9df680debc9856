"""What the tests share, imported by name (`from helpers.tiny import TINY_CONFIG`): tests/ is on `sys.path` in a pytest
run (tests/ has no `__init__.py`), and the worker scripts that tests start put it there themselves. `conftest.py` holds
only pytest's hooks and fixtures; nothing imports from it.

    data                    where the data lives: the repository's excerpts, the full folder beside the checkout
    tiny                    the tiny ALBERT configs and `--config_overrides` of the model and job tests
    processes               every process a test starts, and its end (the whole tree, on success, failure, timeout)
    optional                optional heavy dependencies: skipped with a reason outside CI, required in CI
    command_line            the real `albert-hf` in a subprocess, and what a one-line user error looks like
    trainer                 the tiny classifier, the killed child, the comparison of a resumed run with its original
    distributed             `torchrun` with two processes, the parity runs' model, batches and engine arguments
    hub                     the tiny model of the Hub and conversion tests, the files a Hub repository holds
    metric_references       GLUE and NER metrics from the textbook formulas and conlleval's chunk rule
    pretraining_reference   the instance creation on token lists, the reference of albert_hf.data.sentence_order
    tokenization_reference  google-research's ALBERT tokenization, every text of the data by source
    tensorflow_stand_in     google-research's tokenization.py imported without TensorFlow
"""
