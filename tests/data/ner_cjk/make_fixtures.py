"""Writes the Japanese and Chinese NER fixtures of this folder (see README.md): sentences built from the templates and
entity fillers below, all written for this project, with a fixed seed, in the CoNLL layout (`word TAG`, IOB2, a
blank line after each sentence).

    python tests/data/ner_cjk/make_fixtures.py   # rewrites ja/ and zh/ (the same files every time)
"""

from __future__ import annotations

import random
from pathlib import Path

HERE = Path(__file__).parent
IDEOGRAPHIC_SPACE = "\u3000"

# Japanese: words as a morphological analyzer would cut them (short units); slots {PER} {LOC} {ORG}.
JA_TEMPLATES = [
    "{PER} さん は {LOC} に 住ん で いる 。",
    "{ORG} は {LOC} に 新しい 工場 を 建て た 。",
    "{PER} は {ORG} の 社長 に 就任 し た 。",
    "昨日 、 {PER} が {LOC} から 帰っ て き た 。",
    "{ORG} と {ORG} が 提携 を 発表 し た 。",
    "{LOC} の 天気 は 晴れ でし た 。",
    "{PER} 選手 は {LOC} で 行わ れ た 大会 で 優勝 し た 。",
    "私 は 毎朝 {LOC} 駅 で {PER} さん に 会う 。",
    "{ORG} の 研究 者 が {LOC} で 講演 を 行っ た 。",
    "{PER} 氏 に よる と 、 {ORG} の 売上 は 増え た 。",
    "来月 {PER} と 一緒 に {LOC} へ 旅行 する 予定 だ 。",
    "{ORG} は 本社 を {LOC} から {LOC} に 移し た 。",
    "彼女 は {LOC} の 大学 を 卒業 し た 。",
    "2024 年 に {ORG} は 新 製品 を 発売 し た 。",
    "この 本 は {PER} が 書い た 。",
    "{PER} は {ORG} で エンジニア と し て 働い て いる 。",
]
JA_FAMILY = "山田 佐藤 鈴木 高橋 田中 伊藤 渡辺 中村 小林 加藤 吉田 山本 松本 井上 木村 林 清水 山口 森 池田".split()
JA_GIVEN = "太郎 花子 健一 美咲 翔太 陽子 大輔 由美 直樹 恵 誠 さくら".split()
JA_FOREIGN = [["ジョン", "スミス"], ["マリア"], ["Emma", "Watson"]]
JA_LOC = [
    [w] for w in "東京 大阪 京都 札幌 福岡 名古屋 横浜 神戸 仙台 広島 沖縄 北海道 フランス ドイツ アメリカ 中国".split()
]
JA_LOC += [["京都", "府"], ["大阪", "市"], ["New", "York"], ["Paris"], ["ニューヨーク"]]
JA_ORG = [["トヨタ", "自動車"], ["ソニー"], ["日本", "銀行"], ["東京", "大学"], ["Google"], ["Microsoft"]]
JA_ORG += [["京都", "大学"], ["任天堂"], ["パナソニック"], ["ＮＨＫ"], ["ＪＲ", "東日本"], ["三菱", "商事"], ["楽天"]]

# Chinese: words, written one character per token as the common Chinese NER corpora are (Latin words and numbers
# stay whole tokens); slots as above.
ZH_TEMPLATES = [
    "{PER} 住 在 {LOC} 。",
    "{ORG} 在 {LOC} 开设 了 新 工厂 。",
    "{PER} 担任 {ORG} 的 总经理 。",
    "昨天 {PER} 从 {LOC} 回来 了 。",
    "{ORG} 和 {ORG} 宣布 合作 。",
    "{LOC} 今天 天气 很 好 。",
    "{PER} 在 {LOC} 举行 的 比赛 中 获得 冠军 。",
    "我 每天 早上 在 {LOC} 站 遇到 {PER} 。",
    "{ORG} 的 研究 人员 在 {LOC} 发表 演讲 。",
    "据 {PER} 介绍 ， {ORG} 的 销售额 有所 增长 。",
    "下个月 我 和 {PER} 一起 去 {LOC} 旅行 。",
    "{ORG} 把 总部 从 {LOC} 迁 到 了 {LOC} 。",
    "他 毕业 于 {LOC} 的 一所 大学 。",
    "2024 年 {ORG} 发布 了 新 产品 。",
    "这 本 书 是 {PER} 写 的 。",
    "{PER} 在 {ORG} 当 工程师 。",
]
ZH_PER = "张伟 王芳 李娜 刘洋 陈静 杨帆 赵磊 黄敏 周杰 吴强 徐丽 孙涛 马超 朱琳 胡军 郭鹏 林峰 何静 欧阳娜娜".split()
ZH_LOC = [[w] for w in "北京 上海 广州 深圳 杭州 南京 成都 武汉 西安 重庆 天津 苏州 香港 日本 美国 法国 德国".split()]
ZH_LOC += [["New", "York"], ["Paris"]]
ZH_ORG = [[w] for w in "华为 腾讯 阿里巴巴 百度 小米 清华大学 北京大学 中国银行 联想集团 中国移动".split()]
ZH_ORG += [["Google"], ["Microsoft"], ["ＩＢＭ"]]


def pick(rng: random.Random, items: list, split: str):
    """One filler; every fourth filler is held out of the training split, so the dev split has entities the training
    split never shows (telling them apart takes the context around them)."""
    return rng.choice(items if split != "train" else [item for i, item in enumerate(items) if i % 4 != 3])


def japanese_person(rng: random.Random, split: str) -> list[str]:
    kind = rng.random()
    if kind < 0.1:
        return list(pick(rng, JA_FOREIGN, split))
    if kind < 0.45:
        return [pick(rng, JA_FAMILY, split)]
    separator = [IDEOGRAPHIC_SPACE] if rng.random() < 0.15 else []  # full names are often written 山田　太郎
    return [pick(rng, JA_FAMILY, split), *separator, pick(rng, JA_GIVEN, split)]


def characters(words: list[str]) -> list[str]:
    """Chinese words as one token per character; a Latin word or a number stays one token."""
    return [piece for word in words for piece in (list(word) if not word.isascii() else [word])]


def chinese_fillers(rng: random.Random, split: str) -> dict[str, list[str]]:
    return {
        "PER": characters([pick(rng, ZH_PER, split)]),
        "LOC": characters(pick(rng, ZH_LOC, split)),
        "ORG": characters(pick(rng, ZH_ORG, split)),
    }


def japanese_fillers(rng: random.Random, split: str) -> dict[str, list[str]]:
    return {
        "PER": japanese_person(rng, split),
        "LOC": list(pick(rng, JA_LOC, split)),
        "ORG": list(pick(rng, JA_ORG, split)),
    }


def sentence(template: str, fillers, rng: random.Random, split: str, split_words) -> list[tuple[str, str]]:
    rows = []
    for word in template.split(" "):
        if word.startswith("{"):
            entity = word[1:-1]
            tokens = fillers(rng, split)[entity]
            rows.extend((token, ("B-" if i == 0 else "I-") + entity) for i, token in enumerate(tokens))
        else:
            rows.extend((token, "O") for token in split_words([word]))
    return rows


def write(path: Path, sentences: list[list[tuple[str, str]]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for rows in sentences:
            handle.writelines(f"{token} {tag}\n" for token, tag in rows)
            handle.write("\n")


def make(language: str, templates: list[str], fillers, split_words, seed: int, sizes: dict[str, int]) -> None:
    rng = random.Random(seed)
    for split, size in sizes.items():
        sentences = [sentence(templates[i % len(templates)], fillers, rng, split, split_words) for i in range(size)]
        rng.shuffle(sentences)
        write(HERE / language / f"{split}.txt", sentences)


if __name__ == "__main__":
    sizes = {"train": 480, "valid": 160}
    make("ja", JA_TEMPLATES, japanese_fillers, lambda words: words, 34, sizes)
    make("zh", ZH_TEMPLATES, chinese_fillers, characters, 35, sizes)
