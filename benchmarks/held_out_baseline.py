"""The frequency baseline of an `albert-hf pretrain` run's held-out MLM accuracy: the accuracy of always predicting
the most frequent masked token, on exactly the masks the run evaluated (same data options, same collator seed, same
evaluation batches), and which token that is.

    python benchmarks/held_out_baseline.py <the arguments of the albert-hf pretrain run>

`albert-hf quickstart` reports this baseline itself; `albert-hf pretrain` reports only the accuracy.
"""

from __future__ import annotations

import sys

from transformers import set_seed

from albert_hf.tasks.common import load_tokenizer
from albert_hf.tasks.pretraining import (
    build_pretraining_model,
    build_trainer,
    held_out_baselines,
    parse_pretraining_args,
    prepare_datasets,
)


def main(argv: list[str]) -> None:
    model_args, data_args, _, training_args = parse_pretraining_args(argv)
    set_seed(training_args.seed)
    tokenizer = load_tokenizer(model_args)
    train, evaluation, _ = prepare_datasets(data_args, tokenizer, training_args.seed)
    if evaluation is None:
        raise SystemExit("the run has no held-out documents (--validation_documents or --validation_files)")
    model = build_pretraining_model(model_args, tokenizer, data_args.max_seq_length)
    trainer = build_trainer(model, tokenizer, data_args, training_args, train, evaluation)
    baselines = held_out_baselines(trainer, evaluation)
    token = tokenizer.convert_ids_to_tokens(baselines.mlm_token_id)
    print(
        f"held-out MLM baseline {baselines.mlm:.3f}: always {token!r}, the most frequent of {baselines.mlm_targets} "
        f"masked tokens; SOP majority {baselines.sop:.3f} of {baselines.sop_targets} pairs"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
