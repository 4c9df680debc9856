"""Fine-tune ALBERT on SWAG- or RACE-style multiple choice; see `albert_hf.tasks.multiple_choice`."""

import sys

from albert_hf.tasks.multiple_choice import main

if __name__ == "__main__":
    sys.exit(main())
