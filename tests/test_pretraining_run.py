"""The pretraining job (albert_hf/scripts/pretrain.py, with the steps of albert_hf/pretraining/run.py): what it
refuses before training, the model card it writes through the Trainer, and the MLM/SOP sums it logs from the model's
own losses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers.tiny import TINY_TWO_LAYER_OVERRIDES
from huggingface_hub import ModelCard

from albert_hf.argument_parsing import parse_config_overrides
from albert_hf.configuration import AlbertConfig
from albert_hf.data.instance_stream import stream_position_obstacle
from albert_hf.errors import UserError
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.arguments import RECIPES, parse_quickstart_args
from albert_hf.pretraining.trainer import pretraining_metric_sums
from albert_hf.scripts.pretrain import main


def job_argv(train_file: Path, spiece_model: Path, output_dir: Path, *extra: str) -> list[str]:
    return [
        "--train_files", str(train_file), "--tokenizer_name_or_path", str(spiece_model),
        "--config_overrides", TINY_TWO_LAYER_OVERRIDES, "--max_seq_length", "64", "--max_steps", "2",
        "--per_device_train_batch_size", "4", "--output_dir", str(output_dir), "--report_to", "none", "--use_cpu",
        "--disable_tqdm", "true", "--save_strategy", "no", *extra,
    ]  # fmt: skip


# ---- refused before training -----------------------------------------------------------------------------------------


def test_a_corpus_without_instances_is_refused_with_what_was_read(tmp_path, spiece_model):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One sentence alone.\n\nAnother lonely one.\n\nA third.\n", encoding="utf-8")
    with pytest.raises(UserError, match="3 documents read; 3 of them with fewer than two sentences"):
        main(job_argv(corpus, spiece_model, tmp_path / "out"))


def test_streaming_refuses_dataloader_workers(tmp_path, spiece_model, wikitext_articles):
    argv = job_argv(wikitext_articles(2), spiece_model, tmp_path / "out", "--streaming")
    with pytest.raises(UserError, match="--dataloader_num_workers 1 reads the stream in DataLoader workers"):
        main([*argv, "--dataloader_num_workers", "1"])


def test_the_stream_position_rule():
    assert stream_position_obstacle(1, 0) is None
    assert "DataLoader workers" in stream_position_obstacle(1, 2)
    assert "2 processes" in stream_position_obstacle(2, 0)


# ---- recipes and the quickstart's options ----------------------------------------------------------------------------


def test_every_recipe_is_written_out_in_full():
    """Each recipe names its model and steps itself: no recipe is derived from another."""
    for name, values in RECIPES.items():
        assert {"config_preset", "max_seq_length", "learning_rate", "max_steps"} <= set(values), name
    assert "num_hidden_layers=2" in RECIPES["quickstart"]["config_overrides"]
    assert "num_hidden_layers=4" in RECIPES["tiny"]["config_overrides"]


def test_the_quickstart_keeps_its_option_spellings_and_derives_its_schedule(tmp_path):
    job = parse_quickstart_args(
        ["--fast", "--batch_size", "4", "--model_overrides", "hidden_size=32", "--max_steps", "100"]
        + ["--output_dir", str(tmp_path)]
    )
    assert (job.recipe.recipe, job.per_device_train_batch_size) == ("smoke", 4)
    # the given override replaces the recipe's hidden_size; the recipe's other fields stay
    overrides = parse_config_overrides(job.config_overrides)
    assert (overrides["hidden_size"], overrides["num_hidden_layers"], overrides["embedding_size"]) == (32, 2, 32)
    # 10% warm-up, 5 evaluations, 30 logs: in proportion to the steps given
    assert (job.warmup_steps, job.eval_steps, job.logging_steps) == (10, 20, 3)
    assert parse_quickstart_args(["--output_dir", str(tmp_path), "--warmup_steps", "7"]).warmup_steps == 7


# ---- the model card --------------------------------------------------------------------------------------------------


def test_the_pretraining_card_is_written_by_the_trainer(tmp_path, spiece_model, wikitext_articles):
    output_dir = tmp_path / "out"
    assert main(job_argv(wikitext_articles(3), spiece_model, output_dir, "--language", "en", "fr")) == 0
    card = ModelCard.load(output_dir / "README.md")
    assert card.data.language == ["en", "fr"]
    assert "model-index" not in card.content  # a user's corpus names no dataset to report results against


def test_the_card_pushed_to_the_hub_holds_the_evaluation(tmp_path, spiece_model, wikitext_articles, fake_hub):
    """With --push_to_hub the job pushes once it has evaluated: every upload of the output folder sends a card that
    reports the held-out figures (the fake Hub records the README.md each upload would send). A push inside the final
    save, before the evaluation, would send a card without them."""
    api = fake_hub()
    output_dir = tmp_path / "out"
    argv = job_argv(wikitext_articles(4), spiece_model, output_dir, "--validation_documents", "1")
    assert main([*argv, "--push_to_hub", "--hub_model_id", "someone/tiny-albert"]) == 0
    pushed = [upload for upload in api.uploads if upload["folder"] == output_dir]
    assert pushed, api.uploads
    evaluated = json.loads((output_dir / "eval_results.json").read_text())
    rows = [f"| {name} | {evaluated[f'eval_{name}']:.4f} |" for name in ("mlm_accuracy", "sop_accuracy", "loss")]
    for upload in pushed:
        card = upload["readme"] or ""
        assert "No evaluation results were recorded" not in card, upload["commit_message"]
        assert all(row in card for row in rows), (upload["commit_message"], rows, card)


# ---- logged sums -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("masked_positions_only", [True, False])
def test_logged_sums_are_the_cross_entropy_sums_of_the_logits(masked_positions_only):
    """The sums come from the model's losses times their divisors; the reference here is the cross-entropy of the
    logits computed directly, for a batch normalized by global counts (larger than its own) and by itself."""
    torch.manual_seed(0)
    model = AlbertForPreTraining(
        AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_attention_heads=2, intermediate_size=32,
                     num_hidden_layers=1, max_position_embeddings=16)
    ).eval()  # fmt: skip
    input_ids = torch.randint(5, 50, (3, 10))
    labels = torch.full_like(input_ids, -100)
    labels[0, 2], labels[1, 5], labels[1, 7], labels[2, 1] = 7, 9, 11, 13
    order = torch.tensor([0, 1, 1])
    with torch.no_grad():
        full = model(input_ids=input_ids)
    mlm_reference = F.cross_entropy(full.prediction_logits[labels != -100], labels[labels != -100], reduction="sum")
    sop_reference = F.cross_entropy(full.sop_logits, order, reduction="sum")
    for counts in (dict(num_items_in_batch=40, num_sequences_in_batch=12), {}):
        inputs = dict(input_ids=input_ids, labels=labels, sentence_order_label=order, **counts)
        with torch.no_grad():
            outputs = model(**inputs, masked_positions_only=masked_positions_only)
        sums = pretraining_metric_sums(outputs, labels, order, **counts)
        torch.testing.assert_close(sums[0], mlm_reference, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(sums[3], sop_reference, rtol=1e-5, atol=1e-6)
        assert (sums[2].item(), sums[5].item()) == (4, 3)


def test_the_quickstart_help_names_its_other_spellings(capsys):
    with pytest.raises(SystemExit):
        parse_quickstart_args(["--help"])
    shown = capsys.readouterr().out
    assert "--fast is --recipe=smoke" in shown and "--batch_size is --per_device_train_batch_size" in shown
    assert "--corpus" in shown and "--held_out_fraction" in shown
