"""One linear script per job: `albert-hf <job>` runs exactly `albert_hf/scripts/<job>.py`.

Each script reads top to bottom (arguments, data, model, Trainer with the reliability callbacks, train, evaluate,
save, card) and calls only public functions of the library, with absolute imports: copy one out of the package, edit
it (a model head, a data format, a metric) and run it with `python my_script.py <options>`; its
`if __name__ == "__main__"` line runs it inside the same error boundary as `albert-hf`
(`albert_hf.error_boundary.run_command`).
"""
