"""Pretrain ALBERT (MLM + SOP, LAMB); see `albert_hf.pretraining.run` (same as `albert-hf pretrain`)."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["pretrain", *sys.argv[1:]]))  # through the error boundary of `albert-hf pretrain`
