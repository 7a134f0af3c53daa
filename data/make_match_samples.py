"""Make the small text-matching sample set in data/match/ (deterministic; run
from the repo root).

    python data/make_match_samples.py

The questions are synthetic customer-service questions in Chinese, in the
style of AFQMC: an intent (repay, raise the limit, overdue, ...) about a
product (花呗, 借呗, ...), each intent written in several ways. Two questions
match when they ask the same intent about the same product. Two negatives
in three are hard on purpose: the same product with another intent, or the
same intent about another product, so that the words shared by the two
questions do not give the answer away; the rest share neither. Every query appears with one or two positives and one
to three negatives, so that triples can be built by grouping on the query,
and 3% of the labels are flipped (annotation noise).

Files (TSV, no header):

* ``train.tsv``, ``dev.tsv``, ``test.tsv``: ``text_a<TAB>text_b<TAB>label`` (1 = match)
* ``predict.tsv``: ``text_a<TAB>text_b``
* ``train_triples.tsv``: ``query<TAB>positive<TAB>negative``, the clean
  triples behind the first training queries (for the triples format)
"""
import os
import random

PRODUCTS = ["花呗", "借呗", "信用卡", "余额宝", "备用金"]
INTENTS = {
    "repay": ["{p}怎么还款", "{p}在哪里还钱", "我想把{p}的钱还上", "{p}的账单怎么还清", "如何提前还{p}"],
    "limit": ["{p}额度怎么提升", "为什么{p}额度这么低", "怎样才能提高{p}的额度", "{p}能不能加额度", "{p}提额要什么条件"],
    "overdue": ["{p}逾期了会怎么样", "{p}晚还一天有影响吗", "{p}没按时还款怎么办", "{p}逾期会影响征信吗", "{p}过了还款日还能还吗"],
    "open": ["{p}怎么开通", "为什么我开通不了{p}", "{p}在哪里申请", "我没有{p}怎么办理", "开通{p}需要什么"],
    "close": ["{p}怎么关闭", "我不想用{p}了怎么注销", "如何取消{p}", "{p}能关掉吗", "怎么停用{p}"],
    "interest": ["{p}利息怎么算", "{p}的利率是多少", "用{p}要收手续费吗", "{p}分期利息高吗", "{p}每天的利息多少"],
}
PREFIX = ["", "", "", "请问", "你好，", "我想问一下", "咨询一下，"]
SUFFIX = ["", "", "？", "？", "呢", "啊"]
SIZES = {"train": 450, "dev": 80, "test": 80, "predict": 12}  # queries per split
NOISE = 0.03
EASY = 0.35  # share of negatives that share neither product nor intent


def question(rng, product, intent, avoid=None):
    templates = [t for t in INTENTS[intent] if t != avoid] or INTENTS[intent]
    template = rng.choice(templates)
    return template, rng.choice(PREFIX) + template.format(p=product) + rng.choice(SUFFIX)


def negative(rng, product, intent):
    """Mostly hard (one of product / intent shared), a third easy (neither)."""
    if rng.random() < EASY:
        other_product = rng.choice([p for p in PRODUCTS if p != product])
        return question(rng, other_product, rng.choice([i for i in INTENTS if i != intent]))[1]
    if rng.random() < 0.5:
        other = rng.choice([i for i in INTENTS if i != intent])
        return question(rng, product, other)[1]
    other = rng.choice([p for p in PRODUCTS if p != product])
    return question(rng, other, intent)[1]


def make_group(rng):
    """One query with its positives and negatives: ``(query, [(text, label)])``."""
    product, intent = rng.choice(PRODUCTS), rng.choice(list(INTENTS))
    template, query = question(rng, product, intent)
    pairs = [(question(rng, product, intent, avoid=template)[1], "1") for _ in range(rng.choice([1, 1, 2]))]
    pairs += [(negative(rng, product, intent), "0") for _ in range(rng.choice([1, 2, 3]))]
    rng.shuffle(pairs)
    return query, pairs


def make_matching(folder, seed=7):
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    triples = []
    for split, queries in SIZES.items():
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            for _ in range(queries):
                query, pairs = make_group(rng)
                if split == "train":
                    triples += [(query, p, n) for p, lp in pairs if lp == "1" for n, ln in pairs if ln == "0"]
                for text, label in pairs:
                    if rng.random() < NOISE:
                        label = "1" if label == "0" else "0"
                    f.write(f"{query}\t{text}\n" if split == "predict" else f"{query}\t{text}\t{label}\n")
    with open(os.path.join(folder, "train_triples.tsv"), "w", encoding="utf-8") as f:
        for row in triples[:400]:
            f.write("\t".join(row) + "\n")


if __name__ == "__main__":
    make_matching(os.path.join("data", "match"))
