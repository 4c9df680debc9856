"""Fine-tune ALBERT on SQuAD v1.1 / v2.0: `albert-hf squad`. The job is the script `albert_hf/scripts/squad.py`:
copy it to change the job."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["squad", *sys.argv[1:]]))  # through the error boundary of `albert-hf squad`
