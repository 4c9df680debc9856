"""Fine-tune ALBERT on SWAG- or RACE-style multiple choice: `albert-hf multiple-choice`. The job is the script
`albert_hf/scripts/multiple_choice.py`: copy it to change the job."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["multiple-choice", *sys.argv[1:]]))  # through the error boundary of `albert-hf multiple-choice`
