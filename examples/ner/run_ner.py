"""Fine-tune ALBERT on CoNLL-2003 NER: `albert-hf ner`. The job is the script `albert_hf/scripts/ner.py`: copy it to
change the job."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["ner", *sys.argv[1:]]))  # through the error boundary of `albert-hf ner`
