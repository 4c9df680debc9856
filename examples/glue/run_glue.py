"""Fine-tune ALBERT on a GLUE task; see `albert_hf.tasks.glue` (same as `albert-hf glue`)."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["glue", *sys.argv[1:]]))  # through the error boundary of `albert-hf glue`
