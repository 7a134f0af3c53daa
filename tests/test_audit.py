"""--do audit on made-up data whose leakage, conflicts, imbalance and cuts are known."""
import json
import os

import run_trainer

CLS = "examples/cls_ernie_fc_ch.json"
NER = "examples/ner_ernie_crf_ch.json"
MATCH = "examples/mtch_ernie_fc_pointwise_ch.json"


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def audit(tmp_path, example, capsys, **files):
    out = tmp_path / "out"
    sets = [f"dataset_reader.{split}={path}" for split, path in files.items()]
    argv = ["--param_path", example, "--do", "audit", "--set", f"trainer.output_dir={out}",
            "--set", "trainer.progress_bar=false", "--set", "dataset_reader.predict=null"]
    for item in sets:
        argv += ["--set", item]
    assert run_trainer.main(argv) == 0
    with open(out / "audit.json", encoding="utf-8") as f:
        report = json.load(f)
    assert os.path.isfile(out / "audit.md")
    assert not os.path.exists(out / "best")  # an audit trains nothing
    return report, capsys.readouterr().out


def test_classification_leakage_conflicts_and_imbalance(tmp_path, capsys):
    train = [f"体育新闻第{i}条，比赛很精彩。\tsports" for i in range(40)] + \
            ["财经消息，股市上涨。\tfinance", "一模一样的句子。\tsports", "一模一样的句子。\tfinance"]
    dev = ["体育新闻第3条，比赛很精彩。\tsports", "财经消息，股市上涨。\tfinance", "全新的开发集句子。\tsports"]
    test = ["全新的测试句子。\tfinance", "体育新闻第7条，比赛很精彩。\tsports"]
    report, out = audit(tmp_path, CLS, capsys, train=write(tmp_path / "train.tsv", train),
                        dev=write(tmp_path / "dev.tsv", dev), test=write(tmp_path / "test.tsv", test))
    assert report["splits"]["train"]["labels"] == {"sports": 41, "finance": 2}
    assert report["splits"]["train"]["imbalance_ratio"] == 20.5
    assert report["leakage"]["train-dev"]["count"] == 2
    assert report["leakage"]["train-test"]["count"] == 1
    assert report["leakage"]["dev-test"]["count"] == 0
    assert report["conflicts"]["count"] == 1 and "一模一样的句子。" in report["conflicts"]["examples"][0]
    assert "audit: train: imbalance ratio 20.5" in out
    assert "audit: leakage: 2 text(s) of dev also occur in train" in out
    assert "audit: conflicts: 1 text(s) occur with different labels" in out


def test_ner_windows_that_cut_an_entity(tmp_path, capsys):
    long = ["我 O"] * 20 + ["北 B-LOC", "京 I-LOC", "市 I-LOC"] + ["好 O"] * 20
    short = ["张 B-PER", "三 I-PER", "来 O", "了 O"]
    train = (long + [""] + short + [""]) * 2
    report, out = audit(tmp_path, NER, capsys, train=write(tmp_path / "train.txt", train),
                        dev=write(tmp_path / "dev.txt", short + [""]), test=write(tmp_path / "test.txt", short),
                        max_seq_len=24, window_overlap=1)
    task = report["task"]
    assert task["train: sentences cut into windows"] == 2
    assert task["train: entities that no window holds whole"] == 2
    assert "span a window cut" in out
    assert report["splits"]["train"]["labels"]["B-LOC"] == 2


def test_matching_queries_pairs_and_in_batch_false_negatives(tmp_path, capsys):
    train = ["甲问题\t甲答案\t1", "甲问题\t乙答案\t0", "乙问题\t乙答案\t1", "乙问题\t乙答案\t1",
             "丙问题\t丙答案\t0", "丁问题\t甲答案\t1"]
    report, _ = audit(tmp_path, MATCH, capsys, train=write(tmp_path / "train.tsv", train),
                      dev=write(tmp_path / "dev.tsv", train[:3]), test=write(tmp_path / "test.tsv", train[3:]))
    task = report["task"]
    assert task["train queries"] == 4
    assert task["queries without a positive"] == 1  # 丙
    assert task["queries without a negative"] == 2  # 乙, 丁
    assert task["duplicate pairs"] == 1
    # positives: (甲,甲), (乙,乙) twice, (丁,甲): a batch of all four has 12 mate pairs; false ones:
    # the two 乙 copies (2), 甲 answer shared by 甲 and 丁 (2), and (丁, 甲答案) known for 甲's mate... = 4 of 12
    key = next(k for k in task if k.startswith("in-batch false negatives"))
    assert task[key].startswith("33.333%")
