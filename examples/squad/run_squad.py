"""Fine-tune ALBERT on SQuAD v1.1 / v2.0; see `albert_hf.tasks.squad` (same as `albert-hf squad`)."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["squad", *sys.argv[1:]]))  # through the error boundary of `albert-hf squad`
