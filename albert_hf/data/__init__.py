"""Data pipelines: sentence-order pretraining instances, the masking collator, and per-task preprocessing."""
