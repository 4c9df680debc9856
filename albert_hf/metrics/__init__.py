"""Offline task metrics, equal to the reference definitions (GLUE, SQuAD v1.1/v2.0, CoNLL NER)."""
