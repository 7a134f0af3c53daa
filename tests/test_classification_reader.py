"""The text-classification reader: every file option, labels, errors."""
import numpy as np
import pytest

from appzoo.errors import ConfigError, DataError
from appzoo.metrics import classification_metrics
from conftest import write
from tasks.text_classification.reader import ClassificationReader


def texts_labels(examples):
    return [(e["text"], e["label"]) for e in examples]


def test_tsv_defaults_text_then_label(tmp_path):
    path = write(tmp_path, "a.tsv", "好看\tpos\n\n难看\tneg\n")
    assert texts_labels(ClassificationReader().read(path, "train")) == [("好看", "pos"), ("难看", "neg")]


def test_columns_by_index_and_custom_delimiter(tmp_path):
    path = write(tmp_path, "a.txt", "pos|x|good film\nneg|y|bad film\n")
    reader = ClassificationReader(delimiter="|", text_column=2, label_column=0)
    assert texts_labels(reader.read(path, "train")) == [("good film", "pos"), ("bad film", "neg")]


def test_header_names_select_columns(tmp_path):
    path = write(tmp_path, "a.tsv", "id\tlabel\treview\n1\tpos\tgood\n2\tneg\tbad\n")
    reader = ClassificationReader(header=1, text_column="review", label_column="label")
    assert texts_labels(reader.read(path, "train")) == [("good", "pos"), ("bad", "neg")]


def test_header_name_unknown_is_an_error(tmp_path):
    path = write(tmp_path, "a.tsv", "id\tlabel\treview\n1\tpos\tgood\n")
    with pytest.raises(DataError, match=r"a\.tsv:1: no column named 'text' for 'text' in the header \(columns: id, label, review\)"):
        ClassificationReader(header=1, text_column="text", label_column="label").read(path, "train")


def test_csv_quoting_keeps_commas_quotes_and_newlines(tmp_path):
    path = write(tmp_path, "a.csv", 'label,review\n1,"great, really ""great"""\n0,"two\nlines"\n')
    reader = ClassificationReader(format="csv", header=1, text_column="review", label_column="label")
    assert texts_labels(reader.read(path, "train")) == [('great, really "great"', "1"), ("two\nlines", "0")]


def test_tsv_without_quoting_keeps_quotes_literally(tmp_path):
    path = write(tmp_path, "a.tsv", 'he said "hi\tpos\n')
    assert ClassificationReader().read(path, "train")[0]["text"] == 'he said "hi'


def test_utf8_bom_is_dropped(tmp_path):
    path = write(tmp_path, "a.tsv", "label\ttext\npos\t好\n", encoding="utf-8-sig")
    reader = ClassificationReader(header=1, text_column="text", label_column="label")
    assert texts_labels(reader.read(path, "train")) == [("好", "pos")]


def test_jsonl_field_names(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"sentence": "好", "y": "pos"}\n{"sentence": "坏", "y": "neg"}\n')
    reader = ClassificationReader(format="jsonl", text_column="sentence", label_column="y")
    assert texts_labels(reader.read(path, "train")) == [("好", "pos"), ("坏", "neg")]


def test_jsonl_errors_name_file_and_line(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"text": "a", "label": "x"}\n{"text": "b"}\n')
    with pytest.raises(DataError, match=r"a\.jsonl:2: missing field 'label' for 'label'"):
        ClassificationReader(format="jsonl").read(path, "train")
    path = write(tmp_path, "b.jsonl", '{"text": "a", "label": "x"}\n{"text": \n')
    with pytest.raises(DataError, match=r"b\.jsonl:2: not valid JSON"):
        ClassificationReader(format="jsonl").read(path, "train")


def test_short_row_names_file_line_and_fields(tmp_path):
    path = write(tmp_path, "a.tsv", "good\tpos\nno label here\n")
    with pytest.raises(DataError, match=r"a\.tsv:2: expected a column 1 for 'label', the line has 1 field\(s\) split by '\\t'"):
        ClassificationReader().read(path, "train")


def test_predict_file_may_lack_labels(tmp_path):
    path = write(tmp_path, "p.tsv", "only text\n")
    assert texts_labels(ClassificationReader().read(path, "predict")) == [("only text", None)]


def test_unknown_label_in_dev_names_file_line_and_suggests(tmp_path):
    train = ClassificationReader().read(write(tmp_path, "t.tsv", "a\tsports\nb\tfinance\n"), "train")
    reader = ClassificationReader()
    labels = reader.build_labels(train)
    dev = reader.read(write(tmp_path, "d.tsv", "c\tsports\nd\tsport\n"), "dev")
    with pytest.raises(DataError, match=r"d\.tsv:2: label 'sport' is not in the label set; did you mean 'sports'\? \(labels: finance, sports\)"):
        reader.check_labels(dev, labels, "d.tsv")


def test_label_file_fixes_the_order(tmp_path):
    labels_path = write(tmp_path, "labels.txt", "sports\nfinance\nother\n")
    reader = ClassificationReader(label_file=labels_path)
    train = reader.read(write(tmp_path, "t.tsv", "a\tsports\nb\tfinance\n"), "train")
    assert reader.build_labels(train) == ["sports", "finance", "other"]
    assert reader.model_args(["sports", "finance", "other"], train)["class_counts"] == [1, 1, 0]


def test_a_single_training_label_is_an_error_unless_the_label_file_lists_more(tmp_path):
    reader = ClassificationReader()
    train = reader.read(write(tmp_path, "t.tsv", "a\tsports\nb\tsports\n"), "train")
    with pytest.raises(DataError, match=r"t\.tsv: every training row has one label, 'sports'; a single-label "
                                        r"classifier needs at least 2 \(list every label in dataset_reader\.label_file"):
        reader.build_labels(train)
    with pytest.raises(DataError, match=r"one\.txt: lists one label, 'sports'"):
        ClassificationReader(label_file=write(tmp_path, "one.txt", "sports\n")).build_labels(train)
    assert ClassificationReader(label_file=write(tmp_path, "two.txt", "sports\nother\n")).build_labels(train) == [
        "sports", "other"]
    multi = ClassificationReader(multi_label=True)  # one yes/no label: a sigmoid
    assert multi.build_labels(multi.read(write(tmp_path, "m.tsv", "a\tspam\nb\t\n"), "train")) == ["spam"]


@pytest.mark.parametrize("first, warned", [
    ("text\tlabel", True), ("句子\tlabel", True), ("text\tsentiment_label", True),
    ("好看\tpos", False),  # an ordinary first row of a label that occurs once
    ("text\tsports", False),  # the label occurs on other rows too
])
def test_a_header_row_read_as_data_is_warned_about(tmp_path, capsys, first, warned):
    path = write(tmp_path, "t.tsv", f"{first}\na\tsports\nb\tfinance\n")
    reader = ClassificationReader()
    labels = reader.build_labels(reader.read(path, "train"))
    out = "".join(capsys.readouterr())
    assert ("looks like a header row" in out) == warned, out
    if warned:
        assert f"{path}:1: the label" in out and "set dataset_reader.header=1" in out
        skipped = ClassificationReader(header=1)
        assert skipped.build_labels(skipped.read(path, "train")) == ["finance", "sports"]
    else:
        assert len(labels) >= 2


def test_multi_label_with_separator(tmp_path):
    reader = ClassificationReader(multi_label=True, label_separator="|")
    train = reader.read(write(tmp_path, "t.tsv", "a\tx|y\nb\ty\n"), "train")
    labels = reader.build_labels(train)
    assert labels == ["x", "y"] and train[0]["label"] == ["x", "y"]
    assert reader.model_args(labels, train) == {"num_labels": 2, "class_counts": [1, 2], "multi_label": True,
                                              "train_size": 2}


def test_empty_text_and_empty_file(tmp_path):
    with pytest.raises(DataError, match=r"a\.tsv:1: empty text"):
        ClassificationReader().read(write(tmp_path, "a.tsv", " \tpos\n"), "train")
    with pytest.raises(DataError, match=r"e\.tsv: no examples"):
        ClassificationReader().read(write(tmp_path, "e.tsv", "\n"), "train")


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.tsv: file not found"):
        ClassificationReader().read(str(tmp_path / "nope.tsv"), "train")


def test_constructor_ranges():
    with pytest.raises(ConfigError, match=r"dataset_reader\.threshold: must be in \(0, 1\), got 1\.5"):
        ClassificationReader(threshold=1.5)


def test_metrics_match_hand_computed_values():
    # gold: a a a b b c ; pred: a a b b c c
    m = classification_metrics([0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 2, 2], ["a", "b", "c"])
    assert m["accuracy"] == pytest.approx(4 / 6)
    f1 = {"a": 2 * 1 * (2 / 3) / (1 + 2 / 3), "b": 0.5, "c": 2 * 0.5 * 1 / 1.5}
    assert m["macro_f1"] == pytest.approx(np.mean(list(f1.values())))
    assert m["per_class"]["b"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2}
    assert m["confusion_matrix"] == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]  # rows gold, columns predicted


def test_label_file_errors(tmp_path):
    train = [{"text": "a", "label": "x", "source": "t.tsv:1"}]
    with pytest.raises(DataError, match=r"labels\.txt: the label 'x' is listed twice"):
        ClassificationReader(label_file=write(tmp_path, "labels.txt", "x\ny\nx\n")).build_labels(train)
    with pytest.raises(ConfigError, match=r"dataset_reader\.label_file: no such file"):
        ClassificationReader(label_file=str(tmp_path / "none.txt")).build_labels(train)
