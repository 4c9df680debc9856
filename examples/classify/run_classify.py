"""Fine-tune ALBERT to classify the texts of any labelled table; see `albert_hf.tasks.classify` (same as
`albert-hf classify`)."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["classify", *sys.argv[1:]]))  # through the error boundary of `albert-hf classify`
