"""Fine-tune ALBERT on CoNLL-2003 NER; see `albert_hf.tasks.ner` (same as `albert-hf ner`)."""

import sys

from albert_hf.tasks.ner import main

if __name__ == "__main__":
    sys.exit(main())
