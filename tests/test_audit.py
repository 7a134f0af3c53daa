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
    assert report["splits"]["train"]["labels"] == {"PER": 2, "LOC": 2}  # entity types, not tags


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


def test_training_after_an_audit_keeps_it_and_a_replacement_treats_it_as_the_old_runs(tmp_path, capsys):
    """README's order, --do audit then train, keeps audit.md/audit.json byte-identical; an
    overwrite_output_dir replacement of that finished run moves them aside with the rest of it."""
    out = tmp_path / "out"
    common = ["--param_path", CLS, "--set", f"trainer.output_dir={out}", "--set", "trainer.progress_bar=false",
              "--set", "trainer.plots=false", "--set", "trainer.max_steps=2", "--set", "trainer.eval_steps=0"]
    assert run_trainer.main([*common, "--do", "audit"]) == 0
    before = {name: (out / name).read_bytes() for name in ("audit.md", "audit.json")}
    assert run_trainer.main([*common, "--do", "train"]) == 0
    assert {name: (out / name).read_bytes() for name in before} == before
    assert os.path.isdir(out / "best")
    assert run_trainer.main([*common, "--do", "train", "--set", "trainer.overwrite_output_dir=true"]) == 0
    assert not os.path.exists(out / "audit.md") and not os.path.exists(out / "audit.json")


POOL = "甲乙丙丁戊己庚辛壬癸"


def test_lengths_before_the_cut_unknown_words_as_unk_and_what_to_try(tmp_path, capsys):
    """Known lengths: a from-scratch vocabulary gives one token per character, plus [CLS] and [SEP]."""
    short = [f"体育{POOL[i // 10]}{POOL[i % 10]}新闻\tsports" for i in range(40)]  # 6 characters: 8 tokens
    long = [f"财经{POOL[i]}" + "股市上涨" * 7 + "\tfinance" for i in range(3)]  # 31 characters: 33 tokens
    train = short + long + ["PaddlePaddle很好用\tsports"]  # one word piece for the Latin word, none unknown
    dev = short[:4] + ["体育鑫鑫新闻\tsports", "财经乙\tfinance"]  # 鑫 is in no training text: [UNK]
    report, out = audit(tmp_path, CLS, capsys, train=write(tmp_path / "train.tsv", train),
                        dev=write(tmp_path / "dev.tsv", dev), test="null", max_seq_len=16)
    row = report["splits"]["train"]
    assert row["length_percentiles"] == {"p50": 8, "p90": 8, "p99": 33, "max": 33}
    assert row["longer_than_max_seq_len"] == 3 and row["share_cut"] == round(3 / 44, 4)
    assert "audit: train: 3 of 44 inputs (6.8%) are longer than max_seq_len=16 tokens (the longest 33) " \
           "and are cut to it" in out
    # [UNK] is what the list means: nothing unknown in train (not P, a, d, ... of PaddlePaddle), 鑫 twice in dev
    assert row["unknown_token_share"] == 0.0 and "unknown_words" not in row
    dev_row = report["splits"]["dev"]
    assert dev_row["unknown_words"] == {"distinct": 1, "occurrences": 2, "top": {"鑫": 2}}
    assert dev_row["unknown_token_share"] == round(2 / (5 * 6 + 3), 4)
    assert "audit: dev: 6.1% of the tokens are unknown to the vocabulary ([UNK]), e.g. 鑫" in out
    advice = {a["key"]: a for a in report["what_to_try"]}
    assert list(advice) == ["trainer.sampler", "dataset_reader.max_seq_len", "dataset_reader.dev"]
    assert advice["trainer.sampler"]["try"] == "balanced"
    assert advice["dataset_reader.max_seq_len"]["try"] == 33
    assert "audit: try trainer.sampler: balanced (train classes are 13.67 apart ('sports' 41, 'finance' 3)" in out
    assert "audit: try dataset_reader.max_seq_len: 33 (train: 6.8% of the inputs are longer than 16 tokens" in out
    few = [a for a in report["what_to_try"] if a["try"] == "more dev examples of these classes"]
    assert few[0]["why"] == "dev has fewer than 10 examples of 'finance' (1), 'sports' (5): their F1 will be noisy"
    leak = [a for a in report["what_to_try"] if str(a["try"]).startswith("remove")]
    assert leak == [{"key": "dataset_reader.dev", "try": "remove the 4 shared text(s)",
                     "why": "4 text(s) of dev also occur in train: a score on them measures memory, not "
                            "generalisation"}]
    markdown = (tmp_path / "out" / "audit.md").read_text(encoding="utf-8")
    assert "## What to try" in markdown and "- `trainer.sampler: balanced`: train classes" in markdown
    assert "| train | 44 | 2 | 13.67 | 8 / 8 / 33 / 33 | 3 (6.8%) | 0.0 |" in markdown


def test_ner_imbalance_is_over_entity_types_with_o_apart(tmp_path, capsys):
    per = ["张 B-PER", "三 I-PER", "来 O", "了 O", ""]
    loc = ["北 B-LOC", "京 I-LOC", "好 O", ""]
    train = per * 12 + loc  # 12 PER entities, 1 LOC; 25 of 51 tokens are O
    report, out = audit(tmp_path, NER, capsys, train=write(tmp_path / "train.txt", train),
                        dev=write(tmp_path / "dev.txt", per + loc), test="null")
    row = report["splits"]["train"]
    assert row["labels"] == {"PER": 12, "LOC": 1} and row["imbalance_ratio"] == 12
    assert "audit: train: imbalance ratio 12 (most common 'PER' 12, rarest 'LOC' 1)" in out
    assert report["task"]["train: tokens tagged O"] == f"{25 / 51:.1%}"
    assert row["length_percentiles"]["max"] == 6  # 4 characters, [CLS], [SEP]
    few = [a for a in report["what_to_try"] if a["key"] == "dataset_reader.dev"]
    assert few[0]["why"] == "dev has fewer than 10 examples of 'PER' (1), 'LOC' (1): their F1 will be noisy"


def test_a_few_long_outliers_ask_for_no_longer_max_seq_len():
    """2 of 5000 cut (p99 within max_seq_len) is a warning, not a reason to change the key."""
    from appzoo.reports.audit import _percent, what_to_try

    row = {"examples": 5000, "length_percentiles": {"p50": 23, "p90": 32, "p99": 40, "max": 147},
           "longer_than_max_seq_len": 2, "share_cut": 0.0004}
    report = {"max_seq_len": 64, "splits": {"train": row}, "leakage": {}}
    assert what_to_try(report) == []
    assert _percent(0.0004) == "<0.1%" and _percent(0.0) == "0.0%" and _percent(0.068) == "6.8%"
    row["length_percentiles"]["p99"] = 70
    assert [a["try"] for a in what_to_try(report)] == [70]
