"""The frequency baseline of an `albert-hf pretrain` run's held-out MLM accuracy: the accuracy of always predicting
the most frequent masked token, on exactly the masks the run evaluated (same data options, same collator seed, same
evaluation batches), and which token that is.

    python benchmarks/held_out_baseline.py <the arguments of the albert-hf pretrain run>

`albert-hf quickstart` reports this baseline itself; `albert-hf pretrain` reports only the accuracy.
"""

from __future__ import annotations

import sys

from common import pretraining_run

from albert_hf.pretraining.arguments import parse_pretraining_args
from albert_hf.pretraining.report import held_out_baselines


def main(argv: list[str]) -> None:
    run = pretraining_run(parse_pretraining_args(argv))
    if run.eval_dataset is None:
        raise SystemExit("the run has no held-out documents (--validation_documents or --validation_files)")
    baselines = held_out_baselines(run.trainer, run.eval_dataset)
    token = run.tokenizer.convert_ids_to_tokens(baselines.mlm_token_id)
    print(
        f"held-out MLM baseline {baselines.mlm:.3f}: always {token!r}, the most frequent of {baselines.mlm_targets} "
        f"masked tokens; SOP majority {baselines.sop:.3f} of {baselines.sop_targets} pairs"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
