"""Every GPU recipe in examples/reproduce/ is planned here, so none can rot.

No ERNIE or BERT weights can be downloaded on the test machines: each recipe
is validated as written for what does not need the weights (keys, losses,
metrics, the encoder named one PaddleNLP knows, max_seq_len within its
positions), then built with its encoder replaced by a tiny from-scratch one.
The data files under data/benchmarks/ are stood in for by empty files."""
import copy
import glob
import os

import pytest

from appzoo.params.param_file import load_param_file
from appzoo.errors import ConfigError
from appzoo.run.plan import validate

RECIPES = sorted(glob.glob("examples/reproduce/*.json"))
DATA = "data/benchmarks/"
ENCODERS = {"ernie-3.0-base-zh", "ernie-3.0-medium-zh", "bert-base-cased"}


def test_every_published_setting_has_a_recipe():
    names = " ".join(os.path.basename(p) for p in RECIPES)
    for data_set in ("msra", "weibo", "conll2003", "afqmc", "lcqmc", "mrpc", "tnews"):
        assert f"_{data_set}_" in names, data_set


def _stand_in_data(config, tmp_path):
    """Point every data path at an empty file of the same name under tmp_path."""
    reader = config["dataset_reader"]
    for key in ("train", "dev", "test", "predict", "label_file"):
        path = reader.get(key)
        if path is None:
            continue
        assert path.startswith(DATA), f"dataset_reader.{key}: recipes read {DATA}... (get_data.py), got {path}"
        stand_in = tmp_path / path
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        stand_in.touch()
        reader[key] = str(stand_in)


@pytest.mark.parametrize("path", RECIPES)
def test_recipe_plans_with_its_encoder_and_with_a_tiny_one(path, tmp_path):
    from paddlenlp.transformers import BertModel, ErnieModel

    config = load_param_file(path)
    trainer = config["trainer"]
    assert trainer["output_dir"].startswith("output/reproduce/")
    assert trainer["device"] == "gpu"
    assert trainer["amp"] == "bf16"
    encoder = config["model"]["encoder"]["pretrained"]
    assert encoder in ENCODERS
    known = {**ErnieModel.pretrained_init_configuration, **BertModel.pretrained_init_configuration}
    assert encoder in known, f"{encoder} is not a PaddleNLP model name"
    assert config["dataset_reader"]["max_seq_len"] <= known[encoder]["max_position_embeddings"]

    _stand_in_data(config, tmp_path)
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    import paddle

    if not paddle.is_compiled_with_cuda():  # the plan refuses amp where autocast does nothing
        with pytest.raises(ConfigError, match=r"trainer\.amp: 'bf16' needs a GPU"):
            validate(copy.deepcopy(config), path)
        config["trainer"]["amp"] = "off"
    plan = validate(copy.deepcopy(config), path)  # keys, loss, metric, the encoder's name
    assert plan.encoder.pretrained == encoder
    assert plan.trainer.batch_size == trainer["batch_size"] and plan.trainer.epochs == trainer["epochs"]

    config["model"]["encoder"] = {"config": "configs/ernie_tiny.json"}
    plan = validate(config, path)
    _build(plan, tmp_path)


LABELS = {"sequence_labeling": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], "text_matching": ["0", "1"]}


def _build(plan, tmp_path):
    """The model with a tiny from-scratch encoder (its loss built from model.loss)."""
    from appzoo.encoders import build_encoder

    reader = plan.reader_class(**plan.reader_kwargs)
    labels = LABELS.get(plan.config["dataset_reader"].get("type", "text_classification"), ["news_a", "news_b"])
    model_args = reader.model_args(labels, None)
    encoder, _ = build_encoder(plan.encoder, lambda: ["一 二 三 four five", "六 七 eight"], str(tmp_path / "vocab"))
    model = plan.model_class(encoder=encoder, **model_args, **plan.model_kwargs)
    assert sum(int(p.size) for p in model.parameters()) > 0
