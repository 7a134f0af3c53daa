"""Sequence labeling: readers, tag schemes, alignment, windows, CRF, metrics."""
import itertools
import json

import numpy as np
import pytest

import paddle
from appzoo.errors import ConfigError, DataError
from conftest import write
from appzoo.metrics.sequence_labeling import entity_spans, sequence_labeling_metrics
from tasks.sequence_labeling.crf import FORBIDDEN, LinearChainCrf
from tasks.sequence_labeling.formats import join_tokens
from tasks.sequence_labeling.reader import SequenceLabelingReader
from tasks.sequence_labeling.windows import windows
from tasks.sequence_labeling.schemes import detect_scheme, invalid_position, transition_masks


# ---------------------------------------------------------------- readers
def test_conll_tabs_docstart_and_no_trailing_blank(tmp_path):
    path = write(tmp_path, "a.txt", "-DOCSTART-\tO\n\n中\tB-LOC\n国\tI-LOC\n\n\n人\tO\n \tO\n好\tO")
    examples = SequenceLabelingReader().read(path, "train")
    assert [e["tokens"] for e in examples] == [["中", "国"], ["人", " ", "好"]]
    assert [e["tags"] for e in examples] == [["B-LOC", "I-LOC"], ["O", "O", "O"]]
    assert [e["line"] for e in examples] == [3, 7]


def test_conll_whitespace_columns_like_conll2003(tmp_path):
    text = "-DOCSTART- -X- -X- O\n\nEU NNP I-NP B-ORG\nrejects  VBZ I-VP O\n\nPeter NNP I-NP B-PER\n"
    path = write(tmp_path, "a.txt", text)
    examples = SequenceLabelingReader(token_column=0, tag_column=3).read(path, "train")
    assert [e["tokens"] for e in examples] == [["EU", "rejects"], ["Peter"]]
    assert [e["tags"] for e in examples] == [["B-ORG", "O"], ["B-PER"]]
    last = SequenceLabelingReader(tag_column=-1).read(path, "train")
    assert [e["tags"] for e in last] == [e["tags"] for e in examples]


def test_line_and_jsonl_formats(tmp_path):
    line = write(tmp_path, "a.txt", "张 三 来 了\tB-PER I-PER O O\n他\tO\n")
    examples = SequenceLabelingReader(format="line").read(line, "train")
    assert examples[0]["tokens"] == ["张", "三", "来", "了"] and examples[1]["tags"] == ["O"]
    rows = [{"tokens": ["Paris", "is", "big"], "tags": ["B-LOC", "O", "O"]},
            {"tokens": "北京", "tags": "B-LOC I-LOC"}]
    jsonl = write(tmp_path, "a.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    examples = SequenceLabelingReader(format="jsonl").read(jsonl, "train")
    assert examples[1]["tokens"] == ["北", "京"] and examples[1]["tags"] == ["B-LOC", "I-LOC"]
    renamed = write(tmp_path, "b.jsonl", json.dumps({"w": ["a"], "y": ["O"]}) + "\n")
    assert SequenceLabelingReader(format="jsonl", token_column="w", tag_column="y").read(renamed, "dev")[0]["tags"] == ["O"]


def test_spans_format_reads_cluener_doccano_and_label_studio_spans(tmp_path):
    rows = [{"text": "张艳在青岛参加了长江银行的发布会。",  # CLUENER: end inclusive, mention checked
             "label": {"PER": {"张艳": [[0, 1]]}, "ORG": {"长江银行": [[8, 11]]}, "LOC": {"青岛": [[3, 4]]}}},
            {"text": "青岛青岛", "label": {"LOC": {"青岛": [[0, 1], [2, 3]]}}},  # one mention twice
            {"text": "他来了", "label": {}},
            {"text": "Ann in Rome", "label": [[0, 3, "PER"], [7, 11, "LOC"]]},  # doccano: end exclusive
            {"text": "在北京", "label": [{"start": 1, "end": 3, "labels": ["LOC"]}]}]  # Label Studio
    rows[4]["label"][0]["label"] = rows[4]["label"][0].pop("labels")
    path = write(tmp_path, "a.json", "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    reader = SequenceLabelingReader(format="spans")
    examples = reader.read(path, "train")
    assert examples[0]["tokens"] == list(rows[0]["text"])
    assert examples[0]["tags"] == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O", "O",
                                   "B-ORG", "I-ORG", "I-ORG", "I-ORG", "O", "O", "O", "O", "O"]
    assert examples[1]["tags"] == ["B-LOC", "I-LOC", "B-LOC", "I-LOC"] and examples[2]["tags"] == ["O"] * 3
    assert examples[3]["tags"] == ["B-PER", "I-PER", "I-PER", "O", "O", "O", "O", "B-LOC", "I-LOC", "I-LOC", "I-LOC"]
    assert examples[4]["tags"] == ["O", "B-LOC", "I-LOC"]
    assert reader.build_labels(examples) == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    assert reader.scheme == "BIO"
    predict = write(tmp_path, "p.json", json.dumps({"text": "在北京"}, ensure_ascii=False) + "\n")
    assert reader.read(predict, "predict")[0]["tags"] is None
    assert [e["tokens"] for e in reader.read_inputs(["Ann in Rome"])] == [list("Ann in Rome")]  # as trained
    row = reader.prediction_rows(examples[4:], [{"tags": ["O", "B-LOC", "I-LOC"]}], None)[0]
    assert row["text"] == "在北京" and row["entities"] == [{"type": "LOC", "start": 1, "end": 3, "text": "北京"}]
    english = reader.prediction_rows(examples[3:4], [{"tags": examples[3]["tags"]}], None)[0]
    assert [e["text"] for e in english["entities"]] == ["Ann", "Rome"]


def test_a_text_input_gets_its_entities_as_character_spans_of_the_text():
    """What the Predictor and the server answer for a text: entities at token positions, as in
    predictions.jsonl, and where they are in the text itself (its own spacing kept)."""
    reader = SequenceLabelingReader()  # conll: a text with spaces is split on them, else into characters
    reader.load_state({"scheme": "BIO"})  # as a trained model's best/ gives it
    words, chars, tokens = reader.read_inputs(["  Ann  lives in New   York ", " 张三在北京", ["Ann", "in", "Rome"]])
    rows = reader.prediction_rows([words, chars, tokens], [{"tags": ["B-PER", "O", "O", "B-LOC", "I-LOC"]},
                                                           {"tags": ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]},
                                                           {"tags": ["B-PER", "O", "B-LOC"]}], None)
    assert rows[0]["text"] == "  Ann  lives in New   York " and rows[0]["tokens"] == ["Ann", "lives", "in", "New", "York"]
    assert rows[0]["entities"] == [
        {"type": "PER", "start": 0, "end": 1, "text": "Ann", "char_start": 2, "char_end": 5},
        {"type": "LOC", "start": 3, "end": 5, "text": "New   York", "char_start": 16, "char_end": 26}]
    assert [(e["text"], e["char_start"], e["char_end"]) for e in rows[1]["entities"]] == [("张三", 1, 3), ("北京", 4, 6)]
    assert "text" not in rows[2] and rows[2]["entities"][1] == {"type": "LOC", "start": 2, "end": 3, "text": "Rome"}


@pytest.mark.parametrize("label, message", [
    ({"LOC": {"北京": [[0, 1]]}},
     r"'LOC' '北京' at \[0, 1\] \(end inclusive, as in CLUENER\): the text there is '在北'"),
    ({"LOC": {"北京": [[1, 3]]}}, r".*the text there is '北京' \(the text has 3 characters\)"),  # end exclusive
    ({"LOC": [[1, 2]]}, r"type 'LOC': expected \{mention: \[\[start, end\], \.\.\.\]\}"),
    ([[1, 4, "LOC"]], r"span \[1, 4, \"LOC\"\]: expected 0 <= start < end <= 3"),
    ([[1, 3, "LOC"], [2, 3, "GPE"]],
     r"'GPE' at \[2, 3\) overlaps another entity \(nested entities are not supported\)"),
    ([[1, 3]], r"expected \[start, end, type\] or \{start, end, label\}"),
    ("LOC", r"expected CLUENER's"),
])
def test_spans_that_do_not_fit_the_text_name_file_and_line(tmp_path, label, message):
    rows = [{"text": "他来了", "label": {}}, {"text": "在北京", "label": label}]
    path = write(tmp_path, "a.json", "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    with pytest.raises(DataError, match=r"a\.json:2: field 'label': " + message):
        SequenceLabelingReader(format="spans").read(path, "train")


def test_spans_format_gives_the_tags_of_the_same_data_in_conll(tmp_path):
    conll = SequenceLabelingReader().read("data/ner/dev.txt", "dev")
    rows = []
    for e in conll:
        spans = [[start, end, kind] for kind, start, end in entity_spans(e["tags"], "BIO")]
        rows.append(json.dumps({"text": "".join(e["tokens"]), "label": spans}, ensure_ascii=False))
    spans = SequenceLabelingReader(format="spans").read(write(tmp_path, "dev.json", "\n".join(rows) + "\n"), "dev")
    assert all(len(t) == 1 for e in conll for t in e["tokens"])  # the sample data is one character per token
    assert [e["tags"] for e in spans] == [e["tags"] for e in conll]


def test_predict_files_without_tags(tmp_path):
    conll = write(tmp_path, "p.txt", "中\n国\n\n好\n")
    assert [e["tags"] for e in SequenceLabelingReader().read(conll, "predict")] == [None, None]
    line = write(tmp_path, "p.line", "中 国\n")
    assert SequenceLabelingReader(format="line").read(line, "predict")[0]["tags"] is None


def test_dev_from_train_is_a_deterministic_disjoint_split(tmp_path):
    path = write(tmp_path, "a.txt", "\n\n".join(f"{c}\tO" for c in "abcdefghijklmnopqrst"))
    reader = SequenceLabelingReader(dev_from_train=0.25, split_seed=3)
    train, dev = reader.read(path, "train"), reader.read(path, "dev")
    assert len(dev) == 5 and len(train) == 15
    assert not {e["tokens"][0] for e in train} & {e["tokens"][0] for e in dev}
    assert [e["tokens"] for e in SequenceLabelingReader(dev_from_train=0.25, split_seed=3).read(path, "dev")] == \
        [e["tokens"] for e in dev]
    other = write(tmp_path, "b.txt", "x\tO\n")
    with pytest.raises(ConfigError, match=r"dataset_reader\.dev_from_train: .*same file"):
        reader.read(other, "dev")


# ------------------------------------------------------------ data errors
@pytest.mark.parametrize("fmt, text, message", [
    ("conll", "a\tO\nb\n", r"a\.txt:2: no tag column 1"),
    ("conll", "a\tO\nb\t \n", r"a\.txt:2: empty tag"),
    ("conll", "a\tO\n\tO\n", r"a\.txt:2: empty token in column 0: '\\tO'$"),  # no token before the tab
    ("line", "a b c\tO O\n", r"a\.txt:1: 3 tokens but 2 tags"),
    ("line", "a\tO\n\nb\tO\n", r"a\.txt:2: empty sentence"),
    ("line", "\tO\n", r"a\.txt:1: empty sentence"),
    ("line", "a b\n", r"a\.txt:1: no tags"),
    ("jsonl", '{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["a", "b"], "tags": ["O"]}\n',
     r"a\.txt:2: 2 tokens but 1 tags"),
    ("jsonl", '{"tokens": [], "tags": []}\n', r"a\.txt:1: empty sentence"),
    ("jsonl", '{"text": ["a"], "tags": ["O"]}\n', r"a\.txt:1: missing field 'tokens' for 'tokens'"),
    ("jsonl", '{"tokens": ["a"], "tags": [1]}\n', r"a\.txt:1: tags must be a list of strings"),
])
def test_data_errors_name_file_and_line(tmp_path, fmt, text, message):
    path = write(tmp_path, "a.txt", text)
    with pytest.raises(DataError, match=message):
        SequenceLabelingReader(format=fmt).read(path, "train")


def test_a_training_file_of_only_o_tags_is_an_error(tmp_path):
    reader = SequenceLabelingReader()
    train = reader.read(write(tmp_path, "t.txt", "a\tO\nb\tO\n\nc\tO\n"), "train")
    with pytest.raises(DataError, match=r"t\.txt: every training tag is 'O', so there are no entities to learn"):
        reader.build_labels(train)


def test_unknown_dev_tag_names_its_line(tmp_path):
    reader = SequenceLabelingReader()
    train = reader.read(write(tmp_path, "t.txt", "a\tB-PER\nb\tI-PER\n\nc\tO\n"), "train")
    labels = reader.build_labels(train)
    assert labels == ["O", "B-PER", "I-PER"]
    dev = reader.read(write(tmp_path, "d.txt", "a\tO\n\nb\tB-PRE\n"), "dev")
    with pytest.raises(DataError, match=r"d\.txt:3: tag 'B-PRE' is not in the label set; did you mean 'B-PER'"):
        reader.check_labels(dev, labels, "d.txt")


def test_tag_outside_scheme_is_an_error(tmp_path):
    reader = SequenceLabelingReader(scheme="BIO")
    train = reader.read(write(tmp_path, "t.txt", "a\tO\nb\tS-PER\n"), "train")
    with pytest.raises(DataError, match=r"t\.txt:2: tag 'S-PER' does not fit scheme BIO"):
        reader.build_labels(train)


def test_invalid_gold_is_reported_not_repaired(tmp_path, capsys):
    path = write(tmp_path, "t.txt", "a\tO\nb\tI-PER\n\nc\tB-PER\n")
    reader = SequenceLabelingReader(scheme="BIO")
    examples = reader.read(path, "train")
    reader.build_labels(examples)
    assert "1 gold sentence(s) in train break scheme BIO" in capsys.readouterr().out
    assert examples[0]["tags"] == ["O", "I-PER"]  # untouched
    strict = SequenceLabelingReader(scheme="BIO", invalid_gold="error")
    with pytest.raises(DataError, match=r"t\.txt:2: O -> I-PER"):
        strict.build_labels(strict.read(path, "train"))


@pytest.mark.parametrize("text, format, place", [
    ("我\tO\n\n中\tB-ORG\n国\tM-ORG\n\n好\tS-LOC\n", "conll", r"t\.txt:5: M-ORG -> \(end\)"),
    ("我\tO\n中 国\tB-ORG M-ORG\n", "line", r"t\.txt:2 \(token 2\): M-ORG -> \(end\)"),
])
def test_sentence_ending_inside_an_entity_names_the_end(tmp_path, format, text, place):
    path = write(tmp_path, "t.txt", text)
    strict = SequenceLabelingReader(scheme="BMES", invalid_gold="error", format=format)
    with pytest.raises(DataError, match=place):
        strict.build_labels(strict.read(path, "train"))


@pytest.mark.parametrize("kwargs, message", [
    ({"format": "jsonl", "token_column": 0}, r"dataset_reader\.token_column: format 'jsonl' needs a field name"),
    ({"format": "conll", "tag_column": "tag"}, r"dataset_reader\.tag_column: format 'conll' needs a column index"),
    ({"format": "line", "token_column": 0}, r"dataset_reader\.token_column: not used with format 'line'"),
    ({"window_overlap": -1}, r"dataset_reader\.window_overlap: must be >= 0"),
    ({"dev_from_train": 1.5}, r"dataset_reader\.dev_from_train: must be in \[0, 1\)"),
    ({"format": "jsonl", "delimiter": "\t"}, r"dataset_reader\.delimiter: only used with format 'conll'"),
    ({"format": "spans", "scheme": "BIOES"}, r"dataset_reader\.scheme: format 'spans' writes BIO tags, got 'BIOES'"),
    ({"format": "spans", "token_column": 0},
     r"dataset_reader\.token_column: format 'spans' needs a field name, got 0 \(null or left out: spans's default 'text'\)"),
    ({"format": "spans", "tag_column": 3},
     r"dataset_reader\.tag_column: format 'spans' needs a field name, got 3 \(null or left out: spans's default 'label'\)"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SequenceLabelingReader(**kwargs)


# ---------------------------------------------------------------- schemes
@pytest.mark.parametrize("sequences, scheme", [
    ([["B-PER", "I-PER", "O", "B-LOC"]], "BIO"),
    ([["I-PER", "I-PER", "B-PER", "O", "I-LOC"]], "IOB1"),
    ([["B-PER", "I-PER", "E-PER", "S-LOC", "O"]], "BIOES"),
    ([["B-PER", "M-PER", "E-PER", "S-LOC", "O"]], "BMES"),
    ([["O", "O"]], "BIO"),
])
def test_detect_scheme(sequences, scheme):
    assert detect_scheme(sequences) == scheme


@pytest.mark.parametrize("scheme, tags, position", [
    ("BIO", ["B-X", "I-X", "O"], None),
    ("BIO", ["O", "I-X"], 1),
    ("BIO", ["B-X", "I-Y"], 1),
    ("IOB1", ["I-X", "B-X", "O", "I-Y"], None),
    ("IOB1", ["O", "B-X"], 1),
    ("BIOES", ["B-X", "I-X", "E-X", "S-Y"], None),
    ("BIOES", ["B-X", "O"], 1),
    ("BIOES", ["S-X", "I-X"], 1),
    ("BIOES", ["O", "B-X"], 2),  # an entity left open at the end: the fault is the end, after the last tag
    ("BMES", ["B-X", "M-X", "E-X", "O"], None),
    ("BMES", ["B-X", "I-X", "E-X"], 1),
    ("BMES", ["B-X", "M-X"], 2),
    ("BIO", [], None),
])
def test_invalid_position(scheme, tags, position):
    assert invalid_position(tags, scheme) == position


# ------------------------------------------------- alignment and windows
@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from paddlenlp.transformers import ErnieTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "new", "##york", "is", "big", "中", "国",
             "a", "b", "c", "##d", "##e"]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return ErnieTokenizer(str(path))


def test_first_piece_carries_the_tag_and_dropped_characters_keep_their_place(tokenizer, tmp_path):
    text = "NewYork\tB-LOC\n \tO\nis\tO\n\ufffd\ufffd\tO\n\x07\tO\nbig\tB-ADJ\n"
    reader = SequenceLabelingReader()
    examples = reader.read(write(tmp_path, "a.txt", text), "train")
    labels = reader.build_labels(examples)
    [feature] = reader.encode(examples, tokenizer, labels, max_seq_len=32, split="train")
    vocab = tokenizer.vocab.token_to_idx
    unk = vocab["[UNK]"]
    assert feature["input_ids"] == [vocab["[CLS]"], vocab["new"], vocab["##york"], unk, vocab["is"], unk, unk,
                                    vocab["big"], vocab["[SEP]"]]
    assert feature["positions"] == [1, 3, 4, 5, 6, 7]  # the second piece of NewYork has no position
    assert [labels[i] for i in feature["labels"]] == ["B-LOC", "O", "O", "O", "O", "B-ADJ"]
    batch = reader.collate([feature, feature | {"positions": [1], "lengths": 1, "labels": [0], "input_ids": [2, 5, 3]}], 0)
    assert batch["labels"].tolist()[1] == [0, -100, -100, -100, -100, -100]  # padding is ignored by the loss
    assert batch["lengths"].tolist() == [6, 1]


def test_windows_cover_every_token_with_overlap():
    assert windows([1] * 5, budget=10, overlap=2) == [(0, 5)]
    spans = windows([1] * 30, budget=10, overlap=3)
    assert spans[0] == (0, 10) and spans[1] == (7, 17) and spans[-1][1] == 30
    spans = windows([3, 3, 3, 3, 3], budget=7, overlap=5)  # overlap never stalls progress
    assert spans == [(0, 2), (1, 3), (2, 4), (3, 5)]


def test_long_sentence_split_and_merged_one_tag_per_token(tokenizer, tmp_path):
    max_seq_len = 16
    tags = (["B-X", "I-X", "O", "O", "O"] * 10)[:3 * max_seq_len + 1]  # > 3 x max_seq_len tokens
    tokens = ["NewYork" if i % 7 == 0 else "a" for i in range(len(tags))]  # some two-piece tokens
    path = write(tmp_path, "long.txt", "\n".join(f"{w}\t{t}" for w, t in zip(tokens, tags)) + "\n\nb\tO\n")
    reader = SequenceLabelingReader(window_overlap=4)
    examples = reader.read(path, "test")
    labels = reader.build_labels(examples)
    features = reader.encode(examples, tokenizer, labels, max_seq_len, "test")
    assert len(features) > 4 and all(len(f["input_ids"]) <= max_seq_len for f in features)
    # each window predicts the gold tags, but gets its last two tokens wrong unless the sentence ends there
    outputs = {"tags": []}
    for f in features:
        row = np.array(f["labels"])
        if not f["sentence_edges"][1]:
            row[-2:] = labels.index("I-X")
        outputs["tags"].append(np.concatenate([row, [0, 0]]))  # batch padding past the window
    predictions = reader.decode(examples, features, outputs, labels)
    assert [len(p["tags"]) for p in predictions] == [len(tags), 1]
    assert predictions[0]["tags"] == tags  # the cut edges never win the merge
    metrics = reader.evaluate(examples, predictions, labels)
    assert metrics["micro_f1"] == 1.0 and metrics["token_accuracy"] == 1.0


def test_prediction_rows_have_entity_spans():
    reader = SequenceLabelingReader(scheme="BIO")
    examples = [{"tokens": ["张", "三", "在", "New", "York"], "tags": None}]
    rows = reader.prediction_rows(examples, [{"tags": ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]}], None)
    assert rows[0]["entities"] == [{"type": "PER", "start": 0, "end": 2, "text": "张三"},
                                   {"type": "LOC", "start": 3, "end": 5, "text": "New York"}]
    assert "gold" not in rows[0]
    assert join_tokens(["在", "New", "York", "市"]) == "在New York市"


# --------------------------------------------------------------------- CRF
def _brute_force(crf, emissions, length, edges, masks):
    trans = crf.transitions.numpy() + np.where(masks[0], 0, FORBIDDEN)
    start = crf.start.numpy() + edges[0] * np.where(masks[1], 0, FORBIDDEN)
    end = crf.end.numpy() + edges[1] * np.where(masks[2], 0, FORBIDDEN)
    paths = list(itertools.product(range(emissions.shape[1]), repeat=length))
    scores = np.array([start[p[0]] + sum(emissions[t, p[t]] for t in range(length))
                       + sum(trans[p[t - 1], p[t]] for t in range(1, length)) + end[p[-1]] for p in paths])
    return paths, scores.astype("float64")


def test_crf_likelihood_and_viterbi_equal_brute_force():
    rng = np.random.RandomState(0)
    labels = ["O", "B-X", "I-X", "B-Y", "I-Y"]
    masks = transition_masks(labels, "BIO")
    crf = LinearChainCrf(len(labels), masks)
    emissions = rng.randn(4, 4, len(labels)).astype("float32")
    lengths = np.array([4, 3, 1, 2])
    edges = np.array([[1, 1], [0, 1], [1, 0], [0, 0]])
    tags = np.array([[1, 2, 0, 3], [2, 0, 1, 0], [0, 0, 0, 0], [2, 2, 0, 0]])
    args = [paddle.to_tensor(a) for a in (emissions, tags, lengths, edges)]
    log_likelihood = crf.log_likelihood(*args).numpy()
    best = crf.viterbi(args[0], args[2], args[3]).numpy()
    for b in range(4):
        paths, scores = _brute_force(crf, emissions[b], lengths[b], edges[b], masks)
        log_z = np.log(np.exp(scores - scores.max()).sum()) + scores.max()
        gold = scores[paths.index(tuple(tags[b, :lengths[b]]))]
        np.testing.assert_allclose(log_likelihood[b], gold - log_z, rtol=1e-5, atol=1e-4)
        assert tuple(best[b, :lengths[b]]) == paths[int(scores.argmax())]
        assert (best[b, lengths[b]:] == 0).all()
    # windows cut out of a sentence may start inside an entity (row 1 starts with I-X)
    assert crf.path_allowed(args[1], args[2], args[3]).numpy().tolist() == [True, True, True, True]
    assert not crf.path_allowed(args[1], args[2], paddle.ones([4, 2], "int64")).numpy()[1]


@pytest.mark.parametrize("scheme, labels, favoured", [
    ("BIO", ["O", "B-X", "I-X", "B-Y", "I-Y"], 2),
    ("BIOES", ["O", "B-X", "I-X", "E-X", "S-X"], 2),
    ("BMES", ["O", "B-X", "M-X", "E-X", "S-X"], 2),
    ("IOB1", ["O", "B-X", "I-X"], 1),
])
def test_crf_decoding_respects_constraints(scheme, labels, favoured):
    crf = LinearChainCrf(len(labels), transition_masks(labels, scheme))
    # emissions that favour an invalid sequence: one tag everywhere but an O in the middle
    emissions = np.random.RandomState(1).randn(8, 7, len(labels)).astype("float32")
    emissions[:, :, favoured] += 3.0
    emissions[:, 3, 0] += 6.0
    lengths = paddle.to_tensor(np.array([7, 6, 5, 4, 3, 2, 1, 7]))
    best = crf.viterbi(paddle.to_tensor(emissions), lengths).numpy()
    for row, length in zip(best, lengths.numpy()):
        assert invalid_position([labels[i] for i in row[:length]], scheme) is None
    unconstrained = LinearChainCrf(len(labels)).viterbi(paddle.to_tensor(emissions), lengths).numpy()
    assert any(invalid_position([labels[i] for i in row[:n]], scheme) is not None
               for row, n in zip(unconstrained, lengths.numpy()))


# ----------------------------------------------------------------- metrics
CASES = {
    "BIO": ([["B-PER", "I-PER", "O", "B-LOC", "O"], ["O", "I-ORG", "I-ORG", "B-PER", "I-PER"]],
            [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["O", "B-ORG", "I-ORG", "B-PER", "O"]]),
    "IOB1": ([["I-PER", "I-PER", "B-PER", "O", "I-LOC"], ["I-ORG", "O", "I-MISC", "I-MISC", "O"]],
             [["I-PER", "I-PER", "I-PER", "O", "I-LOC"], ["I-ORG", "O", "I-MISC", "B-MISC", "O"]]),
    "BIOES": ([["B-PER", "E-PER", "O", "S-LOC", "O"], ["B-ORG", "I-ORG", "E-ORG", "O", "S-PER"]],
              [["B-PER", "E-PER", "O", "B-LOC", "E-LOC"], ["B-ORG", "I-ORG", "I-ORG", "O", "S-PER"]]),
    "BMES": ([["B-PER", "M-PER", "E-PER", "S-LOC", "O"], ["S-ORG", "O", "B-LOC", "E-LOC", "O"]],
             [["B-PER", "M-PER", "E-PER", "O", "O"], ["S-ORG", "O", "B-LOC", "M-LOC", "E-LOC"]]),
}


@pytest.mark.parametrize("scheme", list(CASES))
def test_metrics_equal_seqeval_strict(scheme):
    from seqeval.metrics import classification_report
    from seqeval.scheme import IOB1, IOB2, IOBES

    gold, pred = CASES[scheme]
    ours = sequence_labeling_metrics(gold, pred, scheme)
    def as_iobes(sentences):  # seqeval has no BMES: M- is its I-
        return [["I-" + t[2:] if t.startswith("M-") else t for t in s] for s in sentences]

    gold_s, pred_s = (as_iobes(gold), as_iobes(pred)) if scheme == "BMES" else (gold, pred)
    report = classification_report(gold_s, pred_s, mode="strict", output_dict=True, zero_division=0,
                                   scheme={"BIO": IOB2, "IOB1": IOB1, "BIOES": IOBES, "BMES": IOBES}[scheme])
    for average in ("micro", "macro", "weighted"):
        for key in ("precision", "recall", "f1"):
            short = "f1-score" if key == "f1" else key
            assert ours[f"{average}_{key}"] == pytest.approx(report[f"{average} avg"][short])
    for name, row in ours["per_type"].items():
        assert row["f1"] == pytest.approx(report[name]["f1-score"])
        assert row["support"] == report[name]["support"]
    flat_gold, flat_pred = sum(gold, []), sum(pred, [])
    assert ours["token_accuracy"] == pytest.approx(np.mean([a == b for a, b in zip(flat_gold, flat_pred)]))


def test_strict_mode_does_not_count_broken_chunks():
    metrics = sequence_labeling_metrics([["B-PER", "I-PER"]], [["I-PER", "I-PER"]], "BIO")
    assert metrics["micro_f1"] == 0.0 and metrics["per_type"]["PER"]["support"] == 1
    assert entity_spans(["O", "I-PER", "B-LOC"], "BIO") == [("LOC", 2, 3)]
    assert entity_spans(["B-PER", "M-PER", "E-PER"], "BMES") == [("PER", 0, 3)]
