"""Fine-tune ALBERT to classify the texts of any labelled table: `albert-hf classify`. The job is the script
`albert_hf/scripts/classify.py`: copy it to change the job."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["classify", *sys.argv[1:]]))  # through the error boundary of `albert-hf classify`
