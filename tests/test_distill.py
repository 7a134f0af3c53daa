"""Distillation (the ``distill`` section, appzoo/run/teacher.py, appzoo/losses/kl.py's distillation_loss) and
``model.encoder.layers`` (appzoo/encoders/prune.py's keep_layers): the soft loss against NumPy, a distilled
classifier that resumes exactly and reuses its cache, a tagger whose teacher reads other windows and another
vocabulary, and each refusal's line."""
import glob
import json
import os
import shutil

import numpy as np
import pytest

import run_trainer
from conftest import crash_after_step, read_json
from appzoo.errors import ConfigError
from appzoo.utils.files import load_tensors
from appzoo.utils.markdown import literal

CLS = "examples/cls_ernie_fc_ch.json"
NER = "examples/ner_ernie_fc_ch.json"
QUICK = ["--set", "trainer.progress_bar=false", "--set", "trainer.plots=false", "--set", "trainer.num_threads=1"]


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _reference(student, teacher, temperature, mask=None):
    """T^2 KL(softmax(t/T) || softmax(s/T)) per row, the mean over the rows that count, and its gradient."""
    q, p = _softmax(teacher / temperature), _softmax(student / temperature)
    per_row = (q * (np.log(q) - np.log(p))).sum(-1) * temperature ** 2
    mask = np.ones(per_row.shape, bool) if mask is None else mask
    count = max(mask.sum(), 1)
    grad = temperature * (p - q) * mask[..., None] / count  # d/ds of T^2 KL(q || softmax(s / T))
    return (per_row * mask).sum() / count, grad


@pytest.mark.parametrize("shape,masked", [((6, 5), False), ((3, 7, 4), True)])
@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.5])
def test_the_soft_loss_and_its_gradient_match_numpy(shape, masked, temperature):
    import paddle

    from appzoo.losses import distillation_loss

    rng = np.random.default_rng(3)
    student, teacher = rng.normal(0, 3, shape), rng.normal(0, 3, shape)
    mask = rng.random(shape[:-1]) < 0.6 if masked else None
    expected, grad = _reference(student, teacher, temperature, mask)
    s = paddle.to_tensor(student.astype("float32"), stop_gradient=False)
    t = paddle.to_tensor(teacher.astype("float32"), stop_gradient=False)
    loss = distillation_loss(s, t, temperature=temperature, mask=None if mask is None else paddle.to_tensor(mask))
    loss.backward()
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    np.testing.assert_allclose(s.grad.numpy(), grad, rtol=1e-4, atol=1e-7)
    assert t.grad is None or not np.any(t.grad.numpy())  # the teacher is a constant


def test_the_soft_loss_is_zero_where_the_student_agrees_and_when_no_row_counts():
    import paddle

    from appzoo.losses import distillation_loss

    x = paddle.to_tensor(np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32"), stop_gradient=False)
    assert abs(float(distillation_loss(x, x.detach(), temperature=3.0))) < 1e-6
    empty = distillation_loss(x, x.detach() * 5, mask=paddle.zeros([2, 3], dtype="bool"))
    empty.backward()
    assert float(empty) == 0.0 and np.isfinite(x.grad.numpy()).all()
    with pytest.raises(ValueError, match="temperature"):
        distillation_loss(x, x, temperature=0.0)


def test_keep_layers_keeps_the_lower_layers_and_says_so():
    from paddlenlp.transformers import ErnieConfig, ErnieModel

    from appzoo.encoders.prune import keep_layers

    model = ErnieModel(ErnieConfig(vocab_size=30, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                                   intermediate_size=32, max_position_embeddings=32, pad_token_id=0))
    first = model.encoder.layers[0].linear1.weight.numpy().copy()
    assert keep_layers(model, 1) == 3
    assert len(model.encoder.layers) == 1 and model.config.num_hidden_layers == 1
    np.testing.assert_array_equal(model.encoder.layers[0].linear1.weight.numpy(), first)
    assert not [k for k in model.state_dict() if ".layers.1." in k]
    with pytest.raises(ConfigError, match=r"^model.encoder.layers: 2 is more than the encoder's 1 layers; give 1 to "
                                          r"1, or null for all$"):
        keep_layers(model, 2)


def test_layers_are_for_a_pretrained_encoder():
    from appzoo.encoders import parse_encoder_spec

    with pytest.raises(ConfigError, match=r"^model.encoder.layers: only for a pretrained encoder; a from-scratch one "
                                          r"takes its num_hidden_layers from its config file \(configs/ernie_tiny.json\)$"):
        parse_encoder_spec({"config": "configs/ernie_tiny.json", "layers": 1})


@pytest.fixture(scope="module")
def teachers(tmp_path_factory):
    """Two trained teachers: a classifier and a softmax tagger (tiny ERNIE, a few steps at a high rate)."""
    root = tmp_path_factory.mktemp("teachers")
    cls, ner = str(root / "cls"), str(root / "ner")
    fast = [*QUICK, "--set", "trainer.learning_rate=0.003", "--do", "train"]
    assert run_trainer.main(["--param_path", CLS, "--set", f"trainer.output_dir={cls}", "--set",
                             "trainer.max_steps=10", *fast]) == 0
    assert run_trainer.main(["--param_path", NER, "--set", f"trainer.output_dir={ner}", "--set",
                             "trainer.max_steps=10", *fast]) == 0
    return os.path.join(cls, "best"), os.path.join(ner, "best")


def _student(param_path, out, teacher, *more):
    return run_trainer.main(["--param_path", param_path, "--set", f"trainer.output_dir={out}", *QUICK,
                             "--set", f"distill.teacher={teacher}", "--set", "trainer.eval_steps=3",
                             "--do", "train,eval", *more])


def _weights(out):
    state = load_tensors(os.path.join(out, "best", "model.safetensors"))
    return {k: np.asarray(v) for k, v in state.items()}


@pytest.mark.slow  # trains
def test_a_distilled_classifier_resumes_exactly_and_its_teacher_runs_once_per_example(teachers, tmp_path,
                                                                                     monkeypatch, capsys):
    from appzoo.run import teacher as teachers_module

    cls_teacher, _ = teachers
    calls = []
    real = teachers_module.Teacher._rows

    def counted(self, predictor, numbers):
        calls.append(len(numbers))
        return real(self, predictor, numbers)

    monkeypatch.setattr(teachers_module.Teacher, "_rows", counted)
    monkeypatch.setattr(teachers_module, "AUTO_EXPORT_FROM", 0)  # ONNX Runtime for these few examples too
    steps = ["--set", "trainer.max_steps=6", "--set", "distill.alpha=0.7", "--set", "distill.temperature=3"]
    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    assert _student(CLS, straight, cls_teacher, *steps) == 0
    # auto checks ONNX Runtime on the first 32 examples (twice: its rows and the Paddle model's), then 6 x 32
    assert calls == [32, 32, 192]
    cache = glob.glob(os.path.join(straight, "teacher", "*.npz"))
    assert len(cache) == 1
    with np.load(cache[0]) as saved:
        assert len(saved["examples"]) == 192 and saved["shapes"][:, 0].tolist() == [4] * 192

    calls.clear()
    with crash_after_step(monkeypatch, 3), pytest.raises(RuntimeError, match="simulated crash"):
        _student(CLS, resumed, cls_teacher, *steps)
    monkeypatch.setattr(teachers_module.Teacher, "_rows", counted)
    capsys.readouterr()
    assert _student(CLS, resumed, cls_teacher, *steps, "--set", "trainer.resume=true") == 0
    assert "read from" in capsys.readouterr().out  # the resumed run's examples were all in the cache
    assert calls == [32, 32, 192]  # the first process only
    for name, value in _weights(straight).items():
        np.testing.assert_array_equal(value, _weights(resumed)[name], err_msg=name)
    assert read_json(os.path.join(straight, "metrics.json"))["dev"] == read_json(
        os.path.join(resumed, "metrics.json"))["dev"]

    # a re-run in the same folder replaces the run and keeps the cache: the teacher is not run again
    calls.clear()
    assert _student(CLS, straight, cls_teacher, *steps, "--set", "trainer.overwrite_output_dir=true") == 0
    assert calls == [] and glob.glob(os.path.join(straight, "teacher", "*.npz")) == cache
    with open(cache[0], "r+b") as f:  # a damaged cache (a full disk, say) is computed again, never trusted
        f.truncate(os.path.getsize(cache[0]) // 2)
    capsys.readouterr()
    assert _student(CLS, straight, cls_teacher, *steps, "--set", "trainer.overwrite_output_dir=true") == 0
    assert f"note: distill: {cache[0]} cannot be read (BadZipFile); the teacher's logits are computed again" in \
        capsys.readouterr().out
    assert calls == [32, 32, 192]
    calls.clear()
    with np.load(cache[0]) as saved:  # well-formed, but another teacher's: 3 logits a row for these 4 labels
        foreign = {k: saved[k] for k in saved.files}
    foreign["rows"] = foreign["rows"][: foreign["offsets"][-1] // 4 * 3]
    foreign["offsets"], foreign["shapes"][:, 0] = foreign["offsets"] // 4 * 3, 3
    np.savez(cache[0].removesuffix(".npz"), **foreign)
    capsys.readouterr()
    assert _student(CLS, straight, cls_teacher, *steps, "--set", "trainer.overwrite_output_dir=true") == 0
    assert (f"note: distill: {cache[0]} is not this teacher's cache (a row of 3 logits, the teacher has 4 labels); "
            f"the teacher's logits are computed again") in capsys.readouterr().out  # issue 42, item 7
    assert calls == [32, 32, 192]
    calls.clear()
    # the soft loss is trained on: alpha 0 is the student alone (no teacher run), and its weights differ
    alone = str(tmp_path / "alone")
    capsys.readouterr()
    assert _student(CLS, alone, cls_teacher, *steps[:2], "--set", "distill.alpha=0") == 0
    assert "distill.alpha is 0: the student learns from the labels alone" in capsys.readouterr().out
    assert calls == [] and not os.path.exists(os.path.join(alone, "teacher"))
    assert any(not np.array_equal(v, _weights(alone)[k]) for k, v in _weights(straight).items())
    config = read_json(os.path.join(straight, "config.json"))
    assert config["distill"] == {"teacher": cls_teacher, "temperature": 3.0, "alpha": 0.7, "transfer": None,
                                 "teacher_engine": "auto"}
    record = read_json(os.path.join(straight, "run_record.json"))["distill"]
    assert (record["teacher"], record["temperature"], record["alpha"], record["engine"]) == (cls_teacher, 3.0, 0.7,
                                                                                             "onnxruntime")
    with open(os.path.join(straight, "MODEL_CARD.md"), encoding="utf-8") as f:
        card = f.read()
    assert (f"- distilled from: {literal(cls_teacher)} (temperature 3, soft-loss weight 0.7; the teacher's "
            f"logits: onnxruntime)") in card
    # the teacher's own scores go beside the student's where its run evaluated it; this one only trained
    assert record["teacher_scores"] == {} and "- the teacher's scores: " not in card


@pytest.mark.slow  # trains
def test_a_student_serves_without_its_teacher_and_a_reproduction_refuses_a_changed_teacher(teachers, tmp_path,
                                                                                           capsys):
    from appzoo import Predictor

    teacher = str(tmp_path / "teacher")
    shutil.copytree(teachers[0], teacher)
    out = str(tmp_path / "student")
    assert _student(CLS, out, teacher, "--set", "trainer.max_steps=2") == 0
    # an eval of the student keeps how it was trained (issue 42, item 5): the record's distill, the card's line
    assert run_trainer.main(["--param_path", os.path.join(out, "config.json"), "--do", "eval"]) == 0
    assert read_json(os.path.join(out, "run_record.json"))["distill"]["teacher"] == teacher
    with open(os.path.join(out, "MODEL_CARD.md"), encoding="utf-8") as f:
        assert "- distilled from: " in f.read()
    with open(os.path.join(teacher, "config.json"), "a", encoding="utf-8") as f:
        f.write("\n")
    capsys.readouterr()
    assert run_trainer.main(["--param_path", os.path.join(out, "config.json"), "--do", "reproduce"]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"error: --do reproduce: distill.teacher: {os.path.abspath(teacher)} changed since the "
                           f"run in {out} (recorded digest ") and line.endswith("; reproduce with the same teacher")
    assert not os.path.exists(os.path.join(out, "reproduce"))
    shutil.rmtree(teacher)  # the student's best/ is a model of its own: loaded, predicted and served without it
    assert Predictor(os.path.join(out, "best")).predict(["a text to label"])[0]["label"] in ("finance", "health",
                                                                                            "sports", "tech")


@pytest.mark.slow  # trains
@pytest.mark.parametrize("lstm_hidden", ["null", "16"])  # 16: a BiLSTM-CRF student, whose logits are per word too
def test_a_tagger_learns_its_teachers_word_logits_across_windows_and_vocabularies(teachers, tmp_path, lstm_hidden):
    from appzoo import Predictor

    _, ner_teacher = teachers
    out = str(tmp_path / "tagger")
    # another vocabulary (min_freq 2) and shorter windows than the teacher's: aligned by words
    assert _student(NER, out, ner_teacher, "--set", "trainer.max_steps=3", "--set", "dataset_reader.max_seq_len=12",
                    "--set", "dataset_reader.window_overlap=4", "--set", "model.encoder.min_freq=2",
                    "--set", "distill.teacher_engine=dygraph", "--set", "model.type=ErnieCrfSeqLabel",
                    "--set", "model.loss=null", "--set", f"model.lstm_hidden={lstm_hidden}") == 0
    assert read_json(os.path.join(out, "config.json"))["model"]["lstm_hidden"] == json.loads(lstm_hidden)
    (cache,) = glob.glob(os.path.join(out, "teacher", "*.npz"))
    with open("data/ner/train.txt", encoding="utf-8") as f:
        sentences = [[line.split()[0] for line in block.splitlines()] for block in f.read().split("\n\n") if block.strip()]
    with np.load(cache) as saved:
        numbers, offsets, rows = saved["examples"].tolist(), saved["offsets"], saved["rows"]
        shapes = saved["shapes"]
    teacher = Predictor(ner_teacher)
    labels = teacher.labels
    picked = numbers[:40]
    predicted = teacher.predict([sentences[n] for n in picked])
    for n, row in zip(picked, predicted):
        i = numbers.index(n)
        assert shapes[i].tolist() == [len(sentences[n]), len(labels)]
        logits = rows[offsets[i]:offsets[i + 1]].reshape(shapes[i])
        assert [labels[j] for j in logits.argmax(-1)] == row["tags"]  # a softmax teacher: its tags are the argmax
    assert read_json(os.path.join(out, "metrics.json"))["dev"]["micro_f1"] >= 0


@pytest.mark.slow  # trains
def test_each_distill_refusal_is_one_line(teachers, tmp_path, capsys):
    cls_teacher, ner_teacher = teachers
    out = str(tmp_path / "refused")

    def refused(param_path, *sets):
        capsys.readouterr()
        code = run_trainer.main(["--param_path", param_path, "--set", f"trainer.output_dir={out}", *QUICK,
                                 *[a for s in sets for a in ("--set", s)]])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and not os.path.exists(out), err
        # a plan error names the param file first, or --set for a key the command line set
        return err[0].replace(f"error: {param_path}: ", "error: ").replace("error: --set ", "error: ")

    assert refused(CLS, "distill.alpha=0.5") == (
        "error: distill.teacher: required key is missing (the best/ folder of a trained run of the same task, e.g. "
        "output/cls_e5_fc_ch/best)")
    assert refused(CLS, f"distill.teacher={tmp_path}/nowhere") == (
        f"error: distill.teacher: '{tmp_path}/nowhere' does not exist")
    assert refused(CLS, f"distill.teacher={os.path.dirname(cls_teacher)}") == (
        f"error: distill.teacher: '{os.path.dirname(cls_teacher)}' is not a best/ folder of an appzoo run (no "
        f"labels.json); it is a run folder: use '{cls_teacher}'")
    assert refused(CLS, f"distill.teacher={ner_teacher}") == (
        f"error: distill.teacher: '{ner_teacher}' was trained with dataset_reader.type 'sequence_labeling'; this "
        f"run reads 'text_classification': a teacher must do the same task")
    assert refused(CLS, f"distill.teacher={cls_teacher}", "distill.alpha=1.5") == (
        "error: distill.alpha: must be in [0, 1], got 1.5")
    assert refused(CLS, f"distill.teacher={cls_teacher}", "distill.temperature=0").startswith(
        "error: distill.temperature: must be > 0, got 0")
    assert refused(CLS, f"distill.teacher={cls_teacher}", "trainer.audit_labels=true") == (
        "error: trainer.audit_labels: a fold's model is scored on the examples it did not learn from, but with "
        "distill it learns them from a teacher that saw them; audit without distill")
    assert refused("examples/cls_ernie_fc_multilabel.json", f"distill.teacher={cls_teacher}") == (
        "error: distill: dataset_reader.multi_label is true: a sigmoid per label is no distribution over the "
        "labels, which the temperature-softened KL is taken over; distil a single-label classifier")
    assert refused("examples/mtch_ernie_siamese_infonce.json", f"distill.teacher={cls_teacher}") == (
        "error: distill: model.type 'ErnieMatchingSiamesePairwise' gives similarity scores, not class logits, so "
        "there is no distribution to match a teacher's on; distil into a model with logits (ErnieCrfSeqLabel, "
        "ErnieFcClassification, ErnieFcSeqLabel, ErnieMatchingFcPointwise)")
    # labels differ: found once the data is read, still before anything is written
    data = tmp_path / "renamed"
    data.mkdir()
    for split in ("train", "dev", "test"):
        with open(f"data/cls/{split}.tsv", encoding="utf-8") as f:
            (data / f"{split}.tsv").write_text(f.read().replace("\ttech\n", "\ttechnology\n"), encoding="utf-8")
    sets = [f"dataset_reader.{s}={data}/{s}.tsv" for s in ("train", "dev", "test")]
    assert refused(CLS, f"distill.teacher={cls_teacher}", *sets) == (
        f"error: distill.teacher: '{cls_teacher}' predicts the labels ['finance', 'health', 'sports', 'tech'], this "
        f"run's data has ['finance', 'health', 'sports', 'technology']: a teacher's outputs are matched label by "
        f"label, so both must have the same labels in the same order")


@pytest.mark.slow  # trains
def test_a_transfer_file_is_labelled_by_the_teacher_and_learnt_on(teachers, tmp_path, capsys):
    cls_teacher, _ = teachers
    with open("data/cls/dev.tsv", encoding="utf-8") as f:
        texts = [line.split("\t")[0] for line in f.read().splitlines()[1:81]]
    transfer = tmp_path / "unlabelled.tsv"
    transfer.write_text("".join(t + "\n" for t in texts), encoding="utf-8")  # the text column alone
    out = str(tmp_path / "student")
    capsys.readouterr()
    assert _student(CLS, out, cls_teacher, "--set", "trainer.max_steps=3", "--set", f"distill.transfer={transfer}",
                    "--set", "trainer.batch_size=512") == 0
    assert f"note: distill.transfer: the teacher labels 80 input(s) of {transfer}" in capsys.readouterr().out
    (cache,) = glob.glob(os.path.join(out, "teacher", "*.npz"))
    with np.load(cache) as saved:
        numbers = saved["examples"].tolist()
    assert set(range(1200, 1280)) <= set(numbers)  # numbered after the 1,200 training examples
    assert len(numbers) == 1280  # 3 steps of 512 over 1,280 features: every one of them planned
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    capsys.readouterr()
    assert _student(CLS, str(tmp_path / "none"), cls_teacher, "--set", f"distill.transfer={empty}") == 2
    assert capsys.readouterr().err.strip() == f"error: distill.transfer: {empty} holds no inputs"
    assert _student(CLS, str(tmp_path / "none"), cls_teacher, "--set", f"distill.transfer={tmp_path}/no.tsv") == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --set distill.transfer: no such file '{tmp_path}/no.tsv' (a file of unlabelled inputs in the "
        f"training file's format)")


def test_the_record_names_every_engine_that_computed_teacher_rows():
    """Issue 42, item 6: teacher_engine auto picks per call; the record names each engine with its rows, not the
    last call's alone."""
    from types import SimpleNamespace

    from appzoo.run.teacher import Teacher

    said = lambda rows: Teacher.engines_said(SimpleNamespace(rows_by_engine=rows))  # noqa: E731
    assert said({}) == "cached" and said({"onnxruntime": 20000}) == "onnxruntime"
    assert said({"dygraph": 62, "onnxruntime": 20000}) == "onnxruntime (20,000 rows), dygraph (62 rows)"


def test_the_card_shows_the_teachers_scores_beside_the_students(tmp_path):
    """Issue 42, item 28: the record keeps the scores of the teacher's run (its metrics.json), and the card puts
    each beside the student's own."""
    from appzoo.reports import card
    from appzoo.reports.record import _scores_of

    run = tmp_path / "teacher"
    (run / "best").mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"dev": {"accuracy": 0.9, "macro_f1": 0.8, "confusion_matrix": [[1]]},
                                                  "test": {"accuracy": 0.85}}), encoding="utf-8")
    scores = _scores_of(str(run / "best"))
    assert scores == {"dev": {"accuracy": 0.9, "macro_f1": 0.8}, "test": {"accuracy": 0.85}}
    record = {"model": "ErnieFcClassification", "encoder": {"kind": "k", "source": "s", "licence": "l"},
              "distill": {"teacher": "t/best", "temperature": 3.0, "alpha": 0.7, "engine": "onnxruntime",
                          "teacher_scores": scores},
              "metrics": {"dev": {"scalars": {"accuracy": 0.8, "macro_f1": 0.7}}}}
    text = "\n".join(card._model(record))
    assert ("- the teacher's scores: dev accuracy 0.9000 (this model: 0.8000); dev macro_f1 0.8000 (this model: "
            "0.7000)") in text
    assert _scores_of(str(tmp_path / "nowhere" / "best")) == {}
