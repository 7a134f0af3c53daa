"""Make the small NER sample set in data/ner/ (deterministic; run from the repo root).

    python data/make_ner_samples.py

Synthetic Chinese news sentences, one character per token, tags in BIO:
person names (PER) drawn from surname + given-name parts, so test names are
mostly unseen combinations; organisations (ORG) and places (LOC) built from
a stem and a suffix, where 30% of the ORG stems are place names and dev/test
hold four place names never seen in training; a rare product type (PROD,
about 5% of the mentions); 3% of the mentions are left untagged (noise).
About 60% of the characters are ``O``, and about 5% of the sentences are
long (several clauses, 70-140 characters) so that ``max_seq_len`` 64 has to
split them into windows. Files: train/dev/test.txt in CoNLL two-column form
(``char<TAB>tag``, blank line between sentences) and predict.txt with the
character column only.
"""
import os
import random

SURNAMES = "王李张刘陈杨黄赵周吴徐孙马朱胡郭何林罗高"
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰涛明超秀霞平刚桂英华玉兰文"
ORG_STEMS = ["华信", "长江", "星海", "东方", "新锐", "远航", "蓝天", "金桥", "宏达", "青山"]
ORG_SUFFIXES = ["科技公司", "银行", "大学", "研究院", "集团", "足球俱乐部", "出版社"]
LOC_STEMS = ["北京", "上海", "杭州", "成都", "西安", "武汉", "南京", "广州", "青岛", "昆明", "兰州", "厦门"]
UNSEEN_LOC_STEMS = ["拉萨", "海口", "长沙", "大连"]  # only in dev/test/predict: read from context
LOC_SUFFIXES = ["", "", "", "市", "西湖", "火车站", "开发区"]
PRODUCTS = ["星河手机", "青鸟音箱", "飞云平板", "极光耳机"]

TEMPLATES = [
    "{PER}在{LOC}参加了{ORG}的发布会",
    "{ORG}宣布将在{LOC}建设新工厂",
    "记者从{ORG}获悉，{PER}已经抵达{LOC}",
    "{PER}和{PER}一起来到{LOC}考察",
    "{ORG}的负责人{PER}接受了采访",
    "{PER}表示{PROD}的销量超出了预期",
    "今年夏天{LOC}的游客明显增多",
    "{ORG}与{ORG}签署了合作协议",
    "{PER}毕业于{ORG}，现在{LOC}工作",
    "{LOC}举办了一场大型招聘会",
]
FILLER = ["天气转凉之后大家都添了衣服", "这项工作还需要进一步推进", "会议持续了大约两个小时",
          "不少网友在评论区留言", "相关部门正在调查具体原因", "现场气氛非常热烈"]
SIZES = {"train": 800, "dev": 200, "test": 200, "predict": 20}


def mention(rng, kind, split):
    places = LOC_STEMS + (UNSEEN_LOC_STEMS if split != "train" else [])
    if kind == "PER":
        return rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.choice([1, 2])))
    if kind == "ORG":  # a place name inside an organisation is part of the ORG, not a LOC
        return rng.choice(places if rng.random() < 0.3 else ORG_STEMS) + rng.choice(ORG_SUFFIXES)
    if kind == "LOC":
        return rng.choice(places) + rng.choice(LOC_SUFFIXES)
    return rng.choice(PRODUCTS)


def clause(rng, split):
    """``[(char, tag)]`` of one clause."""
    if rng.random() < 0.2:
        return [(c, "O") for c in rng.choice(FILLER)]
    out, text = [], rng.choice(TEMPLATES)
    while text:
        start = text.find("{")
        if start < 0:
            out += [(c, "O") for c in text]
            break
        out += [(c, "O") for c in text[:start]]
        end = text.index("}", start)
        kind = text[start + 1:end]
        name = mention(rng, kind, split)
        missed = rng.random() < 0.03  # annotation noise: a mention left untagged
        out += [(c, "O" if missed else ("B-" if i == 0 else "I-") + kind) for i, c in enumerate(name)]
        text = text[end + 1:]
    return out


def sentence(rng, split):
    parts = [clause(rng, split) for _ in range(rng.randint(4, 6) if rng.random() < 0.05 else rng.choice([1, 1, 2]))]
    out = []
    for i, part in enumerate(parts):
        out += part + [("，" if i < len(parts) - 1 else "。", "O")]
    return out


def make_ner(folder, seed=7):
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    for split, size in SIZES.items():
        with open(os.path.join(folder, f"{split}.txt"), "w", encoding="utf-8") as f:
            for i in range(size):
                if i:
                    f.write("\n")
                for char, tag in sentence(rng, split):
                    f.write(f"{char}\n" if split == "predict" else f"{char}\t{tag}\n")


if __name__ == "__main__":
    make_ner(os.path.join("data", "ner"))
