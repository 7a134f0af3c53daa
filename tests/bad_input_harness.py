"""The harness of the bad-input table (tests/bad_input_cases.py): the
workspace a case builds its inputs in, the shared fixtures, and the two ways
to run a case and judge it.

* :func:`plan_in_process` runs what the CLI runs before its first write, in
  this process: load the param file, apply ``--set``, read ``--do``, validate
  (:mod:`appzoo.run.plan`) and, for a case whose error is in the data, prepare
  (:func:`appzoo.run.prepare.prepare`: read the splits, build encoder and model).
* :func:`execute` runs ``run_trainer.main`` with the case's argv, as a user
  would (benchmarks/bad_inputs_probe.py runs every case this way, against
  any checkout).

:func:`judge` gives one verdict for either:

* ``good``: the expected exit code, and one line ``error: ...`` that matches
  every fact of the case (file:line or key path, and the offending value);
* ``poor message``: the line misses a fact, or another exit code / no
  ``error:`` prefix;
* ``traceback``: an exception escaped, a Traceback was printed, or stderr has
  more than one line;
* ``silent``: exit 0 where the input should have been refused;
* ``data loss``: a finished run that was in the output folder before changed.

Nothing here imports paddle or appzoo at import time: the probe puts the
checkout under test on ``sys.path`` first.
"""
import dataclasses
import gc
import hashlib
import inspect
import json
import os
import re
import shutil
import traceback
from typing import Callable, Tuple

# Every case trains for at most two tiny steps if a checkout lets it through.
FAST = ["--set", "trainer.max_steps=2", "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false",
        "--set", "trainer.batch_size=8", "--set", "trainer.logging_steps=1"]

# First lines kept of each sample file (NER files are cut at a sentence end).
TRIM = {"cls/train.tsv": 200, "cls/dev.tsv": 80, "cls/test.tsv": 80, "cls/predict.tsv": 10,
        "cls_multilabel/train.tsv": 200, "cls_multilabel/dev.tsv": 60, "cls_multilabel/test.tsv": 60,
        "match/train.tsv": 300, "match/dev.tsv": 80, "match/test.tsv": 80, "match/predict.tsv": 10,
        "ner/train.txt": 2824, "ner/dev.txt": 546, "ner/test.txt": 546, "ner/predict.txt": 100}
DELETE = object()


# ---------------------------------------------------------------------------
# Workspace: the files of one case
# ---------------------------------------------------------------------------
class Workspace:
    """A case's folder. ``repo`` supplies examples/, data/ and configs/;
    ``finished`` is a finished run folder to copy in, ``encoder`` a saved
    pretrained-style encoder folder (both made once per session)."""

    def __init__(self, root, repo, finished=None, encoder=None):
        self.root, self.repo = str(root), str(repo)
        self.finished, self.encoder = finished, encoder
        self.prior = None  # the copied finished run, checked byte for byte afterwards
        self.overwrite = False
        self._data = {}

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def data(self, rel):
        """A trimmed copy of data/<rel>; the same path on every call."""
        if rel not in self._data:
            with open(os.path.join(self.repo, "data", rel), "rb") as f:
                lines = f.read().split(b"\n")
            keep = TRIM.get(rel)
            if keep:
                lines = lines[:keep]
                if rel.startswith("ner/"):
                    while lines and lines[-1].strip():
                        lines.pop()
            target = self.path("data", rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(b"\n".join(lines).rstrip(b"\n") + b"\n")
            self._data[rel] = target
        return self._data[rel]

    def edit(self, rel, lineno, new):
        """Replace line ``lineno`` (1-based) of the copy of data/<rel>."""
        path = self.data(rel)
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        lines[lineno - 1] = new.encode("utf-8") if isinstance(new, str) else new
        with open(path, "wb") as f:
            f.write(b"\n".join(lines))
        return path

    def reencode(self, rel, encoding):
        path = self.data(rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "wb") as f:
            f.write(text.encode(encoding))
        return path

    def write(self, rel, content):
        path = self.path(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content.encode("utf-8") if isinstance(content, str) else content)
        return path

    def tags_to_o(self, rel):
        """Make every tag of the copy of the CoNLL file data/<rel> 'O'."""
        with open(self.data(rel), encoding="utf-8") as f:
            lines = [line.split("\t")[0] + "\tO" if line.strip() else "" for line in f.read().split("\n")]
        return self.write(self.data(rel), "\n".join(lines))

    def rows(self, rel):
        with open(self.data(rel), encoding="utf-8") as f:
            return [line.rstrip("\n").split("\t") for line in f if line.strip()]

    def tiny_config(self, **changes):
        """A copy of configs/ernie_tiny.json with ``changes`` (DELETE removes a key)."""
        with open(os.path.join(self.repo, "configs", "ernie_tiny.json"), encoding="utf-8") as f:
            config = json.load(f)
        for key, value in changes.items():
            if value is DELETE:
                config.pop(key, None)
            else:
                config[key] = value
        name = "configs/ernie_" + ("_".join(sorted(changes)) or "tiny") + ".json"
        return self.write(name, json.dumps(config, indent=2))

    def config(self, example, **edits):
        """The example's param dict with data, encoder config and output folder
        pointing into this workspace; ``edits`` are dotted keys ('__' for '.')."""
        with open(os.path.join(self.repo, "examples", example), encoding="utf-8") as f:
            config = json.load(f)
        reader = config["dataset_reader"]
        for split in ("train", "dev", "test", "predict"):
            if split in reader:
                reader[split] = self.data(reader[split][len("data/"):])
        encoder = config["model"].get("encoder")
        if isinstance(encoder, dict) and "config" in encoder:
            encoder["config"] = self.tiny_config()
        config["trainer"]["output_dir"] = self.path("out")
        for key, value in edits.items():
            node, parts = config, key.split("__")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            if value is DELETE:
                node.pop(parts[-1], None)
            else:
                node[parts[-1]] = value
        return config

    def params(self, example="cls_ernie_fc_ch.json", name="params.json", **edits):
        return self.write(name, json.dumps(self.config(example, **edits), indent=2, ensure_ascii=False))

    def prior_run(self, name="out"):
        """Copy the finished run into ``name``; the case must leave it byte-identical."""
        target = self.path(name)
        shutil.copytree(self.finished, target)
        self.prior = target
        return target

    def pretrained(self, name="enc"):
        target = self.path(name)
        shutil.copytree(self.encoder, target)
        return target


def argv(param_path, *sets, do=None):
    args = ["--param_path", param_path, *FAST]
    for item in sets:
        args += ["--set", item]
    return args + (["--do", do] if do else [])


def tree_hashes(folder):
    """{relative path: sha256} of every file under ``folder``."""
    result = {}
    for base, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                result[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return result


# ---------------------------------------------------------------------------
# A case
# ---------------------------------------------------------------------------
#: Where a case is refused. PLAN: by the planner, from the param file and the
#: command line alone (the promise of appzoo.run.plan). READ: while the data,
#: encoder and saved model are read (run/prepare.py), or earlier. RUN: only a
#: run can tell (a resume check, a loss that diverges): through the CLI only.
PLAN, READ, RUN = "plan", "read", "run"


@dataclasses.dataclass
class Case:
    id: str
    group: str
    build: Callable  # Workspace -> argv
    facts: Tuple[str, ...]  # regexes the one error line must all match
    code: int = 2
    stage: str = PLAN


CLS, ML, NER, CRF = "cls_ernie_fc_ch.json", "cls_ernie_fc_multilabel.json", "ner_ernie_fc_ch.json", "ner_ernie_crf_ch.json"
POINT, CIRCLE, INFONCE = ("mtch_ernie_fc_pointwise_ch.json", "mtch_ernie_pairwise_simnet_with_circle_loss.json",
                          "mtch_ernie_siamese_infonce.json")


# ---------------------------------------------------------------------------
# Inputs the cases build on
# ---------------------------------------------------------------------------
def yaml_text(config):
    import yaml

    return yaml.safe_dump(config, allow_unicode=True, sort_keys=False)


def jsonl_cls(ws, edits, predict=None):
    """train.jsonl / dev.jsonl made from the TSV samples, with line edits; a
    predict.jsonl of the ``predict`` lines when given."""
    paths = {}
    for split in ("train", "dev"):
        rows = [json.dumps({"text": t, "label": l}, ensure_ascii=False) for t, l in ws.rows(f"cls/{split}.tsv")]
        for lineno, line in edits.get(split, {}).items():
            rows[lineno - 1] = line
        paths[split] = ws.write(f"data/{split}.jsonl", "\n".join(rows) + "\n")
    paths["predict"] = DELETE if predict is None else ws.write("data/predict.jsonl", "\n".join(predict) + "\n")
    return ws.params(CLS, dataset_reader__format="jsonl", dataset_reader__text_column="text",
                     dataset_reader__label_column="label", dataset_reader__train=paths["train"],
                     dataset_reader__dev=paths["dev"], dataset_reader__test=DELETE,
                     dataset_reader__predict=paths["predict"])


def ner_sentences(ws, rel):
    sentences, tokens, tags = [], [], []
    with open(ws.data(rel), encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                if tokens:
                    sentences.append((tokens, tags))
                tokens, tags = [], []
                continue
            token, tag = line.rstrip("\n").split("\t")
            tokens.append(token)
            tags.append(tag)
    if tokens:
        sentences.append((tokens, tags))
    return sentences


# Changes to a copy of the saved encoder folder (Workspace.pretrained) or of best/.
def remove(name):
    return lambda folder: os.remove(os.path.join(folder, name))


def garbage(name, data=b"this is not a weights file\n" * 10):
    def mutate(folder):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return mutate


def truncate(name):
    def mutate(folder):
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
    return mutate


def safetensors_garbage(folder):
    os.remove(os.path.join(folder, "model_state.pdparams"))
    garbage("model.safetensors")(folder)


def empty(folder):
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))


# ---------------------------------------------------------------------------
# Shared fixtures: one finished run and one pretrained-style encoder folder
# ---------------------------------------------------------------------------
def make_finished_run(root, repo, main):
    """Train the classification example for two steps into ``root``/out."""
    ws = Workspace(root, repo)
    params = ws.params(CLS)
    rc = main(argv(params, "trainer.eval_steps=1"))
    if rc != 0 or not os.path.isdir(ws.path("out", "best")):
        raise RuntimeError(f"the finished run for the bad-input cases did not train (exit {rc})")
    return ws.path("out")


def make_encoder_folder(folder, repo):
    """A tiny ERNIE saved the way PaddleNLP saves a pretrained model."""
    from paddlenlp.transformers import ErnieConfig, ErnieModel, ErnieTokenizer

    with open(os.path.join(repo, "configs", "ernie_tiny.json"), encoding="utf-8") as f:
        settings = {k: v for k, v in json.load(f).items() if k != "model_type"}
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(repo, "data", "cls", "train.tsv"), encoding="utf-8") as f:
        chars = sorted(set(f.read()) - set("\t\n "))
    vocab = os.path.join(folder, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars) + "\n")
    settings["vocab_size"] = len(chars) + 5
    ErnieModel(ErnieConfig(**settings)).save_pretrained(folder)
    ErnieTokenizer(vocab).save_pretrained(folder)
    if not os.path.isfile(os.path.join(folder, "model_state.pdparams")):
        raise RuntimeError(f"{folder}: expected PaddleNLP to save model_state.pdparams, got {os.listdir(folder)}")
    return folder


# ---------------------------------------------------------------------------
# Running and judging one case
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    argv: list
    rc: object = None
    exception: str = None  # the traceback of an exception that escaped
    changed: list = None  # files of the prior run that changed or vanished
    added: list = None  # files that appeared in the prior run's folder
    wrote: list = None  # files written into a fresh output folder by a run that failed
    stage: str = None  # plan_in_process: PLAN or READ, where the error was raised


def execute(case, ws, main):
    """Build the case's inputs and run ``main`` in-process; stderr is captured by the caller."""
    args = case.build(ws)
    outcome, watch = Outcome(args), _watch(ws, args)
    try:
        outcome.rc = main(args)
    except SystemExit as e:
        outcome.rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: B902  (the point is to see what escapes)
        outcome.exception = traceback.format_exc()
    gc.collect()  # what a CLI user sees once the process has exited (temporary folders' finalizers)
    watch(outcome)
    return outcome


def plan_in_process(case, ws):
    """Build the case's inputs and run what ``run_trainer.main`` runs before its
    first write: load the param file, apply ``--set``, read ``--do``, validate
    and, unless the case is refused at PLAN, prepare (read the data, build the
    encoder and the model). Returns ``(outcome, stderr)``, stderr being the
    line the CLI would print. The registries must be loaded (the shared
    finished run has run ``main`` once)."""
    import run_trainer
    from appzoo.params.param_file import apply_overrides, load_param_file
    from appzoo.errors import UserError
    from appzoo.run.plan import validate
    from appzoo.run.prepare import prepare

    try:
        from appzoo.run.modes import needed_splits
    except ImportError:  # an older checkout (the probe's "before")
        needed_splits = None

    args = case.build(ws)
    options = run_trainer.parse_args(args)
    outcome, watch, stderr = Outcome(args), _watch(ws, args), ""
    try:
        outcome.stage = PLAN
        config = load_param_file(options.param_path)
        apply_overrides(config, options.set)
        do = run_trainer.parse_do(options.do)
        if options.search is not None:  # a search plans its ranges and checks its study folder
            plan = run_trainer.plan_search_of(options, config, do)
        else:
            plan = validate(config, options.param_path, do=do)
        if case.stage != PLAN:
            outcome.stage = READ
            # the splits the modes read are the caller's to say since Step 23; the probe runs this harness against
            # older checkouts too, whose prepare(plan) found them itself
            needed = (needed_splits(plan.do),) if len(inspect.signature(prepare).parameters) > 1 else ()
            prepare(plan, *needed)  # dropped at once: its temporary vocabulary folder goes with it
        outcome.rc, outcome.stage = 0, None
    except UserError as e:
        outcome.rc, stderr = e.exit_code, run_trainer.error_line(e, options.param_path, options.set)
    except Exception:  # noqa: B902  (the point is to see what escapes)
        outcome.exception = traceback.format_exc()
    watch(outcome)
    return outcome, stderr


def _watch(ws, args):
    """Snapshot what a case must not touch: the copied finished run (byte for
    byte) and the fresh output folder. Returns ``check(outcome)``, which
    records in ``outcome`` what changed."""
    before = tree_hashes(ws.prior) if ws.prior else None
    fresh = not os.path.exists(ws.path("out"))
    ws.overwrite = any("overwrite_output_dir=true" in a for a in args)

    def check(outcome):
        if before is not None:
            after = tree_hashes(ws.prior) if os.path.isdir(ws.prior) else {}
            outcome.changed = sorted(k for k in before if before[k] != after.get(k))
            outcome.added = sorted(k for k in after if k not in before)
        if fresh and os.path.isdir(ws.path("out")):
            outcome.wrote = sorted(tree_hashes(ws.path("out")))
    return check


VERDICTS = ("good", "poor message", "traceback", "silent", "data loss")


def judge(case, outcome, stderr, ws):
    """(verdict, reason) for one run; ``stderr`` is what was printed to sys.stderr.

    Facts are matched with the workspace folder replaced by ``<tmp>``, so that
    a temporary path (which holds the case's name) never satisfies one."""
    overwrite = ws.overwrite
    real = os.path.realpath(ws.root)
    lines = [line.replace(ws.root, "<tmp>").replace(real, "<tmp>") for line in stderr.splitlines() if line.strip()]
    if outcome.changed and not (outcome.rc == 0 and overwrite):
        return "data loss", f"the finished run changed: {', '.join(outcome.changed[:5])}"
    if outcome.exception:
        return "traceback", "an exception escaped: " + outcome.exception.strip().splitlines()[-1]
    if "Traceback" in stderr:
        return "traceback", "a Traceback was printed"
    if len(lines) > 1:
        return "traceback", f"{len(lines)} lines on stderr, the first: {lines[0][:200]}"
    if outcome.rc == 0:
        return "silent", "exit 0"
    if outcome.rc != case.code:
        return "poor message", f"exit {outcome.rc}, expected {case.code}"
    if not lines or not lines[0].startswith("error: "):
        return "poor message", "no 'error: ' line on stderr"
    missing = [fact for fact in case.facts if not re.search(fact, lines[0])]
    if missing:
        return "poor message", f"the line does not match {missing}"
    return "good", ""
