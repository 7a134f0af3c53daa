"""The table of a run folder's files: each one's name, the module that owns it, and what it holds.

:class:`appzoo.store.archive.RunFolder` takes its members from this table (``folder.metrics`` is the path of
``metrics.json``), and a replaced run moves every entry aside (:data:`RUN_ARTIFACTS`); no other module
spells a run-folder file's name. docs/reliability.md's "who owns what" table is tested against ``owner``.
"""
import dataclasses


@dataclasses.dataclass(frozen=True)
class RunFile:
    key: str  # the RunFolder member: folder.<key> is the path
    name: str  # the name in the folder
    owner: object  # the module that owns its contents (relative to appzoo/), or None for a name no longer written
    holds: str
    audit: bool = False  # written by --do audit, which describes the data: a folder of only these holds no run
    kept: bool = False  # a cache named by what it was computed from: a replaced run leaves it where it is


RUN_FILES = (
    RunFile("best", "best", "store/archive.py",
            "the trained model: a link to a hidden .best-step-N-XXXX/ folder whose files store/bundle.py writes"),
    RunFile("checkpoints", "checkpoints", "store/archive.py", "checkpoints/step-N/: what trainer.resume needs"),
    RunFile("config", "config.json", "store/resolve.py", "the param tree with every default written out (store/resolve.py)"),
    RunFile("train_log", "train_log.jsonl", "run/callbacks.py", "one line per logged step and evaluation"),
    RunFile("metrics", "metrics.json", "run/modes/__init__.py", "the dev/test metrics and the best step"),
    RunFile("predictions", "predictions.jsonl", "run/modes/predict.py", "--do predict's rows"),
    RunFile("report", "report.md", "reports/report.py", "the run's report"),
    RunFile("report_html", "report.html", "reports/html.py", "the run's report as a page"),
    RunFile("plots", "plots", "reports/report.py", "the report's figures"),
    RunFile("inference", "inference", "inference/export.py", "the static graph and its ONNX copy"),
    RunFile("vocab", "vocab", None, "a from-scratch vocabulary that older versions wrote here: still moved aside"),
    RunFile("vdl", "vdl", "run/callbacks.py", "VisualDL's log (trainer.visualdl)"),
    RunFile("audit", "audit.md", "reports/audit.py", "--do audit's report", audit=True),
    RunFile("audit_json", "audit.json", "reports/audit.py", "--do audit's figures", audit=True),
    RunFile("label_issues", "label_issues.jsonl", "reports/label_issues.py",
            "trainer.audit_labels: the suspected mislabeled training examples, ranked", audit=True),
    RunFile("label_folds", "label_folds", "run/label_folds.py",
            "trainer.audit_labels: folds.json and each fold's out-of-fold probabilities (fold-<i>.npy)", audit=True),
    RunFile("split_predictions", "predictions", "reports/mistakes.py", "predictions/<split>.jsonl of each evaluation"),
    RunFile("errors", "errors.md", "reports/mistakes.py", "what the model gets wrong most"),
    RunFile("teacher", "teacher", "run/teacher.py",
            "distill: the teacher's logits of the training examples (<key>.npz, the key naming the teacher and the "
            "data), kept when the run is replaced; and the teacher's exported graph", kept=True),
    RunFile("run_record", "run_record.json", "reports/record.py",
            "the run's facts (record_version 1): data sha256, command, metrics, versions; --do reproduce reads it"),
    RunFile("model_card", "MODEL_CARD.md", "reports/card.py", "run_record.json as a model card a reviewer reads"),
    RunFile("run_marker", ".appzoo-run", "store/archive.py",
            "written when a run first takes the folder: what marks it as a run of this toolkit (a user's own "
            "config.json, report.md or audit.md beside it are the user's, and are not written over)", kept=True),
    RunFile("diverged", "diverged.json", "experiments/jobs.py",
            "a sweep's or search's run that stopped on a non-finite loss: its record and the error (the run ended)"),
    RunFile("reproductions", "reproduce", "run/reproduce.py", "reproduce/N/: each --do reproduce's re-run of the run"),
    RunFile("reproduction", "reproduce.json", "run/reproduce.py",
            "in a reproduce/N/ folder: its metrics against the recorded ones"),
)
BY_KEY = {f.key: f for f in RUN_FILES}
#: What a run writes into its folder; all of it is moved aside when a run is replaced (a kept cache stays).
RUN_ARTIFACTS = tuple(f.name for f in RUN_FILES if not f.kept)
#: What ``--do audit`` writes: it describes the data, not a model, so a folder holding only these holds no run.
AUDIT_FILES = tuple(f.name for f in RUN_FILES if f.audit)
