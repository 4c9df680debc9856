"""Fine-tune ALBERT on a GLUE task: `albert-hf glue`. The job is the script `albert_hf/scripts/glue.py`: copy it to
change the job."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["glue", *sys.argv[1:]]))  # through the error boundary of `albert-hf glue`
