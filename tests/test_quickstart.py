"""The quickstart's embedded corpus, held-out baselines, options and report."""

from __future__ import annotations

import pytest
import torch

from albert_hf.data.embedded_corpus import (
    DEFAULT_EMBEDDED_SOURCES,
    embedded_documents,
    is_prose,
    prose_sentences,
    stdlib_docstring_texts,
)
from albert_hf.errors import OptionError
from albert_hf.pretraining.arguments import RECIPES, parse_quickstart_args
from albert_hf.pretraining.report import frequency_baselines
from albert_hf.scripts import quickstart

QUICKSTART_DEFAULTS = RECIPES["quickstart"]

# ---- embedded corpus -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "paragraph",
    [
        'if_stmt ::= "if" assignment_expression ":" suite',  # grammar
        ">>> sorted([3, 1, 2])\n[1, 2, 3]",  # doctest
        "Example:\n    x = compute(1, 2)\n    print(x)",  # indented code block
        "The if statement\n****************",  # reST heading
        "Short line.",  # too short to be a paragraph of prose
        "a[i] = b[j] + c[k] * d[l] - e[m] / f[n] % g[o] ** h[p] // q[r];",  # symbols, not words
    ],
)
def test_is_prose_rejects_code_grammar_and_headings(paragraph):
    assert not is_prose(paragraph)


def test_is_prose_keeps_wrapped_sentences():
    assert is_prose("Return the number of items in a container. If the container\nis empty, return zero.")


def test_prose_sentences_keeps_only_the_prose_paragraphs_split_into_sentences():
    text = (
        "Summary line of the function, which says what it returns.\n\n"
        "    code = 'indented block'\n\n"
        "The second paragraph has two sentences. It continues the first one.\n"
    )
    assert prose_sentences(text) == [
        "Summary line of the function, which says what it returns.",
        "The second paragraph has two sentences.",
        "It continues the first one.",
    ]


def test_stdlib_docstrings_are_read_in_source_order_without_import(tmp_path):
    (tmp_path / "alpha.py").write_text(
        '"""Module docstring of alpha."""\n'
        "raise SystemExit('never imported')\n"
        "def first():\n    '''Docstring of first.'''\n"
        "class Second:\n    '''Docstring of Second.'''\n    def method(self):\n        '''Docstring of method.'''\n"
    )
    (tmp_path / "test").mkdir()  # test suites are skipped
    (tmp_path / "test" / "test_alpha.py").write_text('"""Skipped."""\n')
    (tmp_path / "broken.py").write_text("def (:\n")  # files that do not parse are skipped
    (tmp_path / "nodocs.py").write_text("x = 1\n")
    assert stdlib_docstring_texts(tmp_path) == [
        "Module docstring of alpha.\n\nDocstring of first.\n\nDocstring of Second.\n\nDocstring of method."
    ]


def test_embedded_documents_hold_prose_with_at_least_two_sentences():
    documents = embedded_documents(("language-reference",))
    assert len(documents) > 50
    sentences = documents["sentences"]
    assert min(map(len, sentences)) >= 2
    flat = [sentence for document in sentences for sentence in document]
    assert not any("::=" in sentence or sentence.startswith(">>>") for sentence in flat)
    assert any("statement" in sentence for sentence in flat)


def test_stdlib_docstrings_are_one_document_each_without_repeats():
    docstrings = embedded_documents(("stdlib-docstrings",))
    modules = embedded_documents(("stdlib-modules",))
    assert len(docstrings) > 1000 and len(docstrings) > 3 * len(modules)
    keys = [tuple(sentences) for sentences in docstrings["sentences"]]
    assert len(set(keys)) == len(keys)
    # a docstring opens with its summary: most first sentences are short
    firsts = sorted(len(sentences[0]) for sentences in docstrings["sentences"])
    assert firsts[len(firsts) // 2] < 100


def test_embedded_documents_reject_unknown_sources():
    with pytest.raises(ValueError, match="wikipedia"):
        embedded_documents(("wikipedia",))


# ---- baselines -------------------------------------------------------------------------------------------------------


def test_frequency_baselines_count_masked_targets_and_orders():
    batches = [
        {
            "labels": torch.tensor([[-100, 7, 7, -100], [9, -100, -100, 7]]),
            "sentence_order_label": torch.tensor([0, 1]),
        },
        {"labels": torch.tensor([[-100, 9, -100, -100]]), "sentence_order_label": torch.tensor([1])},
    ]
    baselines = frequency_baselines(batches)
    assert baselines.mlm_token_id == 7
    assert baselines.mlm == pytest.approx(3 / 5)
    assert (baselines.mlm_targets, baselines.sop_targets) == (5, 3)
    assert baselines.sop == pytest.approx(2 / 3)


def test_frequency_baselines_refuse_a_held_out_set_without_masked_tokens():
    with pytest.raises(ValueError, match="no masked tokens"):
        frequency_baselines([{"labels": torch.full((2, 3), -100)}])


# ---- options and report ----------------------------------------------------------------------------------------------


def test_quickstart_defaults_use_the_whole_embedded_corpus_with_fresh_pairs():
    args = parse_quickstart_args([])
    assert args.embedded == list(DEFAULT_EMBEDDED_SOURCES) and args.corpus is None
    assert args.dupe_factor == QUICKSTART_DEFAULTS["dupe_factor"]
    explicit = parse_quickstart_args(["--fast", "--dupe_factor", "3", "--learning_rate", "0.01"])
    assert (explicit.dupe_factor, explicit.learning_rate, explicit.max_steps) == (3, 0.01, 12)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--max_steps", "0"], "--max_steps"),
        (["--dupe_factor", "0"], "--dupe_factor"),
        (["--held_out_fraction", "1.5"], "--held_out_fraction"),
        (["--warmup_fraction", "-0.1"], "--warmup_fraction"),
        (["--embedded", "wikipedia"], "invalid choice"),
    ],
)
def test_quickstart_rejects_bad_options(argv, message):
    with pytest.raises(OptionError) as refused:
        parse_quickstart_args(argv)
    assert message in str(refused.value)


def test_quickstart_report_prints_each_baseline_beside_its_figure(tmp_path, capsys):
    assert quickstart.main(["--fast", "--output_dir", str(tmp_path), "--dupe_factor", "2"]) == 0
    report = capsys.readouterr().out
    mlm_line = next(line for line in report.splitlines() if "MLM accuracy" in line)
    sop_line = next(line for line in report.splitlines() if "SOP accuracy" in line)
    assert "held-out" in mlm_line and "baseline" in mlm_line and "most frequent" in mlm_line
    assert "baseline" in sop_line and "more frequent order" in sop_line
    assert "dupe_factor 2" in report
    assert (tmp_path / "learning_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_baselines_are_what_a_constant_model_scores_in_evaluation(tmp_path, monkeypatch):
    """The baselines count exactly the targets `evaluate` scores: a model that always predicts the baseline's token
    and order gets exactly the baseline accuracies."""
    seen = {}

    def held_out_baselines(trainer, eval_dataset):  # the script's own call, recorded with what it returns
        seen["trainer"], seen["baselines"] = trainer, real_held_out_baselines(trainer, eval_dataset)
        return seen["baselines"]

    real_held_out_baselines = quickstart.held_out_baselines
    monkeypatch.setattr(quickstart, "held_out_baselines", held_out_baselines)
    assert quickstart.main(["--fast", "--output_dir", str(tmp_path), "--disable_tqdm", "true"]) == 0
    trainer, baselines = seen["trainer"], seen["baselines"]
    model = trainer.model
    with torch.no_grad():
        head = model.predictions
        head.LayerNorm.weight.zero_()
        head.LayerNorm.bias.zero_()  # the decoder sees zeros: its logits are its bias alone
        head.bias.fill_(-1.0)
        head.bias[baselines.mlm_token_id] = 1.0
        sop = model.sop_classifier.classifier
        sop.weight.zero_()
        sop.bias.copy_(torch.tensor([1.0, -1.0]))
    metrics = trainer.evaluate()
    assert metrics["eval_mlm_accuracy"] == pytest.approx(baselines.mlm, abs=1e-9)
    order_0 = metrics["eval_sop_accuracy"]  # always order 0: the baseline if 0 is the majority, else its complement
    assert baselines.sop == pytest.approx(max(order_0, 1 - order_0), abs=1e-9)
