"""--describe and docs/params.md come from the annotations that validate; VisualDL is optional."""
import os
import sys

import pytest

import run_trainer
from appzoo.params.keys import check_value, parameters
from appzoo.run.describe import REGENERATE, components, describe, markdown
from appzoo.errors import ConfigError
from appzoo.registry import LOSSES, MODELS, READERS

TARGETS = (["trainer", "dataset_reader", "encoder"] + [f"model.{n}" for n in MODELS.names()]
           + [f"reader.{n}" for n in READERS.names()] + [f"loss.{n}" for n in LOSSES.names()])


def test_docs_params_md_is_up_to_date():
    with open("docs/params.md", encoding="utf-8") as f:
        current = f.read()
    assert current == markdown(), f"docs/params.md is out of date; regenerate it with: {REGENERATE}"


@pytest.mark.parametrize("target", TARGETS)
def test_every_key_has_help_and_a_default_its_annotation_accepts(target):
    for _, path, cls, supplied in components(target):
        for name, (param, annotation) in parameters(cls, supplied).items():
            text = describe(target)
            assert f"  {name}: " in text
            assert text.split(f"  {name}: ", 1)[1].split("\n")[1].strip(), f"{target}: {name} has no help"
            if param.default is not param.empty:
                check_value(f"{path}.{name}", param.default, annotation)


def test_describe_shows_type_range_default_and_help(capsys):
    assert run_trainer.main(["--describe", "trainer"]) == 0
    out = capsys.readouterr().out
    assert "  warmup_proportion: a number; in [0, 1); default 0.0\n      share of the steps" in out
    assert "  max_steps: an integer; -1 (use epochs) or >= 1; default -1\n" in out
    assert run_trainer.main(["--describe", "loss.focal"]) == 0
    assert "  gamma: a number; >= 0; default 2.0\n" in capsys.readouterr().out
    assert run_trainer.main(["--describe", "reader.text_matching_pairwise"]) == 0
    out = capsys.readouterr().out
    assert "  max_triples_per_query: " in out and "  positive_label: " in out and "  encoding: " in out  # **kwargs


@pytest.mark.parametrize("target, message", [
    ("trainr", r"^error: --describe 'trainr': unknown target; did you mean 'trainer'\? \(accepted: trainer, "),
    ("loss.focall", r"^error: --describe loss: 'focall' is not a registered loss; did you mean 'focal'\?"),
    ("model.ErnieCrf", r"^error: --describe model: 'ErnieCrf' is not a registered model; did you mean "),
])
def test_describe_unknown_target(capsys, target, message):
    import re

    assert run_trainer.main(["--describe", target]) == 2
    err = capsys.readouterr().err
    assert re.match(message, err) and err.count("\n") == 1, err


def test_objects_built_from_python_are_held_to_the_same_annotations():
    from appzoo.losses import FocalLoss, OHEMLoss
    from tasks.text_classification.model import ErnieFcClassification
    from tasks.text_matching.siamese import PairwiseMatchingReader

    with pytest.raises(ConfigError, match=r"^FocalLoss\.gamma: must be >= 0, got -1$"):
        FocalLoss(gamma=-1)
    with pytest.raises(ConfigError, match=r"^OHEMLoss\.ratio: must be in \(0, 1\], got 0$"):
        OHEMLoss({"name": "ce"}, ratio=0)
    with pytest.raises(ConfigError, match=r"^model\.dropout: must be in \[0, 1\), got 1\.0$"):
        ErnieFcClassification(None, 2, dropout=1.0)  # refused before the encoder is touched
    with pytest.raises(ConfigError, match=r"^dataset_reader\.random_negatives: must be >= 0, got -1$"):
        PairwiseMatchingReader(random_negatives=-1)
    with pytest.raises(ConfigError, match=r"^dataset_reader\.header: must be >= 0, got -1$"):
        PairwiseMatchingReader(header=-1)  # a key of the base class, passed on by **kwargs


# ---- VisualDL -----------------------------------------------------------------------
CLS = "examples/cls_ernie_fc_ch.json"
FAST = ["--set", "trainer.max_steps=2", "--set", "trainer.eval_steps=2", "--set", "trainer.logging_steps=1",
        "--set", "trainer.batch_size=8", "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false",
        "--set", "trainer.visualdl=true", "--do", "train"]


def test_visualdl_missing_is_one_line_at_plan_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "visualdl", None)  # as if not installed
    out = tmp_path / "out"
    assert run_trainer.main(["--param_path", CLS, "--set", f"trainer.output_dir={out}", *FAST]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --set trainer.visualdl: true needs the visualdl package: "
                   "pip install visualdl==2.5.3\n")
    assert not out.exists()  # planning writes nothing


@pytest.mark.slow
def test_visualdl_logs_loss_lr_and_dev_metrics(tmp_path):
    pytest.importorskip("visualdl")
    out = tmp_path / "out"
    assert run_trainer.main(["--param_path", CLS, "--set", f"trainer.output_dir={out}", *FAST]) == 0
    files = os.listdir(out / "vdl")
    assert files and all(os.path.getsize(out / "vdl" / f) > 0 for f in files)
    from visualdl import LogReader

    reader = LogReader(file_path=str(out / "vdl" / files[0]))
    tags = set(reader.get_tags()["scalar"])
    assert {"train/loss", "train/learning_rate", "dev/macro_f1"} <= tags
    assert [r.id for r in reader.get_data("scalar", "train/loss")] == [1, 2]
