"""Fine-tune ALBERT on CoNLL-2003 NER; see `albert_hf.tasks.ner` (same as `albert-hf ner`)."""

import sys

from albert_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["ner", *sys.argv[1:]]))  # through the error boundary of `albert-hf ner`
