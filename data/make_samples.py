"""Make the small sample sets in data/ (deterministic; run from the repo root).

    python data/make_samples.py

The texts are synthetic: short Chinese news-like sentences assembled from
topic phrases, shared filler and some distractor phrases from other topics,
so that a model has to learn which phrases matter, and 4% of the labels
are redrawn at random (annotation noise). Classes are imbalanced on
purpose (about 56 / 25 / 12 / 7 %), as in the data sets this toolkit is for.
"""
import os
import random

TOPICS = {
    "sports": ["主队在加时赛中绝杀对手", "这名前锋本赛季已经打进二十球", "国家队公布了亚洲杯大名单",
               "马拉松比赛吸引了三万名选手", "教练赛后表示防守还需加强", "羽毛球女单决赛打满三局",
               "联赛积分榜前四名咬得很紧", "年轻门将扑出了关键点球"],
    "finance": ["央行宣布下调存款准备金率", "上证指数午后震荡走高", "这家银行一季度净利润增长", "人民币汇率小幅回落",
                "多家券商上调了全年预期", "债券市场收益率继续下行", "基金经理看好消费板块", "上市公司发布了回购公告"],
    "tech": ["新款手机搭载了自研芯片", "研究团队训练了更大的语言模型", "这款软件修复了安全漏洞",
             "卫星互联网完成在轨测试", "自动驾驶汽车开始路测", "量子计算机实现新的突破", "开源社区发布了新版本",
             "数据中心改用液冷散热"],
    "health": ["医生提醒冬季注意预防流感", "新药三期临床试验结果公布", "专家建议每天步行半小时",
               "医院开设了睡眠门诊", "研究发现久坐增加心脏风险", "疫苗接种点延长了服务时间"],
}
SHARE = {"sports": 0.56, "finance": 0.25, "tech": 0.12, "health": 0.07}
FILLER = ["记者了解到", "据报道", "业内人士认为", "消息发布后", "今天上午", "截至目前", "值得注意的是",
          "不少网友表示", "相关负责人说", "从现场情况看"]
SIZES = {"train": 1200, "dev": 300, "test": 300, "predict": 40}


def sentence(rng, topic):
    parts = rng.sample(TOPICS[topic], k=rng.choice([1, 1, 2]))
    if rng.random() < 0.25:  # a distractor from another topic
        other = rng.choice([t for t in TOPICS if t != topic])
        parts.append(rng.choice(TOPICS[other]))
        parts.append(rng.choice(TOPICS[topic]))  # the true topic still dominates
    rng.shuffle(parts)
    return rng.choice(FILLER) + "，" + "，".join(parts) + "。"


def make_classification(folder, seed=13):
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    topics, weights = zip(*SHARE.items())
    for split, size in SIZES.items():
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            for _ in range(size):
                topic = rng.choices(topics, weights)[0]
                text = sentence(rng, topic)
                if rng.random() < 0.04:  # annotation noise, as in real data
                    topic = rng.choice(topics)
                f.write(text + "\n" if split == "predict" else f"{text}\t{topic}\n")


def make_multilabel(folder, seed=17):
    """Multi-label variant: a sentence mentions one to three topics, and its
    labels are exactly the topics it mentions (comma-separated)."""
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    topics, weights = zip(*SHARE.items())
    for split, size in (("train", 800), ("dev", 200), ("test", 200)):
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            for _ in range(size):
                chosen = {rng.choices(topics, weights)[0] for _ in range(rng.choice([1, 1, 2, 3]))}
                parts = [rng.choice(TOPICS[t]) for t in chosen]
                rng.shuffle(parts)
                f.write(f"{rng.choice(FILLER)}，{'，'.join(parts)}。\t{','.join(sorted(chosen))}\n")


if __name__ == "__main__":
    make_classification(os.path.join("data", "cls"))
    make_multilabel(os.path.join("data", "cls_multilabel"))
