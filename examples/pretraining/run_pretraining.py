"""Pretrain ALBERT (MLM + SOP, LAMB): `albert-hf pretrain`. The job is the script `albert_hf/scripts/pretrain.py`:
copy it to change the job."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["pretrain", *sys.argv[1:]]))  # through the error boundary of `albert-hf pretrain`
