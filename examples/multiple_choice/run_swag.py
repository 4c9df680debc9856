"""Fine-tune ALBERT on SWAG- or RACE-style multiple choice; see `albert_hf.tasks.multiple_choice`."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["multiple-choice", *sys.argv[1:]]))  # through the error boundary of `albert-hf multiple-choice`
