"""model.encoder.freeze_layers: the frozen prefix of a pretrained encoder and its cache on disk.

The encoder is a three-layer BERT of width 16 with a Unigram tokenizer over the characters of data/ (the layout
of multilingual-e5-small), saved here, so that each run takes seconds.
"""
import glob
import json
import os

import numpy as np
import pytest

from appzoo.utils.files import load_tensors
from conftest import cli, read_json, xlmr_folder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return xlmr_folder(tmp_path_factory.mktemp("xlmr-3layers"), layers=3)


def param_file(tmp_path, folder, name="params.json", model=None, trainer=None, **encoder):
    params = {
        "dataset_reader": {"type": "text_classification", "format": "tsv", "train": "data/cls/train.tsv",
                           "dev": "data/cls/dev.tsv", "test": "data/cls/test.tsv", "text_column": 0,
                           "label_column": 1, "max_seq_len": 48},
        "model": {"type": "ErnieFcClassification", "pooling": "mean",
                  "encoder": {"pretrained": folder, "cache_dir": str(tmp_path / "cache"), **encoder},
                  **(model or {})},
        "trainer": {"epochs": 1, "batch_size": 16, "learning_rate": 1e-3, "progress_bar": False, "plots": False,
                    "seed": 7, **(trainer or {})},
    }
    path = tmp_path / name
    path.write_text(json.dumps(params), encoding="utf-8")
    return str(path)


def weights(run):
    return load_tensors(os.path.join(run, "best", "model.safetensors"))


def chunks(tmp_path):
    return sorted(glob.glob(str(tmp_path / "cache" / "*" / "chunk-*.npz")))


def test_the_split_forward_equals_the_whole_encoder(folder):
    """The prefix (cached in fp32) and the layers above give the encoder's own output, padding or not."""
    import paddle

    from appzoo.encoders import build_encoder, parse_encoder_spec
    from appzoo.encoders import frozen_prefix
    from appzoo.task.model import encode

    encoder, _ = build_encoder(parse_encoder_spec({"pretrained": folder}), None, None)
    encoder.eval()
    ids = paddle.to_tensor([[0, 7, 9, 11, 2, 1, 1], [0, 5, 6, 8, 10, 12, 2]])
    whole, whole_pooled, _ = encode(encoder, ids)
    spec = parse_encoder_spec({"pretrained": folder, "freeze_layers": 2, "prefix_cache": "fp32",
                               "cache_dir": None})
    prefix = frozen_prefix.FrozenPrefix(encoder, 2)
    prefix.cache = frozen_prefix.PrefixCache("/nonexistent/never-written", "k", "fp32", 16)
    setattr(encoder, frozen_prefix.ATTRIBUTE, prefix)
    try:
        for _ in range(2):  # computed, then read back
            split, split_pooled, _ = encode(encoder, ids)
            np.testing.assert_allclose(split.numpy()[0, :5], whole.numpy()[0, :5], atol=1e-6)
            np.testing.assert_allclose(split.numpy()[1], whole.numpy()[1], atol=1e-6)
        assert (prefix.computed, prefix.read) == (2, 2)
        # a row alone, without the other's padding, reads the same entry
        encode(encoder, ids[:1, :5])
        assert prefix.read == 3
    finally:
        frozen_prefix.detach(encoder)
    assert spec.freeze_layers == 2
    # frozen: the embeddings and the first two layers take no gradient; the third does
    assert all(p.stop_gradient for p in encoder.embeddings.parameters())
    assert not any(p.stop_gradient for p in encoder.encoder.layers[2].parameters())


def test_a_cached_run_equals_the_run_that_computes_the_frozen_part_at_every_step(tmp_path, folder, capsys):
    """fp32 cache vs prefix_cache off: the same weights (within 1e-6), the same metrics; the second run of
    another seed computes no frozen pass at all, and a run into another folder reads the same cache."""
    cached = param_file(tmp_path, folder, "cached.json", freeze_layers=2, prefix_cache="fp32")
    off = param_file(tmp_path, folder, "off.json", freeze_layers=2, prefix_cache="off")
    assert cli(cached, str(tmp_path / "cached")) == 0
    first = capsys.readouterr().out
    assert "their output for" in first and " 0 computed" not in first, first
    assert cli(off, str(tmp_path / "off")) == 0
    a, b = weights(tmp_path / "cached"), weights(tmp_path / "off")
    assert a.keys() == b.keys()
    # a key projection's bias shifts every attention logit of a query alike, so softmax cancels it: its gradient
    # is 0 but for rounding, which Adam scales up to whole steps; every other weight must agree
    gaps = {key: float(np.abs(a[key] - b[key]).max()) for key in a if not key.endswith("k_proj.bias")}
    assert max(gaps.values()) <= 1e-6, sorted(gaps.items(), key=lambda kv: -kv[1])[:5]
    # frozen weights are the pretrained ones, untouched
    assert read_json(tmp_path / "cached" / "metrics.json")["test"]["macro_f1"] == \
        pytest.approx(read_json(tmp_path / "off" / "metrics.json")["test"]["macro_f1"], abs=1e-6)
    capsys.readouterr()
    # another seed, another folder: every text is read from the cache, none computed
    from appzoo.encoders import frozen_prefix

    frozen_prefix._OPEN.clear()  # as a new process: read from disk
    assert cli(cached, str(tmp_path / "seed2"), "--set", "trainer.seed=8") == 0
    second = capsys.readouterr().out
    assert " 0 computed" in second, second
    assert "read from the cache" in second and "MB on disk" in second


def test_a_truncated_or_foreign_chunk_is_computed_again_never_trusted(tmp_path, folder, capsys):
    from appzoo.encoders import frozen_prefix

    params = param_file(tmp_path, folder, freeze_layers=3)
    frozen_prefix._OPEN.clear()
    assert cli(params, str(tmp_path / "a")) == 0
    made = chunks(tmp_path)
    assert made
    with open(made[0], "rb") as f:
        data = f.read()
    with open(made[0], "wb") as f:  # a kill in the middle of a copy, or a full disk
        f.write(data[:len(data) // 2])
    # a chunk of another cache put into this folder
    other = os.path.join(os.path.dirname(made[0]), "chunk-foreign.npz")
    np.savez(other, key=np.frombuffer(b"another-cache-key", dtype="uint8"),
             keys=np.zeros((1, 20), "uint8"), offsets=np.array([0, 1]), states=np.zeros((1, 16), "float16"))
    # a temporary file a killed write left: never opened
    with open(made[0] + ".tmp-1234", "wb") as f:
        f.write(b"half")
    frozen_prefix._OPEN.clear()
    capsys.readouterr()
    assert cli(params, str(tmp_path / "b")) == 0
    err = capsys.readouterr().out
    assert f"{made[0]} cannot be trusted (BadZipFile" in err or f"{made[0]} cannot be trusted" in err, err
    assert "chunk-foreign.npz cannot be trusted (ValueError: it belongs to the cache 'another-cache-key'" in err
    assert " 0 computed" not in err  # the truncated chunk's texts were computed again
    np.testing.assert_allclose(weights(tmp_path / "a")["classifier.weight"],
                               weights(tmp_path / "b")["classifier.weight"], atol=1e-6)


def test_the_trained_model_needs_no_cache(tmp_path, folder):
    """best/ holds the whole model: the Predictor (and an export) run the full encoder."""
    from appzoo import Predictor

    params = param_file(tmp_path, folder, freeze_layers=2, trainer={"do": ["train", "eval", "export"]})
    assert cli(params, str(tmp_path / "run")) == 0
    for path in glob.glob(str(tmp_path / "cache")):
        import shutil

        shutil.rmtree(path)
    predictor = Predictor(str(tmp_path / "run" / "best"))
    dygraph = predictor.predict(["体育新闻", "今天股市大涨"])
    graph = Predictor(str(tmp_path / "run" / "best"), engine="paddle_inference",
                      inference_dir=str(tmp_path / "run" / "inference")).predict(["体育新闻", "今天股市大涨"])
    assert [x["label"] for x in dygraph] == [y["label"] for y in graph], (dygraph, graph)
    for x, y in zip(dygraph, graph):
        assert x["probs"] == pytest.approx(y["probs"], abs=1e-5)


@pytest.mark.parametrize("encoder, message", [
    ({"freeze_layers": 4}, r"params\.json: model\.encoder\.freeze_layers: 4 is more than the 3 layers of '.*'; "
                           r"give 0 to 3 \(3: the whole encoder\)"),
    ({"freeze_layers": -1}, r"model\.encoder\.freeze_layers: must be >= 0, got -1"),
    ({"freeze_layers": 2, "prefix_cache": "bf16"}, r"model\.encoder\.prefix_cache: .*'bf16'"),
    ({"freeze_layers": 2, "freze_layers": 1}, r"model\.encoder\.freze_layers: unknown key .*did you mean "
                                             r"'freeze_layers'"),
    ({"freeze_layers": 2, "layers": 1}, r"model\.encoder\.freeze_layers: 2 is more than the 1 layers "
                                        r"model\.encoder\.layers keeps; give 0 to 1"),
])
def test_a_bad_key_is_one_line_and_exit_2(tmp_path, folder, capsys, encoder, message):
    params = param_file(tmp_path, folder, **encoder)
    assert cli(params, str(tmp_path / "run")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert __import__("re").search(message, err), err
    assert not os.path.exists(tmp_path / "run")


def test_a_cache_folder_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, folder, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    params = param_file(tmp_path, folder, freeze_layers=2)
    assert cli(params, str(tmp_path / "run"), "--set", f"model.encoder.cache_dir={blocker}/cache") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"model.encoder.cache_dir: '{blocker}/cache' cannot be made: '{blocker}' is a file" in err
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert cli(params, str(tmp_path / "run"), "--set", f"model.encoder.cache_dir={locked}/c") == 2
        assert "is not writable" in capsys.readouterr().err


def test_from_scratch_encoders_are_refused(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({
        "dataset_reader": {"type": "text_classification", "format": "tsv", "train": "data/cls/train.tsv",
                           "text_column": 0, "label_column": 1},
        "model": {"type": "ErnieFcClassification", "encoder": {"config": "configs/ernie_tiny.json",
                                                               "freeze_layers": 1}}}), encoding="utf-8")
    assert cli(str(path), str(tmp_path / "run")) == 2
    assert "model.encoder.freeze_layers: only for a pretrained encoder" in capsys.readouterr().err


def test_the_second_seed_of_a_sweep_runs_no_frozen_pass(tmp_path, folder, capsys):
    """A --sweep over seeds: the first run fills the cache, every later one reads it (counted)."""
    from appzoo.encoders import frozen_prefix

    frozen_prefix._OPEN.clear()
    params = param_file(tmp_path, folder, freeze_layers=2, trainer={"max_steps": 3})
    assert cli(params, str(tmp_path / "sweep"), "--sweep", "trainer.learning_rate=0.001", "--seeds", "2") == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "read from the cache" in line]
    assert len(lines) == 2, lines
    assert " 0 computed" not in lines[0] and " 0 computed" in lines[1], lines


def test_a_kill_while_a_chunk_is_written_leaves_nothing_trusted(tmp_path, monkeypatch):
    """The chunk goes to a temporary name and is renamed when whole: stopped before the rename, no chunk
    exists, and the next reader starts empty (and computes)."""
    from appzoo.encoders import frozen_prefix
    from appzoo.utils import files

    cache = frozen_prefix.PrefixCache(str(tmp_path / "c"), "k" * 20, "fp16", 4)
    cache.put(b"a" * 20, np.ones((3, 4)))

    def killed(src, dst):
        raise KeyboardInterrupt  # the process stops between the write and the rename

    monkeypatch.setattr(files.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        cache.flush()
    monkeypatch.undo()
    assert not glob.glob(str(tmp_path / "c" / "chunk-*.npz"))
    assert len(frozen_prefix.PrefixCache(str(tmp_path / "c"), "k" * 20, "fp16", 4)) == 0
    cache.flush()  # the entries were kept: written on the next flush
    again = frozen_prefix.PrefixCache(str(tmp_path / "c"), "k" * 20, "fp16", 4)
    np.testing.assert_array_equal(again.get(b"a" * 20), np.ones((3, 4), "float16"))


def test_a_full_disk_is_said_once_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    from appzoo.encoders import frozen_prefix
    from appzoo.utils import files

    cache = frozen_prefix.PrefixCache(str(tmp_path / "c"), "k" * 20, "fp32", 4)

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "write_bytes", full)
    cache.put(b"a" * 20, np.ones((3, 4)))
    cache.flush()
    cache.put(b"b" * 20, np.ones((2, 4)))
    cache.flush()
    out = capsys.readouterr().out
    assert out.count("the cache cannot be written") == 1 and "No space left on device" in out
    assert cache.get(b"b" * 20) is not None  # in memory still
