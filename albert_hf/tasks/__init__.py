"""End-to-end jobs (pretraining, GLUE, SQuAD, NER, multiple choice): argument parsing and Trainer wiring.

Each module exposes `main(argv=None)`; `examples/` and the `albert-hf` CLI both call it.
"""
