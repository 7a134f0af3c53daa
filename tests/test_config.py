"""Param files, --set, validation messages, the registry and the CLI's exit code."""
import copy
import json
import os
import subprocess
import sys

import pytest

import run_trainer
from appzoo.params.keys import check_kwargs
from appzoo.params.param_file import apply_overrides, load_param_file, parse_value
from appzoo.env import available_cores
from appzoo.errors import ConfigError
from appzoo.registry import LOSSES, METRICS, MODELS, READERS, Registry
from appzoo.run.plan import validate

EXAMPLE = "examples/cls_ernie_fc_ch.json"


@pytest.fixture
def config(tmp_path):
    cfg = load_param_file(EXAMPLE)
    cfg["trainer"]["output_dir"] = str(tmp_path / "out")
    return cfg


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# ---- loading -----------------------------------------------------------------
def test_json_and_yaml_twins_load_to_the_same_config():
    assert load_param_file("examples/cls_ernie_fc_with_focal.json") == \
        load_param_file("examples/cls_ernie_fc_with_focal.yaml")


def test_json_syntax_error_names_file_line_and_column(tmp_path):
    path = write(tmp_path, "bad.json", '{\n  "model": {"type": "x",}\n}')
    with pytest.raises(ConfigError, match=r"bad\.json:2:\d+: not valid JSON"):
        load_param_file(path)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "bad.yaml", "model:\n  type: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+:\d+: not valid YAML"):
        load_param_file(path)


def test_unknown_extension_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"must end in \.json, \.yaml or \.yml"):
        load_param_file(write(tmp_path, "p.txt", "{}"))
    with pytest.raises(ConfigError, match=r"nope\.json: param file not found"):
        load_param_file(str(tmp_path / "nope.json"))


def test_unknown_section_suggests_the_closest(tmp_path):
    path = write(tmp_path, "p.json", '{"trainr": {}}')
    with pytest.raises(ConfigError, match=r"trainr: unknown section; did you mean 'trainer'\?"):
        load_param_file(path)


# ---- --set -------------------------------------------------------------------
def test_set_parses_json_else_string():
    assert parse_value("3") == 3 and parse_value("0.5") == 0.5 and parse_value("true") is True
    assert parse_value('["a", 1]') == ["a", 1] and parse_value("null") is None
    assert parse_value("output/run1") == "output/run1"


def test_set_overrides_nested_keys_and_creates_missing_objects(config):
    apply_overrides(config, ["trainer.epochs=7", "model.loss.name=focal", "model.loss.alpha=[1, 2]",
                             "model.encoder.min_freq=2"])
    assert config["trainer"]["epochs"] == 7
    assert config["model"]["loss"] == {"name": "focal", "alpha": [1, 2]}
    assert config["model"]["encoder"]["min_freq"] == 2


def test_set_errors(config):
    with pytest.raises(ConfigError, match=r"expected KEY\.PATH=VALUE"):
        apply_overrides(config, ["trainer.epochs"])
    with pytest.raises(ConfigError, match=r"trainr: unknown section; did you mean 'trainer'"):
        apply_overrides(config, ["trainr.epochs=3"])
    with pytest.raises(ConfigError, match=r"trainer\.epochs is 4, not an object"):
        apply_overrides(config, ["trainer.epochs.x=3"])


# ---- validation: one test per kind of message -----------------------------------
def test_unknown_key_with_did_you_mean(config):
    config["trainer"]["epoch"] = 3
    with pytest.raises(ConfigError, match=r"^trainer\.epoch: unknown key for 'trainer'; did you mean 'epochs'\? \(accepted: .*batch_size"):
        validate(config, "p.json")


def test_unknown_reader_key_lists_shared_and_reader_keys(config):
    config["dataset_reader"]["text_colum"] = 0
    with pytest.raises(ConfigError, match=r"dataset_reader\.text_colum: unknown key .*did you mean 'text_column'\?.*max_seq_len.*train"):
        validate(config)


def test_unknown_model_key(config):
    config["model"]["dropuot"] = 0.2
    with pytest.raises(ConfigError, match=r"model\.dropuot: unknown key for 'ErnieFcClassification'; did you mean 'dropout'\?"):
        validate(config)


def test_missing_required_keys(config):
    del config["model"]["type"]
    with pytest.raises(ConfigError, match=r"model\.type: required key is missing \(available: .*ErnieFcClassification"):
        validate(config)


def test_missing_encoder(config):
    del config["model"]["encoder"]
    with pytest.raises(ConfigError, match=r"model\.encoder: required key is missing"):
        validate(config)


def test_wrong_type(config):
    config["trainer"]["epochs"] = "three"
    with pytest.raises(ConfigError, match=r"trainer\.epochs: expected an integer, got 'three'"):
        validate(config)
    config["trainer"]["epochs"] = True  # a bool is not an int here
    with pytest.raises(ConfigError, match=r"trainer\.epochs: expected an integer, got True"):
        validate(config)


def test_literal_choices(config):
    config["dataset_reader"]["format"] = "xlsx"
    with pytest.raises(ConfigError, match=r"dataset_reader\.format: expected one of 'tsv', 'csv', 'jsonl', got 'xlsx'"):
        validate(config)


@pytest.mark.parametrize("key, value, message", [
    ("trainer.learning_rate", -1.0, r"trainer\.learning_rate: must be > 0, got -1\.0"),
    ("trainer.warmup_proportion", 1.5, r"trainer\.warmup_proportion: must be in \[0, 1\), got 1\.5"),
    ("trainer.batch_size", 0, r"trainer\.batch_size: must be >= 1, got 0"),
    ("trainer.max_steps", 0, r"trainer\.max_steps: must be -1 \(use epochs\) or >= 1, got 0"),
    ("dataset_reader.max_seq_len", 4, r"dataset_reader\.max_seq_len: must be >= 8, got 4"),
    ("model.dropout", 1.0, r"model\.dropout: must be in \[0, 1\), got 1\.0"),
    ("dataset_reader.header", -1, r"dataset_reader\.header: must be >= 0"),
    ("model.encoder.min_freq", 0, r"model\.encoder\.min_freq: must be >= 1, got 0"),
])
def test_out_of_range(config, key, value, message):
    apply_overrides(config, [f"{key}={json.dumps(value)}"])
    with pytest.raises(ConfigError, match=message):
        validate(config)


def test_warmup_steps_and_proportion_exclusive(config):
    apply_overrides(config, ["trainer.warmup_steps=10"])
    with pytest.raises(ConfigError, match=r"trainer\.warmup_steps: give warmup_steps or warmup_proportion, not both"):
        validate(config)


def test_missing_data_file(config):
    config["dataset_reader"]["dev"] = "data/cls/nope.tsv"
    with pytest.raises(ConfigError, match=r"dataset_reader\.dev: no such file 'data/cls/nope\.tsv'"):
        validate(config)


def test_encoder_needs_exactly_one_source(config):
    config["model"]["encoder"] = {"config": "configs/ernie_tiny.json", "pretrained": "ernie-3.0-medium-zh"}
    with pytest.raises(ConfigError, match=r"model\.encoder: give exactly one of 'pretrained'"):
        validate(config)
    config["model"]["encoder"] = {"config": "configs/nope.json"}
    with pytest.raises(ConfigError, match=r"model\.encoder\.config: no such file 'configs/nope\.json'"):
        validate(config)


def test_unknown_model_type_suggests(config):
    config["model"]["type"] = "ErnieFcClasification"
    with pytest.raises(ConfigError, match=r"model\.type: 'ErnieFcClasification' is not a registered model; did you mean 'ErnieFcClassification'\?"):
        validate(config)


def test_existing_output_dir_is_not_overwritten(config, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(config))  # a param file's tree: the user's, not a run's
    with pytest.raises(ConfigError, match=r"holds files no run wrote \(config\.json\)"):
        validate(config)
    (out / ".appzoo-run").write_text("{}")  # what a run writes first, when it takes the folder
    validate(config)  # a run that saved no model yet may be redone
    (out / "best").mkdir()
    validate(config)  # a best/ whose save never completed does not count either
    (out / "best" / "COMPLETE").write_text("")
    with pytest.raises(ConfigError, match=r"trainer\.output_dir: .* already holds a run; .*overwrite_output_dir=true"):
        validate(config)
    config["trainer"]["overwrite_output_dir"] = True
    validate(config)


def test_predict_only_needs_a_trained_model(config):
    with pytest.raises(ConfigError, match=r"trainer\.init_from: .* does not train, so it needs a trained model"):
        validate(config, do=["predict"])


def test_default_modes_follow_the_files(config):
    assert validate(copy.deepcopy(config)).do == ["train", "eval", "predict"]
    del config["dataset_reader"]["predict"], config["dataset_reader"]["dev"], config["dataset_reader"]["test"]
    assert validate(config).do == ["train"]


def test_check_kwargs_reports_required_parameters():
    def component(alpha: float, beta: int = 1):
        pass

    with pytest.raises(ConfigError, match=r"model\.loss\.alpha: required key for 'component' is missing"):
        check_kwargs(component, {"beta": 2}, "model.loss")


# ---- registry ----------------------------------------------------------------
def test_registry_rejects_duplicates_and_explains_unknown_names():
    registry = Registry("widget")
    registry.register("focal")(object)
    with pytest.raises(ValueError, match=r"widget 'focal' is already registered"):
        registry.register("focal")(object)
    with pytest.raises(ConfigError, match=r"model\.loss\.name: 'focall' is not a registered widget; did you mean 'focal'\? \(available: focal\)"):
        registry.get("focall", "model.loss.name")


@pytest.fixture
def widgets(tmp_path, monkeypatch):
    """``(registry, write_module, set_built_in, plugins)``: a registry of widgets that the modules
    written by ``write_module(name, text)`` register into, loaded as if by appzoo.registry's first
    lookup: the modules of ``set_built_in(*names)``, then those named in ``plugins`` (the entry
    points). The real registries and their loaded state are left as they were."""
    import importlib.metadata
    import types

    from appzoo import registry

    widgets = Registry("widget")
    monkeypatch.setitem(sys.modules, "widget_registry", types.SimpleNamespace(WIDGETS=widgets))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_loaded", False)
    plugins = []
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [
        importlib.metadata.EntryPoint(name, name, group) for name in plugins] if group == registry.PLUGIN_GROUP else [])

    def write_module(name, text):
        (tmp_path / f"{name}.py").write_text("from widget_registry import WIDGETS\n" + text, encoding="utf-8")
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.invalidate_caches()

    def set_built_in(*names):
        monkeypatch.setattr(registry, "BUILT_IN", names)

    return widgets, write_module, set_built_in, plugins


def test_registering_modules_load_on_the_first_lookup(widgets):
    registry, write_module, set_built_in, plugins = widgets
    write_module("built_in_widgets", 'WIDGETS.register("a")(object)\n'
                                     'SEEN = WIDGETS.names()  # a lookup while loading sees what has registered\n')
    write_module("plugin_widgets", 'WIDGETS.register("b")(object)\n')
    set_built_in("built_in_widgets")
    plugins.append("plugin_widgets")
    assert "built_in_widgets" not in sys.modules
    assert "b" in registry  # the first lookup loads the built-in modules, then the plugins
    assert registry.names() == ["a", "b"] and list(registry) == ["a", "b"]
    assert sys.modules["built_in_widgets"].SEEN == ["a"]
    write_module("late_plugin", 'WIDGETS.register("c")(object)\n')
    plugins.append("late_plugin")
    assert registry.names() == ["a", "b"]  # loaded once per process


def test_a_registering_module_that_fails_to_import_is_an_error_not_a_missing_name(widgets):
    registry, write_module, set_built_in, plugins = widgets
    write_module("broken_widgets", 'import no_such_module_anywhere\nWIDGETS.register("a")(object)\n')
    set_built_in("broken_widgets")
    with pytest.raises(ModuleNotFoundError, match="no_such_module_anywhere"):
        registry.get("a", "model.type")
    write_module("broken_widgets", 'WIDGETS.register("a")(object)\n')  # fixed: the next lookup loads it
    assert registry.get("a", "model.type") is object


def test_a_plugin_that_registers_a_built_in_name_is_refused(widgets):
    registry, write_module, set_built_in, plugins = widgets
    write_module("built_in_widgets", 'WIDGETS.register("focal")(object)\n')
    write_module("plugin_widgets", 'WIDGETS.register("focal")(int)\n')
    set_built_in("built_in_widgets")
    plugins.append("plugin_widgets")
    with pytest.raises(ValueError, match=r"widget 'focal' is already registered \(by builtins\.object\)"):
        registry.names()


def test_list_prints_every_kind(capsys):
    assert run_trainer.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{title}: {', '.join(registry.names())}" for title, registry in
                     (("models", MODELS), ("readers", READERS), ("losses", LOSSES), ("metrics", METRICS))]
    assert all(registry.names() for registry in (MODELS, READERS, LOSSES, METRICS))


# ---- the CLI: exit code 2, one line, nothing written ----------------------------------
def test_cli_config_error_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    code = run_trainer.main(["--param_path", EXAMPLE, "--set", f"trainer.output_dir={out}",
                             "--set", "model.loss.gama=2"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "model.loss.gama" in err
    assert not out.exists()


def test_cli_unknown_mode(capsys):
    assert run_trainer.main(["--param_path", EXAMPLE, "--do", "train,evaluate"]) == 2
    assert "--do 'train,evaluate': unknown mode 'evaluate' (accepted: train, eval, predict, export, audit)" in capsys.readouterr().err


@pytest.mark.slow
def test_cpu_defaults_are_set_by_the_command_line_alone():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_DEBUG_CPU_TYPE")}
    library = "import appzoo.env, appzoo.params.keys, os; print(os.environ.get('OMP_NUM_THREADS'))"
    out = subprocess.run([sys.executable, "-c", library], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None"]  # importing the library leaves the process alone
    cli = ("import os, sys, run_trainer; loaded = 'paddle' in sys.modules; run_trainer.main(['--list']); "
           "print(os.environ['OMP_NUM_THREADS'], loaded)")
    out = subprocess.run([sys.executable, "-c", cli], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-2:] == [str(available_cores()), "False"]
    env["OMP_NUM_THREADS"] = "3"  # the user's value wins (the same function, without paddle's import)
    light = "import appzoo.env, os; appzoo.env.configure_cpu(); print(os.environ['OMP_NUM_THREADS'])"
    out = subprocess.run([sys.executable, "-c", light], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3"]


# ---- errors that need the data or the run ----------------------------------------------
def cli(tmp_path, *args):
    return run_trainer.main(["--param_path", EXAMPLE, "--set", f"trainer.output_dir={tmp_path / 'out'}",
                             "--set", "trainer.progress_bar=false", *args])


def test_reader_of_another_task_is_refused(config):
    config["dataset_reader"]["type"] = "sequence_labeling"
    with pytest.raises(ConfigError, match=r"dataset_reader\.type: ErnieFcClassification reads text_classification, not 'sequence_labeling'"):
        validate(config)


def test_eval_only_needs_dev_or_test(config):
    for split in ("dev", "test"):
        del config["dataset_reader"][split]
    config["trainer"]["do"] = ["train", "eval"]
    with pytest.raises(ConfigError, match=r"trainer\.do: 'eval' needs dataset_reader\.dev or dataset_reader\.test"):
        validate(config)


def test_init_from_must_be_a_best_folder(config):
    config["trainer"]["init_from"] = "configs"
    with pytest.raises(ConfigError, match=r"trainer\.init_from: 'configs' is not a best/ folder of an appzoo run"):
        validate(config)
    config["trainer"]["init_from"] = "data/cls/train.tsv"  # a file that exists is not said not to exist
    with pytest.raises(ConfigError, match=r"^trainer\.init_from: 'data/cls/train\.tsv' is a file, not a best/ folder "
                                          r"of an appzoo run \(give <output_dir>/best\)$"):
        validate(config)
    config["trainer"]["init_from"] = "no/such/folder"
    with pytest.raises(ConfigError, match=r"^trainer\.init_from: 'no/such/folder' does not exist$"):
        validate(config)


def test_resume_without_checkpoint(tmp_path, capsys):
    assert cli(tmp_path, "--set", "trainer.resume=true") == 2
    assert "trainer.resume: no checkpoint to resume from in" in capsys.readouterr().err


def test_unknown_metric_for_best_lists_the_metrics(tmp_path, capsys):
    assert cli(tmp_path, "--set", "trainer.metric_for_best=f1", "--set", "trainer.max_steps=1") == 2
    err = capsys.readouterr().err
    assert "trainer.metric_for_best: 'f1' is not a dev metric of this task (available: " in err
    assert "macro_f1" in err and err.count("\n") == 1
    assert cli(tmp_path, "--set", "trainer.max_steps=1") == 0  # fixed, the same folder trains


def test_bad_loss_for_the_model_names_the_fitting_losses(tmp_path, capsys):
    assert cli(tmp_path, "--set", "model.loss.name=circle") == 2
    err = capsys.readouterr().err
    assert "examples/cls_ernie_fc_with_focal.json" not in err  # the message names the file that was given
    assert "--set model.loss.name: 'circle' does not fit a classification model (losses that fit: asl, balanced_softmax, bce, ce" in err
    assert not (tmp_path / "out").exists()


def test_data_error_exits_2_with_file_and_line(tmp_path, capsys):
    bad = tmp_path / "dev.tsv"
    bad.write_text("好文章\tsports\n坏文章\tsport\n", encoding="utf-8")
    assert cli(tmp_path, "--set", f"dataset_reader.dev={bad}") == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: label 'sport' is not in the label set; did you mean 'sports'?" in err
    assert not (tmp_path / "out").exists()


def test_gpu_on_a_cpu_build_is_refused(tmp_path, capsys):
    import paddle

    if paddle.is_compiled_with_cuda():
        pytest.skip("this paddle has CUDA")
    assert cli(tmp_path, "--set", "trainer.device=gpu") == 2
    assert "trainer.device: 'gpu', but this paddle is a CPU build" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
