"""Pretrain ALBERT (MLM + SOP, LAMB); see `albert_hf.tasks.pretraining` (same as `albert-hf pretrain`)."""

import sys

from albert_hf.tasks.pretraining import main

if __name__ == "__main__":
    sys.exit(main())
