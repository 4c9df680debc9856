"""DataCollatorForSOP on real text: masking statistics within tight bounds, whole words, padding, seeding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from albert_hf.data.collator import DataCollatorForSOP, sample_ngram_spans
from albert_hf.data.sentence_order import build_pretraining_dataset, load_text_documents

NGRAM_PROBS = np.array([6 / 11, 3 / 11, 2 / 11])


def within(observed: float, expected: float, count: int, sigmas: float = 4.0) -> bool:
    """|observed - expected| within `sigmas` binomial standard errors of a proportion over `count` draws."""
    return abs(observed - expected) <= sigmas * np.sqrt(expected * (1 - expected) / count)


@pytest.fixture(scope="module")
def corpus_file(shared_data, tmp_path_factory) -> Path:
    """100 paragraphs from each of three Gutenberg books by different authors (a blank line between books)."""
    text = (shared_data / "corpus" / "gutenberg_paragraphs.txt").read_text(encoding="utf-8")
    books = [book.splitlines() for book in text.split("\n\n") if book.strip()]
    lines = []
    for book in (books[1], books[5], books[9]):
        lines += [paragraph for paragraph in book if len(paragraph.split()) > 5][20:120] + [""]
    path = tmp_path_factory.mktemp("corpus") / "gutenberg_head.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def instances(corpus_file, tokenizer):
    """SOP instances of real text at length 128, three passes."""
    documents = load_text_documents(corpus_file, split_lines=True)
    return build_pretraining_dataset(documents, tokenizer, max_seq_length=128, dupe_factor=3)


@pytest.fixture(scope="module")
def instances_512(corpus_file, tokenizer):
    """The same text at the paper's length, 512."""
    documents = load_text_documents(corpus_file, split_lines=True)
    return build_pretraining_dataset(documents, tokenizer, max_seq_length=512, short_seq_prob=0.0)


@pytest.fixture(scope="module")
def batches(instances, tokenizer):
    """Every instance, masked once, in batches of 64."""
    collator = DataCollatorForSOP(tokenizer, seed=0)
    features = list(instances)
    return [(features[i : i + 64], collator(features[i : i + 64])) for i in range(0, len(features), 64)]


def test_masked_fraction_is_fifteen_percent_and_never_over_budget(batches):
    predicted = tokens = budget_total = 0
    for _, batch in batches:
        lengths = batch["attention_mask"].sum(1)
        per_sequence = (batch["labels"] != -100).sum(1)
        budgets = torch.clamp(torch.round(lengths * 0.15), min=1, max=20)
        assert torch.all(per_sequence <= budgets)
        predicted += per_sequence.sum().item()
        tokens += lengths.sum().item()
        budget_total += budgets.sum().item()
    assert predicted / budget_total > 0.995  # the budget is spent, up to a word that fits nowhere
    assert abs(predicted / tokens - 0.15) < 0.004


def test_max_predictions_caps_long_sequences(instances, tokenizer):
    collator = DataCollatorForSOP(tokenizer, seed=1, max_predictions_per_seq=7)
    batch = collator([instances[i] for i in range(64)])
    per_sequence = (batch["labels"] != -100).sum(1)
    assert per_sequence.max().item() == 7 and (per_sequence == 7).float().mean() > 0.95


def test_replacements_split_80_10_10(batches, tokenizer):
    special = set(tokenizer.all_special_ids)
    counts = {"mask": 0, "same": 0, "random": 0}
    for features, batch in batches:
        for i, feature in enumerate(features):
            original = torch.tensor(feature["input_ids"])
            positions = torch.nonzero(batch["labels"][i] != -100).flatten()
            assert torch.equal(batch["labels"][i, positions], original[positions])
            shown = batch["input_ids"][i, positions]
            is_mask = shown == tokenizer.mask_token_id
            is_same = shown == original[positions]
            counts["mask"] += is_mask.sum().item()
            counts["same"] += is_same.sum().item()
            counts["random"] += (~is_mask & ~is_same).sum().item()
            assert not special & set(shown[~is_mask & ~is_same].tolist())  # random tokens are real pieces
    total = sum(counts.values())
    assert total > 8000
    assert within(counts["mask"] / total, 0.8, total)
    # A random piece equals the original with probability ~1/30000: negligible at this sample size.
    assert within(counts["same"] / total, 0.1, total)
    assert within(counts["random"] / total, 0.1, total)


def test_whole_words_are_masked_and_specials_never(batches, tokenizer):
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    unmaskable = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    for features, batch in batches:
        for i, feature in enumerate(features):
            ids = feature["input_ids"]
            predicted = (batch["labels"][i, : len(ids)] != -100).tolist()
            for position, token in enumerate(ids):
                if token in unmaskable:
                    assert not predicted[position] and batch["input_ids"][i, position] == token
                    continue
                # the original's rule (create_pretraining_data.py `_is_start_piece`), written out independently
                starts_word = pieces[token].startswith(("\u2581", "<")) or pieces[token] in set(
                    '!"#$%&()*+,-./:;?@[\\]^_`{|}~'
                )
                continues_word = not starts_word and ids[position - 1] not in unmaskable
                if continues_word and token not in tokenizer.all_special_ids:
                    # A piece inside a word is predicted exactly when the piece before it is.
                    assert predicted[position] == predicted[position - 1], (position, pieces[token])
            assert not any(batch["labels"][i, len(ids) :] != -100)


def test_ngram_lengths_follow_one_over_n(instances_512, tokenizer):
    # Spans placed while the remaining budget could hold any 3-gram keep their drawn length, so their lengths
    # follow p(n) = (6/11, 3/11, 2/11) exactly; only the end of a sequence's budget is cut or filled with words.
    collator = DataCollatorForSOP(tokenizer)
    rng = np.random.default_rng(0)
    lengths = []
    for feature in instances_512:
        ids = np.array(feature["input_ids"])
        _, word_lengths, word_segments = collator.words(ids)
        pieces_before = np.concatenate([[0], np.cumsum(word_lengths)])
        largest_trigram = (pieces_before[3:] - pieces_before[:-3]).max()
        budget = round(len(ids) * 0.15)
        for _ in range(16):  # independent draws on the same text
            remaining = budget
            for first, n in sample_ngram_spans(word_lengths, word_segments, budget, NGRAM_PROBS, rng):
                if remaining >= largest_trigram:
                    lengths.append(n)
                remaining -= pieces_before[first + n] - pieces_before[first]
                assert word_segments[first] == word_segments[first + n - 1]  # never across [SEP]
            assert remaining >= 0
    lengths = np.array(lengths)
    assert len(lengths) > 25000
    for n, expected in zip((1, 2, 3), NGRAM_PROBS):
        assert within((lengths == n).mean(), expected, len(lengths)), (n, (lengths == n).mean())


def masked_word_runs(covered: np.ndarray, word_segments: np.ndarray) -> list[int]:
    """Lengths of the maximal runs of consecutive masked words within one segment."""
    runs, length = [], 0
    for index, masked in enumerate(covered):
        if length and (not masked or word_segments[index] != word_segments[index - 1]):
            runs.append(length)
            length = 0
        length += bool(masked)
    return runs + [length] if length else runs


def run_length_shares(runs: list[int]) -> np.ndarray:
    """Shares of runs of 1, 2, 3 and more than 3 words."""
    runs = np.minimum(np.array(runs), 4)
    return np.array([(runs == n).mean() for n in (1, 2, 3, 4)])


def test_collated_batches_mask_ngrams_of_one_over_n(instances_512, tokenizer):
    """The n-gram distribution of what the collator itself masks, read from its batches (not from the sampler fed a
    constant): the runs of masked words in real DataCollatorForSOP batches match those of the paper's p(n) = 1/n
    (n <= 3) placed by the same rules on the same sequences. Adjacent spans merge into longer runs and the budget cuts
    the last span in both, so the two histograms agree only if the collator draws n as the paper does."""
    features = list(instances_512)
    rng = np.random.default_rng(0)
    observed, expected = [], []
    for seed in range(32):
        collator = DataCollatorForSOP(tokenizer, seed=seed)
        for start in range(0, len(features), 64):
            chunk = features[start : start + 64]
            batch = collator(chunk)
            for row, feature in enumerate(chunk):
                ids = np.array(feature["input_ids"])
                word_starts, word_lengths, word_segments = collator.words(ids)
                predicted = (batch["labels"][row, : len(ids)] != -100).numpy()
                observed += masked_word_runs(predicted[word_starts], word_segments)
                budget = min(20, round(len(ids) * 0.15))  # max_predictions_per_seq 20, masked_lm_prob 0.15
                covered = np.zeros(len(word_starts), dtype=bool)
                for first, n in sample_ngram_spans(word_lengths, word_segments, budget, NGRAM_PROBS, rng):
                    covered[first : first + n] = True
                expected += masked_word_runs(covered, word_segments)
    assert min(len(observed), len(expected)) > 20000
    observed_shares, expected_shares = run_length_shares(observed), run_length_shares(expected)
    for n in range(4):  # two samples: 4 standard errors of the difference of two proportions
        p = (observed_shares[n] + expected_shares[n]) / 2
        tolerance = 4 * np.sqrt(p * (1 - p) * (1 / len(observed) + 1 / len(expected)))
        assert abs(observed_shares[n] - expected_shares[n]) <= tolerance, (n + 1, observed_shares, expected_shares)
    # The signature itself: most runs are single words, and about a fifth are two words.
    assert observed_shares[0] > 0.45 and observed_shares[1] > 0.2 and observed_shares[2] > 0.1


def test_padding_is_dynamic_and_rounds_to_a_multiple(instances, tokenizer):
    features = [instances[i] for i in range(5)]
    longest = max(len(f["input_ids"]) for f in features)
    plain = DataCollatorForSOP(tokenizer, seed=0)(features)
    assert plain["input_ids"].shape == (5, longest)
    rounded = DataCollatorForSOP(tokenizer, seed=0, pad_to_multiple_of=8)(features)
    assert rounded["input_ids"].shape[1] == -(-longest // 8) * 8
    for i, feature in enumerate(features):
        length = len(feature["input_ids"])
        assert rounded["attention_mask"][i].tolist() == [1] * length + [0] * (rounded["input_ids"].shape[1] - length)
        assert torch.all(rounded["input_ids"][i, length:] == tokenizer.pad_token_id)
        assert rounded["token_type_ids"][i, :length].tolist() == feature["token_type_ids"]
        assert torch.all(rounded["token_type_ids"][i, length:] == 0)
    assert rounded["sentence_order_label"].tolist() == [f["sentence_order_label"] for f in features]
    assert all(t.dtype == torch.long for t in rounded.values())


def test_masks_depend_on_seed_and_batch_only(instances, tokenizer):
    features = [instances[i] for i in range(16)]
    first = DataCollatorForSOP(tokenizer, seed=3)(features)
    again = DataCollatorForSOP(tokenizer, seed=3)(features)
    other_seed = DataCollatorForSOP(tokenizer, seed=4)(features)
    assert torch.equal(first["labels"], again["labels"]) and torch.equal(first["input_ids"], again["input_ids"])
    assert not torch.equal(first["labels"], other_seed["labels"])
    # The same sequences in another batch (as after a reshuffle, next epoch) get fresh masks.
    regrouped = DataCollatorForSOP(tokenizer, seed=3)(features[:8] + [instances[16 + i] for i in range(8)])
    assert not torch.equal(first["labels"][:8], regrouped["labels"][:8])


def test_masks_do_not_depend_on_dataloader_workers(instances, tokenizer):
    subset = instances.select(range(64))
    collator = DataCollatorForSOP(tokenizer, seed=5)

    def labels(num_workers: int) -> list[torch.Tensor]:
        loader = DataLoader(subset, batch_size=8, num_workers=num_workers, collate_fn=collator)
        return [batch["labels"] for batch in loader]

    in_process, with_workers = labels(0), labels(2)
    assert all(torch.equal(a, b) for a, b in zip(in_process, with_workers))
    assert not torch.equal(in_process[0], in_process[1])


@pytest.mark.parametrize(
    "features, message",
    [
        ([{"token_type_ids": [0, 0]}], "feature 0 has no 'input_ids'"),
        ([{"input_ids": [2, 50, 3], "token_type_ids": [0, 0]}], "3 input_ids but 2 token_type_ids"),
        (
            [{"input_ids": [2, 50, 3], "sentence_order_label": 0}, {"input_ids": [2, 51, 3]}],
            "feature 1 has no 'sentence_order_label'",
        ),
        ([{"input_ids": [2, 99999, 3]}], "outside the tokenizer's vocabulary"),
        ([{"input_ids": [2, 50, 51, 3], "word_starts": [1, 1, 1]}], "4 input_ids but 3 word_starts"),
        ([], "empty batch"),
    ],
)
def test_bad_features_are_named(tokenizer, features, message):
    with pytest.raises(ValueError, match=message):
        DataCollatorForSOP(tokenizer)(features)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(masked_lm_prob=0.0), "masked_lm_prob"),
        (dict(max_predictions_per_seq=0), "max_predictions_per_seq"),
        (dict(mask_replace_prob=0.95, random_replace_prob=0.1), "sum to at most 1"),
        (dict(max_ngram=0), "max_ngram"),
        (dict(seed=-1), "seed"),
    ],
)
def test_invalid_settings_are_refused(tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataCollatorForSOP(tokenizer, **kwargs)
