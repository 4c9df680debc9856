"""A Chinese BERT WordPiece vocabulary and a tiny ALBERT folder on it, as the Chinese ALBERTs ship (Google's
albert_*_zh, brightmart's: `vocab.txt` with BERT's tokenizer), built from the repository's Chinese text; and the
reference tokenization: google-research's own `FullTokenizer` on the `vocab.txt` (BERT's BasicTokenizer and
WordpieceTokenizer, from the albert-tensorflow wheel, as `helpers.tokenization_reference` imports it).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .data import FIXTURES, REPO_ROOT
from .tokenization_reference import google

CHINESE_TEXT = REPO_ROOT / "tests" / "data" / "chinese_lu_xun_nahan.txt"
NER_ZH = REPO_ROOT / "tests" / "data" / "ner_cjk" / "zh"
WORDPIECE_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def chinese_paragraphs() -> list[str]:
    return [line for line in CHINESE_TEXT.read_text(encoding="utf-8").splitlines() if line.strip()]


def ner_sentences(split: str) -> list[str]:
    """The Chinese NER fixture's sentences, their words joined as Chinese is written."""
    sentences, words = [], []
    for line in (NER_ZH / f"{split}.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if words:
                sentences.append("".join(words))
            words = []
        else:
            words.append(line.rsplit(" ", 1)[0])
    return sentences + (["".join(words)] if words else [])


def train_chinese_wordpiece(folder: Path, vocab_size: int = 3000) -> Path:
    """`folder/vocab.txt`: a BERT WordPiece vocabulary trained (tokenizers' WordPiece trainer, BERT's normalization:
    CJK characters split, lower-cased) on the Chinese stories, the Chinese NER fixture and some English, so that every
    character of the test text is a token and English words split into "##" pieces."""
    from tokenizers import BertWordPieceTokenizer

    english = (FIXTURES / "corpus" / "botchan.txt").read_text(encoding="utf-8").splitlines()[:200]
    texts = chinese_paragraphs() + ner_sentences("train") + ner_sentences("valid") + english
    trainer = BertWordPieceTokenizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    trainer.train_from_iterator(
        texts, vocab_size=vocab_size, min_frequency=1, limit_alphabet=10_000, special_tokens=WORDPIECE_SPECIAL_TOKENS
    )
    folder.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(folder))
    return folder / "vocab.txt"


def wordpiece_model_folder(folder: Path, vocab_file: Path, **config) -> Path:
    """A tiny ALBERT (fresh weights) on the WordPiece vocabulary, saved as `albert-hf import` writes a Chinese
    ALBERT: the model, BERT's tokenizer and the `vocab.txt` beside it."""
    import albert_hf
    from albert_hf.formats import wordpiece_tokenizer
    from albert_hf.hub import save_for_hub

    tokenizer = wordpiece_tokenizer(vocab_file)
    sizes = dict(embedding_size=16, hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=1)
    special = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id)
    model_config = albert_hf.AlbertConfig(
        vocab_size=len(tokenizer), eos_token_id=tokenizer.sep_token_id, **special, **{**sizes, **config}
    )
    save_for_hub(albert_hf.AlbertForPreTraining(model_config), folder, tokenizer=tokenizer)
    shutil.copyfile(vocab_file, folder / "vocab.txt")
    return folder


def google_wordpiece_ids(vocab_file: Path, texts: list[str], do_lower_case: bool = True) -> list[list[int]]:
    """Ids of each text (no special tokens) by google-research's FullTokenizer on a WordPiece vocabulary."""
    tokenizer = google.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
    return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) for text in texts]


def google_wordpiece_tokens(vocab_file: Path, text: str, do_lower_case: bool = True) -> list[str]:
    return google.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case).tokenize(text)


# ---- the fine-tuning jobs on a WordPiece model folder ----------------------------------------------------------------


def chinese_stories() -> list[list[str]]:
    """The paragraphs of each of the two stories (a blank line separates them)."""
    return [
        [line for line in story.splitlines() if line.strip()]
        for story in CHINESE_TEXT.read_text(encoding="utf-8").split("\n\n")
    ]


def story_table(path: Path) -> Path:
    """A csv table of paragraphs (their first 60 characters) of the two stories, labelled by story."""
    import csv

    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "story"])
        for label, story in zip(("鸭的喜剧", "头发的故事"), chinese_stories()):
            writer.writerows([paragraph[:60], label] for paragraph in story[:6])
    return path


def chinese_squad(path: Path) -> Path:
    """SQuAD v1.1 layout on paragraphs of the stories: each question's answer is a stretch of its context."""
    import json

    data = []
    for index, paragraph in enumerate(chinese_paragraphs()[:6]):
        context = paragraph[:80]
        start = len(context) // 3
        answer = {"text": context[start : start + 4], "answer_start": start}
        qas = [{"id": f"q{index}", "question": "这段话里写的是什么？", "answers": [answer]}]
        data.append({"title": f"p{index}", "paragraphs": [{"context": context, "qas": qas}]})
    path.write_text(json.dumps({"version": "1.1", "data": data}, ensure_ascii=False), encoding="utf-8")
    return path


def wordpiece_job_argv(job: str, model_folder: Path, root: Path) -> list[str]:
    """`ner`, `classify` or `squad` fine-tuning `model_folder` for two steps and evaluating it, on Chinese data: the
    Chinese NER fixture, a table of the stories' paragraphs (`root/stories.csv`), SQuAD questions on them
    (`root/squad.json`)."""
    data = {
        "ner": [
            *["--train_file", str(NER_ZH / "train.txt"), "--validation_file", str(NER_ZH / "valid.txt")],
            *["--max_train_samples", "16", "--max_eval_samples", "8"],
        ],
        "classify": [
            *["--train_file", str(story_table(root / "stories.csv")), "--validation_file", str(root / "stories.csv")],
            *["--text_column", "text", "--label_column", "story"],
        ],
        "squad": [
            *["--train_file", str(chinese_squad(root / "squad.json")), "--validation_file", str(root / "squad.json")],
            *["--max_query_length", "16", "--doc_stride", "16"],
        ],
    }[job]
    return [
        *data,
        *["--model_name_or_path", str(model_folder), "--do_train", "--do_eval", "--max_steps", "2"],
        *["--per_device_train_batch_size", "4", "--max_seq_length", "64", "--use_cpu", "true", "--report_to", "none"],
        *["--disable_tqdm", "true", "--save_strategy", "no"],
    ]
