"""ALBERT pretraining (MLM + SOP): arguments and recipes (arguments.py), documents -> instances (data.py), the
Trainer (trainer.py), one builder of a run behind `albert-hf pretrain` and `albert-hf quickstart` (run.py), and the
baselines, plot and report of the quickstart (report.py)."""
