"""Overfit test: a tiny ALBERT must memorize a handful of real sequences through the real pretraining pipeline.

Tokenizer -> sentence-order instances -> DataCollatorForSOP -> AlbertForPreTraining -> AlbertPretrainingTrainer: a
model that can learn anything must learn four sequences by heart. Broken loss wiring, misaligned labels, masking that
leaks the answer or hides nothing, an untied MLM head, or an optimizer step that does not step all make it fail.

Accuracy is measured independently of the collator's labels: after training, the four sequences are masked afresh
(real collator, other seeds), and the model must recover the original pieces (taken from the instances, not from the
collator's labels) at the positions that hold [MASK]. So labels shifted against the inputs, or masks that leave the
token in place, cannot pass by being learned consistently.
"""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset

from albert_hf.configuration import AlbertConfig
from albert_hf.data.collator import DataCollatorForSOP
from albert_hf.data.embedded_corpus import embedded_documents
from albert_hf.data.sentence_order import build_pretraining_dataset
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.trainer import AlbertPretrainingTrainer, PretrainingArguments
from albert_hf.vocabulary import train_tokenizer

STEPS = 1000
SEQUENCES = 4


@pytest.fixture(autouse=True)
def one_thread():
    """A tiny model runs fastest on one thread (two contended threads are many times slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow  # a learning check: 1,000 steps
def test_tiny_albert_memorizes_a_handful_of_sequences(tmp_path):
    # Real text that ships with Python: CPython's language reference.
    documents = embedded_documents(("language-reference",)).select(range(3))
    sentences = Dataset.from_dict({"text": [s for document in documents["sentences"] for s in document]})
    tokenizer = train_tokenizer(sentences, tmp_path / "tokenizer", vocab_size=300, show_progress=False)
    instances = build_pretraining_dataset(documents, tokenizer, max_seq_length=32).select(range(SEQUENCES))
    assert set(instances["sentence_order_label"]) == {0, 1}  # both classes among the sequences

    torch.manual_seed(0)
    config = AlbertConfig.preset(
        "base-v2",
        vocab_size=len(tokenizer),
        embedding_size=64,
        hidden_size=128,
        num_attention_heads=2,
        intermediate_size=256,
        num_hidden_layers=2,
        max_position_embeddings=32,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        classifier_dropout_prob=0.0,
    )
    model = AlbertForPreTraining(config)
    # Deterministic per step: the collator's masks are a function of its seed and the batch, and the batch order of
    # the seeded sampler; so every run sees the same masks at the same step, fresh ones from step to step.
    arguments = PretrainingArguments(
        output_dir=str(tmp_path / "out"),
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        save_strategy="no",
        seed=0,
        per_device_train_batch_size=SEQUENCES,
        max_steps=STEPS,
        optimizer="adamw",
        learning_rate=1e-3,
        lr_schedule="trainer",
        lr_scheduler_type="constant",
        weight_decay=0.0,
        logging_steps=50,
        dataloader_num_workers=0,
        # Off: memorizing drives the loss towards 0, where ordinary step-to-step noise exceeds 3 x the median.
        divergence_guard=False,
    )
    trainer = AlbertPretrainingTrainer(
        model=model, args=arguments, data_collator=DataCollatorForSOP(tokenizer, seed=0), train_dataset=instances
    )
    trainer.train()
    last = [entry for entry in trainer.state.log_history if "mlm_accuracy" in entry][-1]

    # The tied head learned through the embedding matrix (an untied copy would also memorize).
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight

    model.eval()
    features = list(instances)
    originals = torch.tensor(instances["input_ids"])
    correct = total = sop_correct = sop_total = 0
    with torch.no_grad():
        for seed in range(1, 9):  # fresh masks of the same sequences
            batch = DataCollatorForSOP(tokenizer, seed=seed)(features)
            masked = batch["input_ids"] == tokenizer.mask_token_id
            output = model(**{key: value for key, value in batch.items() if key != "labels"})
            correct += (output.prediction_logits.argmax(-1)[masked] == originals[masked]).sum().item()
            total += masked.sum().item()
            sop_correct += (output.sop_logits.argmax(-1) == batch["sentence_order_label"]).sum().item()
            sop_total += len(features)
    mlm_accuracy, sop_accuracy = correct / max(total, 1), sop_correct / sop_total
    print(
        f"after {STEPS} steps: MLM accuracy {mlm_accuracy:.3f} on {total} [MASK]ed pieces, SOP accuracy "
        f"{sop_accuracy:.3f}; last training log: MLM {last['mlm_accuracy']:.3f}, SOP {last['sop_accuracy']:.3f}, "
        f"loss {last['loss']:.3f}"
    )
    assert total >= 100  # enough [MASK]ed pieces for the figure to mean something
    assert mlm_accuracy >= 0.95
    assert sop_accuracy >= 0.95
