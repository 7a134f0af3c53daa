"""Everything a param file can get wrong is raised by load_param_file,
apply_overrides or validate: before any output folder, vocab/ or file is
written. One test per kind of message, and a few through the CLI."""
import inspect
import json
import math
import os

import paddle
import pytest

import run_trainer
from appzoo.run import plan as plan_module
from appzoo.params.keys import check_kwargs
from appzoo.params.param_file import apply_overrides, load_param_file
from appzoo.errors import ConfigError, DataError
from appzoo.losses import build_loss
from appzoo.run.plan import validate
from appzoo.params.trainer import TrainerConfig

CLS = "examples/cls_ernie_fc_ch.json"
MULTI = "examples/cls_ernie_fc_multilabel.json"
NER = "examples/ner_ernie_fc_ch.json"
SIMNET = "examples/mtch_ernie_pairwise_simnet_with_circle_loss.json"
POINTWISE = "examples/mtch_ernie_fc_pointwise_ch.json"


def load(path, tmp_path, *overrides):
    config = load_param_file(path)
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    return apply_overrides(config, list(overrides))


def write(tmp_path, name, data):
    path = tmp_path / name
    (path.write_bytes if isinstance(data, bytes) else path.write_text)(data)
    return str(path)


# ---- 1. reader keys against the shared keys ---------------------------------------
def test_window_overlap_must_fit_max_seq_len(tmp_path):
    config = load(NER, tmp_path, "dataset_reader.max_seq_len=16", "dataset_reader.window_overlap=14")
    with pytest.raises(ConfigError, match=r"dataset_reader\.window_overlap: must be < max_seq_len - 2 = 14 "
                                          r"\(dataset_reader\.max_seq_len is 16\), got 14"):
        validate(config)
    config["dataset_reader"]["window_overlap"] = 13
    validate(config)


def test_dev_from_train_needs_dev_to_be_the_training_file(tmp_path):
    config = load(NER, tmp_path, "dataset_reader.dev_from_train=0.1")
    with pytest.raises(ConfigError, match=r"dataset_reader\.dev: dev_from_train=0\.1 carves dev out of the "
                                          r"training file, .*got 'data/ner/dev\.txt'"):
        validate(config)
    config["dataset_reader"]["dev"] = config["dataset_reader"]["train"]
    validate(config)


@pytest.mark.parametrize("path", [CLS, NER])
def test_missing_label_file(path, tmp_path):
    config = load(path, tmp_path, "dataset_reader.label_file=data/nope.txt")
    with pytest.raises(ConfigError, match=r"dataset_reader\.label_file: no such file 'data/nope\.txt'"):
        validate(config)


# ---- 2. loss, similarity and negatives ---------------------------------------------
def test_triplet_needs_labelled_negatives(tmp_path):
    config = load(SIMNET, tmp_path, "dataset_reader.negatives=in_batch", "dataset_reader.random_negatives=0",
                  'model.loss={"name": "triplet"}')
    with pytest.raises(ConfigError, match=r"model\.loss\.name: 'triplet' needs one labelled negative per pair, "
                                          r"but dataset_reader\.negatives is 'in_batch'"):
        validate(config)


def test_circle_needs_cosine_similarity(tmp_path):
    config = load(SIMNET, tmp_path, "model.similarity=dot")
    with pytest.raises(ConfigError, match=r"model\.loss\.name: 'circle' expects cosine similarities in "
                                          r"\[-1, 1\], but model\.similarity is 'dot'"):
        validate(config)


def test_loss_arguments_are_checked_at_plan_time(tmp_path):
    config = load(CLS, tmp_path, 'model.loss={"name": "focal", "gamma": -1}')
    with pytest.raises(ConfigError, match=r"model\.loss\.gamma: must be >= 0, got -1"):
        validate(config)


def test_balanced_weights_validate_before_the_label_counts_are_known(tmp_path):
    validate(load(CLS, tmp_path, 'model.loss={"name": "ce", "class_weights": "balanced"}'))
    validate(load(CLS, tmp_path, 'model.loss={"name": "ohem", "base": {"name": "focal", "alpha": "balanced"}}'))
    config = load(CLS, tmp_path, 'model.loss={"name": "focal", "mode": "sigmoid", "alpha": "balanced"}')
    with pytest.raises(ConfigError, match=r"model\.loss\.alpha: 'balanced' only applies with mode 'softmax'"):
        validate(config)


def test_crf_loss_weight_range(tmp_path):
    config = load("examples/ner_ernie_crf_ch.json", tmp_path, "model.loss_weight=-1")
    with pytest.raises(ConfigError, match=r"model\.loss_weight: must be >= 0, got -1"):
        validate(config)


# ---- 3. a loss that does not fit the head ------------------------------------------
@pytest.mark.parametrize("loss, shown", [
    ({"name": "ce"}, "'ce'"),
    ({"name": "focal"}, "'focal' with mode 'softmax'"),
    ({"name": "ohem", "base": {"name": "ce"}}, "'ohem' with base 'ce'"),
])
def test_softmax_loss_on_a_multi_label_head(loss, shown, tmp_path):
    config = load(MULTI, tmp_path, f"model.loss={json.dumps(loss)}")
    with pytest.raises(ConfigError, match=rf"model\.loss\.name: {shown} trains a softmax over the labels, but "
                                          r"ErnieFcClassification with dataset_reader\.multi_label=true decodes "
                                          r"each label by its sigmoid .*\(losses that fit: asl, bce, .*multilabel_ce"):
        validate(config)


@pytest.mark.parametrize("loss", [{"name": "bce"}, {"name": "multilabel_ce"}, {"name": "focal", "mode": "sigmoid"},
                                  {"name": "ohem", "base": {"name": "bce"}}, None])
def test_sigmoid_losses_fit_a_multi_label_head(loss, tmp_path):
    config = load(MULTI, tmp_path)
    config["model"]["loss"] = loss
    validate(config)


def test_every_classification_loss_declares_its_activation():
    from appzoo.losses import LOSSES, losses_for

    for name in losses_for("classification"):
        declared = LOSSES.get(name, "loss").ACTIVATION
        assert declared in ("softmax", "sigmoid", ("softmax", "sigmoid")), name
    assert build_loss({"name": "dice", "mode": "sigmoid"}).ACTIVATION == "sigmoid"
    assert build_loss({"name": "ohem", "base": {"name": "bce"}}).ACTIVATION == "sigmoid"


# ---- 4. metric_for_best --------------------------------------------------------------
def test_unknown_metric_for_best_suggests_the_closest(tmp_path):
    config = load(CLS, tmp_path, "trainer.metric_for_best=macro_f")
    with pytest.raises(ConfigError, match=r"trainer\.metric_for_best: 'macro_f' is not a dev metric of this task; "
                                          r"did you mean 'macro_f1'\? \(available: accuracy, ece, loss, macro_f1"):
        validate(config)


def test_metric_names_follow_the_reader_config(tmp_path):
    config = load(MULTI, tmp_path, "trainer.metric_for_best=accuracy")
    with pytest.raises(ConfigError, match=r"'accuracy' is not a dev metric of this task; "
                                          r"did you mean 'subset_accuracy'\?"):
        validate(config)
    config = load(SIMNET, tmp_path, "trainer.metric_for_best=argmax_f1")
    with pytest.raises(ConfigError, match=r"'argmax_f1' is not a dev metric"):
        validate(config)  # a similarity model has no argmax decision and no dev loss
    assert validate(load(POINTWISE, tmp_path, "trainer.metric_for_best=argmax_f1")).metric == "argmax_f1"


class CharTokenizer:
    """Enough of a PaddleNLP tokenizer for the readers: one id per character."""

    pad_token_id, unk_token_id, cls_token_id, sep_token_id = 0, 1, 2, 3

    def _ids(self, text, room):
        return [5 + ord(c) % 25 for c in text][:room]

    def __call__(self, texts, text_pair=None, max_length=512, add_special_tokens=True, **_):
        out = {"input_ids": [], "token_type_ids": []}
        for i, text in enumerate(texts):
            if add_special_tokens:
                a = [2] + self._ids(text, max_length - 2) + [3]
                b = self._ids(text_pair[i], max_length - len(a) - 1) + [3] if text_pair else []
            else:
                a, b = self._ids(text, max_length), []
            out["input_ids"].append(a + b)
            out["token_type_ids"].append([0] * len(a) + [1] * len(b))
        return out


SHAPES = {  # every reader, and each config of a reader that changes what evaluate returns
    "classification": (CLS, []),
    "multi_label": (MULTI, []),
    "cross_encoder": (POINTWISE, []),
    "siamese_pointwise": (POINTWISE, ["model.type=ErnieMatchingSiamesePointwise",
                                      "dataset_reader.type=text_matching_siamese", "model.pooling=mean"]),
    "pairwise_in_batch": ("examples/mtch_ernie_siamese_infonce.json", []),
    "pairwise_triples": (SIMNET, []),
    "ner_softmax": (NER, []),
    "ner_crf": ("examples/ner_ernie_crf_ch.json", []),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_declared_metric_names_are_what_evaluation_returns(shape, tmp_path):
    """A few dev examples through the reader, a tiny model and the reader's
    evaluate: its scalar keys, plus "loss" when the model gives a dev loss,
    are exactly the reader's metric_names() (so the declaration cannot drift)."""
    from paddlenlp.transformers import ErnieConfig, ErnieModel

    path, overrides = SHAPES[shape]
    plan = validate(load(path, tmp_path, *overrides))
    reader = plan.reader_class(**plan.reader_kwargs)
    train = reader.read(plan.data.train, "train")
    labels = reader.build_labels(train)
    dev = reader.read(plan.data.dev, "dev")
    if "auc" in reader.metric_names():  # auc needs both labels: take some of each
        dev = [e for e in dev if e["label"] == dev[0]["label"]][:20] + \
              [e for e in dev if e["label"] != dev[0]["label"]][:20]
    dev = dev[:40]
    tokenizer = CharTokenizer()
    features = reader.encode(dev, tokenizer, labels, 24, "dev")
    paddle.seed(0)
    encoder = ErnieModel(ErnieConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=32, pad_token_id=0))
    model = plan.model_class(encoder=encoder, **reader.model_args(labels, train), **plan.model_kwargs)
    model.eval()
    batch = {k: paddle.to_tensor(v) for k, v in reader.collate(features, tokenizer.pad_token_id).items()}
    accepted = inspect.signature(model.forward).parameters
    out = model(**{k: v for k, v in batch.items() if k in accepted})
    outputs = {k: list(v.numpy()) for k, v in model.decode(out, batch).items()}
    metrics = reader.evaluate(dev, reader.decode(dev, features, outputs, labels), labels)
    scalars = {k for k, v in metrics.items() if isinstance(v, (int, float))}
    assert scalars | ({"loss"} if "loss" in out else set()) == set(reader.metric_names())
    assert reader.default_metric in reader.metric_names()


# ---- 5. a dev set that cannot give the metric --------------------------------------
def test_single_class_dev_under_auc_is_a_data_error_naming_the_file():
    from appzoo.registry import READERS

    reader = READERS.get("text_matching", "t")()
    dev = [{"text_a": "a", "text_b": "b", "label": "1", "source": f"dev.tsv:{i}"} for i in range(3)]
    with pytest.raises(DataError, match=r"^dev\.tsv: the dev set has only label '1', so its auc .* is undefined"):
        reader.check_split(dev, "dev", "dev.tsv", "auc")
    reader.check_split(dev, "dev", "dev.tsv", "f1")  # other metrics are defined
    reader.check_split(dev, "test", "test.tsv", "auc")  # test only reports (auc left out)
    reader.check_split(dev + [{**dev[0], "label": "0"}], "dev", "dev.tsv", "auc")
    READERS.get("text_classification", "t")().check_split(dev, "dev", "dev.tsv", "macro_f1")  # a no-op


def test_a_pointwise_matching_train_set_of_one_label_is_a_data_error():
    from appzoo.registry import READERS

    train = [{"text_a": "a", "text_b": f"b{i}", "label": "1", "source": f"t.tsv:{i}"} for i in range(3)]
    with pytest.raises(DataError, match=r"^t\.tsv: every training pair has the label '1'; a pointwise model .* "
                                        r"in-batch negatives"):
        READERS.get("text_matching", "t")().check_split(train, "train", "t.tsv", "auc")
    READERS.get("text_matching_pairwise", "t")().check_split(train, "train", "t.tsv", "auc")  # positives alone
    READERS.get("text_matching", "t")().check_split(train + [{**train[0], "label": "0"}], "train", "t.tsv", "auc")


def test_a_dev_set_without_entities_under_an_entity_metric_is_a_data_error():
    from appzoo.registry import READERS

    reader = READERS.get("sequence_labeling", "t")()
    dev = [{"tokens": ["a", "b"], "tags": ["O", "O"], "path": "dev.txt", "line": 1, "conll": True}]
    with pytest.raises(DataError, match=r"^dev\.txt: the dev set has no entities .* its micro_f1 .*"
                                        r"trainer\.metric_for_best to loss"):
        reader.check_split(dev, "dev", "dev.txt", "micro_f1")
    reader.check_split(dev, "dev", "dev.txt", "loss")
    reader.check_split(dev, "test", "test.txt", "micro_f1")  # test only reports
    reader.check_split(dev + [{**dev[0], "tags": ["B-PER", "O"]}], "dev", "dev.txt", "micro_f1")


# ---- 6. non-finite numbers -----------------------------------------------------------
@pytest.mark.parametrize("key, value, shown", [
    ("trainer.learning_rate", "NaN", r"trainer\.learning_rate: must be a finite number, got nan"),
    ("trainer.weight_decay", "Infinity", r"trainer\.weight_decay: must be a finite number, got inf"),
    ("trainer.max_grad_norm", "NaN", r"trainer\.max_grad_norm: must be a finite number, got nan"),
    ("model.loss", '{"name": "focal", "gamma": -Infinity}', r"model\.loss\.gamma: must be a finite number, got -inf"),
    ("model.loss", '{"name": "ce", "class_weights": [1, Infinity]}',
     r"model\.loss\.class_weights\[1\]: must be a finite number, got inf"),
    ("model.dropout", "NaN", r"model\.dropout: must be a finite number, got nan"),
    ("dataset_reader.threshold", "NaN", r"dataset_reader\.threshold: must be a finite number, got nan"),
])
def test_non_finite_numbers(key, value, shown, tmp_path):
    config = load(CLS, tmp_path, f"{key}={value}")
    with pytest.raises(ConfigError, match=shown):
        validate(config)


def test_non_finite_in_a_json_param_file(tmp_path):
    config = load_param_file(CLS)
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    text = json.dumps(config).replace('"output_dir"', '"max_grad_norm": NaN, "output_dir"')
    loaded = load_param_file(write(tmp_path, "p.json", text))
    assert math.isnan(loaded["trainer"]["max_grad_norm"])  # Python's json reads it
    with pytest.raises(ConfigError, match=r"^trainer\.max_grad_norm: must be a finite number, got nan"):
        validate(loaded, str(tmp_path / "p.json"))


def test_non_finite_outside_the_param_file_path():
    with pytest.raises(ConfigError, match=r"trainer\.max_grad_norm: must be a finite number, got nan"):
        TrainerConfig(max_grad_norm=float("nan"))
    with pytest.raises(ConfigError, match=r"trainer\.learning_rate: must be a finite number, got nan"):
        check_kwargs(TrainerConfig, {"learning_rate": float("nan")}, "trainer")
    from appzoo.losses import FocalLoss

    with pytest.raises(ConfigError, match=r"^FocalLoss\.gamma: must be a finite number, got inf$"):
        FocalLoss(gamma=float("inf"))


# ---- 7. duplicate keys ---------------------------------------------------------------
def test_duplicate_key_in_json_names_file_line_and_section(tmp_path):
    text = '{\n  "trainer": {\n    "epochs": 3,\n    "epochs": 4\n  },\n  "model": {"loss": {"name": "ce"}}\n}\n'
    with pytest.raises(ConfigError, match=r"p\.json:4: duplicate key 'epochs' in trainer$"):
        load_param_file(write(tmp_path, "p.json", text))
    text = '{"model": {"loss": {"name": "ce",\n "name": "focal"}}}'
    with pytest.raises(ConfigError, match=r"p\.json:2: duplicate key 'name' in model\.loss$"):
        load_param_file(write(tmp_path, "p.json", text))
    with pytest.raises(ConfigError, match=r"p\.json:1: duplicate key 'model' in the top level"):
        load_param_file(write(tmp_path, "p.json", '{"model": {}, "model": {}}'))


def test_duplicate_key_in_yaml(tmp_path):
    text = "trainer:\n  epochs: 3\n  batch_size: 8\n  epochs: 4\n"
    with pytest.raises(ConfigError, match=r"p\.yaml:4: duplicate key 'epochs' in trainer$"):
        load_param_file(write(tmp_path, "p.yaml", text))


# ---- 8. structural --set mistakes -------------------------------------------------------
@pytest.mark.parametrize("item, shown", [
    ("trainer=5", r"--set 'trainer=5': trainer is a section and takes an object, got 5"),
    ("model=null", r"--set 'model=null': model is a section and takes an object, got null"),
    ("dataset_reader=[1]", r"--set 'dataset_reader=\[1\]': dataset_reader is a section and takes an object, got \[1\]"),
    ("trainer..epochs=3", r"--set 'trainer\.\.epochs=3': empty key in 'trainer\.\.epochs'"),
    ("trainer.epochs", r"--set 'trainer\.epochs': expected KEY\.PATH=VALUE"),
])
def test_structural_set_mistakes(item, shown, tmp_path):
    with pytest.raises(ConfigError, match=shown):
        apply_overrides(load(CLS, tmp_path), [item])


def test_set_a_whole_section_to_an_object(tmp_path):
    config = apply_overrides(load(CLS, tmp_path), ['trainer={"epochs": 1}'])
    assert config["trainer"] == {"epochs": 1}


# ---- 9. the param file itself ------------------------------------------------------
def test_a_folder_as_param_file(tmp_path):
    with pytest.raises(ConfigError, match=r": is a folder; give a param file"):
        load_param_file(str(tmp_path))
    os.mkdir(tmp_path / "p.json")
    with pytest.raises(ConfigError, match=r"p\.json: is a folder"):
        load_param_file(str(tmp_path / "p.json"))


def test_non_utf8_param_file_names_line_byte_and_column(tmp_path):
    raw = '{\n  "trainer": {"output_dir": "caf'.encode() + b"\xe9" + b'"}\n}\n'
    with pytest.raises(ConfigError, match=r"p\.json:2: invalid UTF-8 byte 0xe9 at column 33"):
        load_param_file(write(tmp_path, "p.json", raw))
    with pytest.raises(ConfigError, match=r"p\.yaml:1: invalid UTF-8 byte 0xff at column 1"):
        load_param_file(write(tmp_path, "p.yaml", b"\xff\xfet\x00"))  # UTF-16


@pytest.mark.parametrize("name, text", [("p.json", ""), ("p.json", "  \n"), ("p.yaml", "# nothing yet\n")])
def test_empty_param_file(name, text, tmp_path):
    with pytest.raises(ConfigError, match=rf"{name.replace('.', r'.')}: the param file is empty"):
        load_param_file(write(tmp_path, name, text))


# ---- 10. the output folder ---------------------------------------------------------
def test_output_dir_empty(tmp_path):
    with pytest.raises(ConfigError, match=r"trainer\.output_dir: must not be empty"):
        validate(load(CLS, tmp_path, 'trainer.output_dir=""'))


def test_output_dir_is_a_file(tmp_path):
    write(tmp_path, "taken", "x")
    with pytest.raises(ConfigError, match=r"trainer\.output_dir: '.*taken' is a file, not a folder"):
        validate(load(CLS, tmp_path, f"trainer.output_dir={tmp_path / 'taken'}"))
    with pytest.raises(ConfigError, match=r"trainer\.output_dir: '.*taken/run' cannot be created: '.*taken' is a file"):
        validate(load(CLS, tmp_path, f"trainer.output_dir={tmp_path / 'taken' / 'run'}"))


def test_output_dir_not_writable(tmp_path, monkeypatch):
    """Tests run as root, for whom chmod does not make a folder read-only, so
    os.access is patched to say what it says to other users."""
    parent = tmp_path / "readonly"
    parent.mkdir()
    real = os.access
    monkeypatch.setattr(plan_module.os, "access",
                        lambda p, mode: False if os.path.abspath(p) == str(parent) else real(p, mode))
    with pytest.raises(ConfigError, match=r"trainer\.output_dir: '.*readonly/run' would be created in "
                                          r"'.*readonly', which is not writable"):
        validate(load(CLS, tmp_path, f"trainer.output_dir={parent / 'run'}"))
    with pytest.raises(ConfigError, match=r"trainer\.output_dir: '.*readonly' is not writable"):
        validate(load(CLS, tmp_path, f"trainer.output_dir={parent}"))


# ---- through the CLI: exit 2, one line, no traceback, nothing written -----------------------
@pytest.mark.parametrize("path, args, shown", [
    (NER, ["--set", "dataset_reader.window_overlap=100"], "dataset_reader.window_overlap: must be < max_seq_len - 2"),
    (MULTI, ["--set", "model.loss.name=ce"], "model.loss.name: 'ce' trains a softmax over the labels"),
    (SIMNET, ["--set", "model.similarity=dot"], "model.loss.name: 'circle' expects cosine similarities"),
    (CLS, ["--set", "trainer.metric_for_best=f1"], "trainer.metric_for_best: 'f1' is not a dev metric"),
    (CLS, ["--set", "trainer.learning_rate=NaN"], "trainer.learning_rate: must be a finite number, got nan"),
    (CLS, ["--set", "trainer=5"], "--set 'trainer=5': trainer is a section and takes an object, got 5"),
])
def test_cli_refuses_before_writing_anything(path, args, shown, tmp_path, capsys):
    out = tmp_path / "out"
    code = run_trainer.main(["--param_path", path, "--set", f"trainer.output_dir={out}",
                             "--set", "trainer.progress_bar=false", *args])
    err = capsys.readouterr().err
    assert code == 2
    # the param file's name first, or --set where the command line gave the value (issue 42, item 26)
    assert err.startswith((f"error: {path}: ", "error: --set ")) and err.count("\n") == 1 and "Traceback" not in err
    assert shown in err
    assert not out.exists()


def test_cli_duplicate_key_and_folder_param_path(tmp_path, capsys):
    config = load_param_file(CLS)
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    text = json.dumps(config, indent=1).replace('"trainer": {', '"trainer": {\n"epochs": 1, "epochs": 2,')
    path = write(tmp_path, "dup.json", text)
    assert run_trainer.main(["--param_path", path]) == 2
    err = capsys.readouterr().err
    line = text.splitlines().index('"epochs": 1, "epochs": 2,') + 1
    assert err == f"error: {path}:{line}: duplicate key 'epochs' in trainer\n"
    assert not (tmp_path / "out").exists()
    assert run_trainer.main(["--param_path", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a folder" in err and "Traceback" not in err


# ---- a folder of a user's own files is not a run's ----------------------------------------
def test_a_folder_of_a_users_own_files_is_refused_and_left_as_it_was(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.json").write_text('{"mine": 1}\n')
    (out / "report.md").write_text("# my notes\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ConfigError, match=r"trainer\.output_dir: '.*/out' holds files no run wrote "
                                          r"\(metrics\.json, report\.md\).*trainer\.overwrite_output_dir=true"):
        validate(load(CLS, tmp_path))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    validate(load(CLS, tmp_path, "trainer.overwrite_output_dir=true"))  # asked for: the run may replace them


def test_a_run_that_stopped_before_its_first_save_may_be_trained_again(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    config = load(CLS, tmp_path)
    (out / ".appzoo-run").write_text("{}")  # what a run writes first, when it takes the folder
    (out / "config.json").write_text(json.dumps(config))  # no best/ nor checkpoint yet
    (out / "train_log.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    (out / "audit.md").write_text("# audit\n")
    validate(config)
