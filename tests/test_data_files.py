"""Data files as they come: encodings, bad lines, rows with a delimiter inside
a text, labels that differ only by case, JSONL values of the wrong type."""
import pytest

import run_trainer
from appzoo.params.keys import check_kwargs
from appzoo.task.reader import read_label_file
from appzoo.errors import ConfigError, DataError
from appzoo.registry import READERS
from tasks.sequence_labeling.reader import SequenceLabelingReader
from tasks.text_classification.reader import ClassificationReader

Matching = READERS.get("text_matching", "t")
Pairwise = READERS.get("text_matching_pairwise", "t")
UTF8_HINT = r' \(hint: set dataset_reader\.encoding, e\.g\. "gbk" or "utf-16", or on_bad_line: "skip"\)$'


def write(tmp_path, name, data):
    """``data``: bytes as they are, or text written as UTF-8."""
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def pairs(examples):
    return [(e["text"], e["label"]) for e in examples]


# ---- encodings ---------------------------------------------------------------
def test_invalid_utf8_byte_names_file_line_column_and_hint(tmp_path):
    path = write(tmp_path, "a.tsv", "good\tpos\n".encode() + "café\tneg\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"a\.tsv:2: invalid UTF-8 byte 0xe9 at column 4" + UTF8_HINT):
        ClassificationReader().read(path, "train")


@pytest.mark.parametrize("reader, text", [
    (ClassificationReader(), "你好\tpos\n"),
    (Matching(), "你好\t您好\t1\n"),
    (SequenceLabelingReader(), "你\tO\n好\tO\n"),
    (SequenceLabelingReader(format="jsonl"), '{"tokens": "你好", "tags": ["O", "O"]}\n'),
])
def test_gbk_file_read_as_utf8_is_one_line_in_every_reader(tmp_path, reader, text):
    path = write(tmp_path, "g.txt", text.encode("gbk"))
    first = text.encode("gbk").index("你".encode("gbk"))  # the first byte that is not ASCII
    with pytest.raises(DataError, match=rf"g\.txt:1: invalid UTF-8 byte 0xc4 at column {first + 1}" + UTF8_HINT):
        reader.read(path, "train")


def test_utf16_file_names_its_byte_order_mark(tmp_path):
    path = write(tmp_path, "u.tsv", "好看\tpos\n".encode("utf-16"))  # with a BOM
    with pytest.raises(DataError, match=r'u\.tsv:1: invalid UTF-8 byte 0x(ff|fe) at column 1: the file starts with '
                                        r'a UTF-16 byte-order mark \(hint: set dataset_reader\.encoding: "utf-16"\)$'):
        ClassificationReader().read(path, "train")


def test_utf16_without_bom_is_caught_by_its_nul_bytes(tmp_path):
    path = write(tmp_path, "u.tsv", "good\tpos\n".encode("utf-16-le"))
    with pytest.raises(DataError, match=r'u\.tsv:1: NUL byte at column 2 \(a UTF-16 file\? '
                                        r'hint: set dataset_reader\.encoding, e\.g\. "utf-16"\)$'):
        ClassificationReader().read(path, "train")


@pytest.mark.parametrize("encoding", ["gbk", "utf-16", "utf-16-le", "latin-1", "utf-8-sig"])
def test_configured_encoding_reads_the_file(tmp_path, encoding):
    text = "café\tpos\n" if encoding == "latin-1" else "好看\tpos\n"
    bom = "\ufeff" if encoding == "utf-16-le" else ""  # utf-16 and utf-8-sig write their own
    path = write(tmp_path, "a.tsv", (bom + text + "x\tneg\n").encode(encoding))
    assert pairs(ClassificationReader(encoding=encoding).read(path, "train")) == \
        [(text.split("\t")[0], "pos"), ("x", "neg")]  # a BOM is dropped whatever the encoding


def test_encoding_reaches_every_reader_and_the_label_file(tmp_path):
    gbk = "gbk"
    assert Matching(encoding=gbk).read(write(tmp_path, "m.tsv", "你\t好\t1\n".encode(gbk)), "train")[0]["text_a"] == "你"
    tags = SequenceLabelingReader(encoding=gbk).read(write(tmp_path, "s.txt", "北\tB-LOC\n京\tI-LOC\n".encode(gbk)),
                                                     "train")
    assert tags[0]["tokens"] == ["北", "京"]
    labels = write(tmp_path, "labels.txt", "体育\n财经\n".encode(gbk))
    reader = ClassificationReader(encoding=gbk, label_file=labels)
    train = reader.read(write(tmp_path, "c.tsv", "赢了\t体育\n".encode(gbk)), "train")
    assert reader.build_labels(train) == ["体育", "财经"]
    with pytest.raises(DataError, match=r"labels\.txt:1: invalid UTF-8 byte 0xcc at column 1"):
        read_label_file(labels)


def test_wrong_configured_encoding_says_so(tmp_path):
    path = write(tmp_path, "a.tsv", b"ok\tpos\n\x81\x20\tneg\n")  # 0x81 0x20 is no GBK character
    with pytest.raises(DataError, match=r"a\.tsv:2: invalid gbk byte 0x81 at column 1 \(hint: is "
                                        r"dataset_reader\.encoding 'gbk' the file's encoding\? or set "
                                        r'on_bad_line: "skip"\)$'):
        ClassificationReader(encoding="gbk").read(path, "train")


@pytest.mark.parametrize("kwargs, message", [
    ({"encoding": "xyz"}, r"dataset_reader\.encoding: unknown encoding 'xyz'$"),
    ({"encoding": "base64"}, r"dataset_reader\.encoding: 'base64' is not a text encoding$"),
    ({"on_bad_line": "ignore"}, r"dataset_reader\.on_bad_line: expected one of 'error', 'skip', got 'ignore'$"),
])
@pytest.mark.parametrize("reader", [ClassificationReader, Matching, Pairwise, SequenceLabelingReader])
def test_reader_keys_are_checked_at_construction(reader, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        reader(**kwargs)


# ---- the keys follow **kwargs to the base class ---------------------------------
def test_check_kwargs_follows_kwargs_through_the_class_hierarchy():
    section = {"encoding": "gbk", "on_bad_line": "skip", "negatives": "in_batch", "positive_label": "yes"}
    assert check_kwargs(Pairwise, section, "dataset_reader") == section
    with pytest.raises(ConfigError, match=r"dataset_reader\.on_bad_line: expected one of 'error', 'skip', got 'warn'"):
        check_kwargs(ClassificationReader, {"on_bad_line": "warn"}, "dataset_reader")
    with pytest.raises(ConfigError, match=r"dataset_reader\.encoding: expected a string, got 8"):
        check_kwargs(SequenceLabelingReader, {"encoding": 8}, "dataset_reader")
    with pytest.raises(ConfigError, match=r"dataset_reader\.encodng: unknown key for 'text_matching_pairwise'; "
                                          r"did you mean 'encoding'\? \(accepted: .*\bdelimiter\b.*\bencoding\b.*"
                                          r"\bnegatives\b.*\bon_bad_line\b"):
        check_kwargs(Pairwise, {"encodng": "gbk"}, "dataset_reader", label="text_matching_pairwise")




# ---- on_bad_line: skip -----------------------------------------------------------
def test_skip_leaves_out_and_counts_bad_lines(tmp_path, capsys):
    path = write(tmp_path, "a.tsv", b"good\tpos\ncaf\xe9\tneg\nhalf\tof\tit\nbad\tneg\n\tneg\n")
    reader = ClassificationReader(on_bad_line="skip")
    assert pairs(reader.read(path, "train")) == [("good", "pos"), ("bad", "neg")]
    assert reader.skipped == {path: 3}
    out = capsys.readouterr().out.strip()
    assert out == (f"note: skipped 3 bad line(s) of {path} (first: {path}:2: invalid UTF-8 byte 0xe9 at column 4)")


def test_skip_in_jsonl_and_quoted_csv_keeps_line_numbers(tmp_path, capsys):
    path = write(tmp_path, "a.jsonl", '{"text": "a", "label": "x"}\n{"text": \n[1]\n{"text": 5, "label": "x"}\n'
                                      '{"label": "x"}\n{"text": "b", "label": "y"}\n')
    reader = ClassificationReader(format="jsonl", on_bad_line="skip")
    examples = reader.read(path, "train")
    assert [e["source"] for e in examples] == [f"{path}:1", f"{path}:6"] and reader.skipped == {path: 4}
    assert "first: " + path + ":2: not valid JSON" in capsys.readouterr().out

    csv = write(tmp_path, "a.csv", b'text,label\n"two\nlines",x\n"bad\xff",y\n"a, b",x,extra\nok,y\n')
    reader = ClassificationReader(format="csv", header=1, text_column="text", label_column="label",
                                  on_bad_line="skip")
    assert [(e["text"], e["source"]) for e in reader.read(csv, "train")] == \
        [("two\nlines", f"{csv}:2"), ("ok", f"{csv}:6")]
    assert reader.skipped == {csv: 2}


def test_skip_drops_a_whole_conll_sentence_that_lost_a_line(tmp_path):
    path = write(tmp_path, "n.txt", b"a\tO\nb\tO\n\nc\tB-PER\n\xff\tI-PER\nd\tO\n\ne\tO\nf\n\ng\tO\n")
    reader = SequenceLabelingReader(on_bad_line="skip")
    examples = reader.read(path, "train")
    assert [(e["tokens"], e["line"]) for e in examples] == [(["a", "b"], 1), (["g"], 11)]
    assert reader.skipped == {path: 2}
    with pytest.raises(DataError, match=r"n\.txt:5: invalid UTF-8 byte 0xff at column 1"):
        SequenceLabelingReader().read(path, "train")


def test_skipping_every_line_still_says_the_file_is_empty(tmp_path, capsys):
    path = write(tmp_path, "u.tsv", "好\tpos\n坏\tneg\n".encode("gbk"))
    with pytest.raises(DataError, match=r"u\.tsv: no examples$"):
        ClassificationReader(on_bad_line="skip").read(path, "train")
    assert "note: skipped 2 bad line(s)" in capsys.readouterr().out


# ---- more fields than columns ------------------------------------------------------
TOO_MANY = r" \(a delimiter inside a text\? quote the field and set quoting: true, or fix the line\)$"


@pytest.mark.parametrize("reader, text, message", [
    (ClassificationReader(), "good\tpos\nhalf\tof it\tneg\n", r"a\.txt:2: expected 2 field\(s\) split by '\\t', got 3"),
    (ClassificationReader(text_column=1, label_column=0), "pos\tgood\nneg\thalf\tof it\n",
     r"a\.txt:2: expected 2 field\(s\) split by '\\t', got 3"),
    (Matching(), "a\tb\t1\na\tb\tc\t0\n", r"a\.txt:2: expected 3 field\(s\) split by '\\t', got 4"),
    (Matching(header=1, label_column=0, text_a_column=3, text_b_column=4),
     "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n0\t3\t4\tc\td\te\n",
     r"a\.txt:3: expected 5 field\(s\) split by '\\t', got 6"),
    (Pairwise(train_format="triples"), "q\tp\tn\nq\tp\tn\tm\n", r"a\.txt:2: expected 3 field\(s\) split by '\\t', got 4"),
])
def test_a_row_with_more_fields_than_columns_is_an_error(tmp_path, reader, text, message):
    with pytest.raises(DataError, match=message + TOO_MANY):
        reader.read(write(tmp_path, "a.txt", text), "train")


def test_quoted_csv_row_with_more_fields_hints_at_quoting_only(tmp_path):
    path = write(tmp_path, "a.csv", 'text,label\n"a, b",x\nc,d,y\n')
    with pytest.raises(DataError, match=r"a\.csv:3: expected 2 field\(s\) split by ',', got 3 "
                                        r"\(a delimiter inside a text\? quote the field, or fix the line\)$"):
        ClassificationReader(format="csv", header=1, text_column="text", label_column="label").read(path, "train")


def test_extra_fields_that_shift_nothing_are_accepted(tmp_path):
    # a trailing delimiter; unused columns at the end that most rows have; a predict file without labels
    assert pairs(ClassificationReader().read(write(tmp_path, "a.tsv", "a\tx\t\nb\ty\n"), "train")) == \
        [("a", "x"), ("b", "y")]
    ids = write(tmp_path, "b.tsv", "a\tx\t1\nb\ty\t2\nc\tx\t3\n")
    assert pairs(ClassificationReader().read(ids, "train")) == [("a", "x"), ("b", "y"), ("c", "x")]
    with pytest.raises(DataError, match=r"c\.tsv:2: expected 3 field\(s\) split by '\\t', got 4"):
        ClassificationReader().read(write(tmp_path, "c.tsv", "a\tx\t1\nb\tc\ty\t2\nc\tx\t3\n"), "train")
    assert [e["label"] for e in Matching().read(write(tmp_path, "p.tsv", "a\tb\nc\td\n"), "predict")] == [None, None]
    conll = write(tmp_path, "n.txt", "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n")  # CoNLL-2003: 4 columns
    assert SequenceLabelingReader(tag_column=3).read(conll, "train")[0]["tags"] == ["B-ORG", "O"]


# ---- labels that differ only by case or spaces --------------------------------------
def test_labels_differing_by_case_give_one_warning(tmp_path, capsys):
    reader = ClassificationReader()
    train = reader.read(write(tmp_path, "a.tsv", "a\tSports\nb\tsports\nc\tsports\nd\tnews\n"), "train")
    assert reader.build_labels(train) == ["Sports", "news", "sports"]
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["warning: labels that differ only by case, surrounding whitespace or number format are "
                   "different classes: 'Sports' (1) / 'sports' (2) (training counts in brackets; fix the data if "
                   "they mean one label)"]
    reader.build_labels(train[2:])
    assert capsys.readouterr().out == ""


def test_labels_written_as_different_numbers_warn(tmp_path, capsys):
    reader = ClassificationReader()
    reader.build_labels(reader.read(write(tmp_path, "a.tsv", "a\t1\nb\t1.0\nc\t0\nd\t2\ne\t10\n"), "train"))
    out = capsys.readouterr().out
    assert "'1' (1) / '1.0' (1)" in out and "'0'" not in out and "'10'" not in out


def test_multi_label_and_label_file_variants_warn_too(tmp_path, capsys):
    reader = ClassificationReader(multi_label=True)
    reader.build_labels(reader.read(write(tmp_path, "a.tsv", "a\tTech,tech\n"), "train"))
    assert "'Tech' (1) / 'tech' (1)" in capsys.readouterr().out
    reader = ClassificationReader(label_file=write(tmp_path, "l.txt", "Sports\nsports\n"))
    reader.build_labels(reader.read(write(tmp_path, "b.tsv", "a\tsports\n"), "train"))
    assert "'Sports' (0) / 'sports' (1)" in capsys.readouterr().out


def test_ner_tags_differing_by_case_or_spaces_warn(tmp_path, capsys):
    reader = SequenceLabelingReader(format="jsonl")
    train = reader.read(write(tmp_path, "a.jsonl", '{"tokens": "ab", "tags": ["B-PER", "O"]}\n'
                                                   '{"tokens": "cd", "tags": ["B-per", "O"]}\n'
                                                   '{"tokens": ["e"], "tags": ["B-PER "]}\n'), "train")
    reader.build_labels(train)
    out = capsys.readouterr().out
    assert out.count("warning: tags that differ only by case, surrounding whitespace") == 1
    assert all(f"{tag!r} (1)" in out for tag in ("B-PER", "B-per", "B-PER ")) and "'O'" not in out


def test_matching_label_differing_by_case_says_so(tmp_path):
    with pytest.raises(DataError, match=r"a\.tsv:1: label 'Yes' is neither the positive label 'yes' nor the negative "
                                        r"label 'no'; it differs from 'yes' only by case or spaces"):
        Matching(positive_label="yes", negative_label="no").read(write(tmp_path, "a.tsv", "a\tb\tYes\n"), "train")


# ---- JSONL values of the wrong type ---------------------------------------------------
@pytest.mark.parametrize("reader, line, message", [
    (ClassificationReader(format="jsonl"), '{"text": 5, "label": "a"}', r"field 'text' must be a string, got 5"),
    (ClassificationReader(format="jsonl", text_column="s"), '{"s": ["a"], "label": "a"}',
     r"field 's' must be a string, got \[\"a\"\]"),
    (ClassificationReader(format="jsonl"), '{"text": "a", "label": {"y": 1}}',
     r"field 'label' must be a string or a number, got \{\"y\": 1\}"),
    (ClassificationReader(format="jsonl"), '{"text": "a", "label": ["x"]}',
     r"field 'label' must be a string or a number, got \[\"x\"\]"),
    (ClassificationReader(format="jsonl"), '{"text": "a", "label": null}',
     r"field 'label' must be a string or a number, got null"),
    (ClassificationReader(format="jsonl", multi_label=True), '{"text": "a", "label": [{"y": 1}]}',
     r"field 'label' must be a string or a list of strings, got \[\{\"y\": 1\}\]"),
    (Matching(format="jsonl"), '{"text_a": 5, "text_b": "b", "label": 1}', r"field 'text_a' must be a string, got 5"),
    (Matching(format="jsonl"), '{"text_a": "a", "text_b": null, "label": 1}',
     r"field 'text_b' must be a string, got null"),
    (Matching(format="jsonl"), '{"text_a": "a", "text_b": "b", "label": [1]}',
     r"field 'label' must be a string or a number, got \[1\]"),
    (Pairwise(format="jsonl", train_format="triples"), '{"query": "q", "positive": 1, "negative": "n"}',
     r"field 'positive' must be a string, got 1"),
    (SequenceLabelingReader(format="jsonl"), '{"tokens": 5, "tags": ["O"]}', r"tokens must be a list of strings, got 5"),
    (SequenceLabelingReader(format="jsonl"), '{"tokens": ["a"], "tags": null}',
     r"tags must be a list of strings, got null"),
])
def test_jsonl_value_of_the_wrong_type_is_named(tmp_path, reader, line, message):
    with pytest.raises(DataError, match=r"a\.jsonl:1: " + message + "$"):
        reader.read(write(tmp_path, "a.jsonl", line + "\n"), "train")


def test_numbers_as_labels_are_still_read_as_strings(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"text_a": "a", "text_b": "b", "label": 1}\n'
                                      '{"text_a": "c", "text_b": "d", "label": 0}\n')
    assert [e["label"] for e in Matching(format="jsonl").read(path, "train")] == ["1", "0"]
    path = write(tmp_path, "c.jsonl", '{"text": "a", "label": 3}\n{"text": "b", "label": true}\n')
    assert [e["label"] for e in ClassificationReader(format="jsonl").read(path, "train")] == ["3", "True"]
    path = write(tmp_path, "m.jsonl", '{"text": "a", "label": 3}\n{"text": "b", "label": [1, "x"]}\n')
    assert [e["label"] for e in ClassificationReader(format="jsonl", multi_label=True).read(path, "train")] == \
        [["3"], ["1", "x"]]
    # a predict file may leave the label out, or give null
    path = write(tmp_path, "p.jsonl", '{"text": "a"}\n{"text": "b", "label": null}\n')
    assert [e["label"] for e in ClassificationReader(format="jsonl").read(path, "predict")] == [None, None]


# ---- through the command line ------------------------------------------------------------
EXAMPLE = "examples/cls_ernie_fc_with_focal.json"


def cli(tmp_path, *sets):
    argv = ["--param_path", EXAMPLE, "--set", f"trainer.output_dir={tmp_path / 'out'}",
            "--set", "trainer.progress_bar=false"]
    for item in sets:
        argv += ["--set", item]
    return run_trainer.main(argv)


def test_cli_prints_one_line_for_a_file_that_is_not_utf8(tmp_path, capsys):
    train = write(tmp_path, "train.tsv", "好看\tpos\n难看\tneg\n".encode("gbk"))
    code = cli(tmp_path, f"dataset_reader.train={train}")
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1
    assert err == f"error: {train}:1: invalid UTF-8 byte 0xba at column 1 (hint: set dataset_reader.encoding, " \
                  f'e.g. "gbk" or "utf-16", or on_bad_line: "skip")\n'


def test_cli_refuses_an_unknown_encoding_before_writing_anything(tmp_path, capsys):
    assert cli(tmp_path, "dataset_reader.encoding=xyz") == 2
    assert capsys.readouterr().err == "error: --set dataset_reader.encoding: unknown encoding 'xyz'\n"
    assert not (tmp_path / "out").exists()


# ---- a CSV read as TSV ---------------------------------------------------------
CSV_HINT = r' \(hint: the line looks comma-separated; set dataset_reader\.format: "csv"\)$'


def test_csv_read_as_tsv_suggests_format_csv(tmp_path):
    path = write(tmp_path, "train.csv", "好的电影,pos\n很差的电影,neg\n")
    with pytest.raises(DataError, match=r"train\.csv:1: expected a column 1 for 'label', the line has 1 field\(s\) "
                                        r"split by '\\t': \[\"好的电影,pos\"\]" + CSV_HINT):
        ClassificationReader().read(path, "train")
    with pytest.raises(DataError, match=r"h\.csv:1: no column named 'text' for 'text' in the header "
                                        r"\(columns: text,label\)" + CSV_HINT):
        ClassificationReader(header=1, text_column="text", label_column="label").read(
            write(tmp_path, "h.csv", "text,label\n好的电影,pos\n"), "train")


def test_a_tsv_line_without_commas_gets_no_csv_hint(tmp_path):
    with pytest.raises(DataError, match=r"the line has 1 field\(s\) split by '\\t': \[\"只有文本\"\]$"):
        ClassificationReader().read(write(tmp_path, "t.tsv", "只有文本\n"), "train")
