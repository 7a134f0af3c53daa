"""Out-of-fold predicted probabilities of the training set, for the audit's search for mislabeled examples
(``trainer.audit_labels``; :mod:`appzoo.reports.label_issues` reads them).

The training examples are split into ``trainer.audit_folds`` folds, stratified by label and seeded by
``trainer.seed``; for each fold the run's own model, reader and trainer (:class:`~appzoo.run.trainer.Trainer`,
the one training loop) train from the model's initial weights on the other folds, choosing the best model on dev
as a run does, and predict the held-out fold. Each fold's probabilities are written atomically as
``label_folds/fold-<i>.npy`` (its presence is the fold's marker), beside ``folds.json``, which records the
assignment and what it was made from: a command run again after a stop trains only the folds without a file,
and starts over when the data, the settings that change training, or the number of folds changed.
Afterwards the model and the reader's state are as they were, so a run that trains next trains exactly as it
would have without the audit (the trainer seeds each step itself).
"""
import io
import os
import warnings

import numpy as np
import paddle

from appzoo.errors import ConfigError, Interrupted
from appzoo.run.trainer import Trainer
from appzoo.store.resolve import changed_keys
from appzoo.utils import files
from appzoo.utils.progress import note, progress

FOLDS_FILE = "folds.json"


def fold_file(folder, i):
    return os.path.join(folder, f"fold-{i}.npy")


def out_of_fold(plan, prepared, folder):
    """``(given, probs, multi_label)`` of every training example (as the reader's
    :meth:`~appzoo.task.reader.TaskReader.label_probabilities` gives them), each predicted by the fold that
    did not train on it; the folds' files go into ``folder``."""
    cfg, bundle = plan.trainer, prepared.bundle
    examples, k = prepared.splits["train"], cfg.audit_folds
    first = _refuse(plan, prepared)
    given = _given(bundle, examples)
    assignment = _stratified(given, k, cfg.seed)
    done = _resume(plan, folder, assignment, k)
    initial = {name: value.numpy().copy() for name, value in bundle.model.state_dict().items()}
    initial_state = bundle.reader.state()
    probs = np.zeros((len(examples), first[1].shape[1]))
    try:
        for i in progress(range(k), desc="label folds", unit="fold", dynamic_ncols=True):
            held = np.flatnonzero(assignment == i)
            saved = _saved_fold(fold_file(folder, i), (len(held), probs.shape[1])) if i in done else None
            if saved is not None:
                probs[held] = saved
                continue
            if i in done:
                note(f"audit: {fold_file(folder, i)} is damaged or not this fold's; label fold {i + 1} is trained "
                     f"again")
            # every fold from the same initial weights; the trainer seeds each step itself (seed + step)
            bundle.model.set_state_dict(initial)
            bundle.reader.load_state(initial_state)
            probs[held] = _train_fold(plan, prepared, assignment, i, folder)
    finally:  # the run goes on with the model it had (a run that trains next starts from here)
        bundle.model.set_state_dict(initial)
        bundle.reader.load_state(initial_state)
    return given, probs, first[2]


def _refuse(plan, prepared):
    """ConfigError for what the folds cannot do; else the untrained model's :func:`_probabilities` of the first
    training example (their width is the number of labels)."""
    examples, features = prepared.splits["train"], prepared.features["train"]
    if paddle.distributed.get_world_size() > 1:
        raise ConfigError("trainer.audit_labels: the folds train in one process; run the audit without "
                          "paddle.distributed.launch (then train data-parallel as before)")
    if len(features) != len(examples):
        raise ConfigError(f"trainer.audit_labels: needs one input per training example, but the reader made "
                          f"{len(features)} inputs of {len(examples)} examples (inputs split into windows)")
    trainer = Trainer(prepared.bundle, plan.trainer, (plan.metric, plan.greater))
    first = _probabilities(trainer, examples[:1], features[:1])
    if first is None:
        raise ConfigError(f"trainer.audit_labels: the model {plan.config['model'].get('type')!r} gives no "
                          f"probabilities over the labels of each example (classification, multi-label and "
                          f"pair classification with probabilities do; see docs/reports.md#label-issues)")
    return first


def _train_fold(plan, prepared, assignment, i, folder):
    """Train on every fold but ``i`` (best model on dev, as a run chooses it), predict fold ``i``, save that."""
    examples, features = prepared.splits["train"], prepared.features["train"]
    held, k = np.flatnonzero(assignment == i), plan.trainer.audit_folds
    dev = (prepared.splits["dev"], prepared.features["dev"]) if "dev" in prepared.splits else None
    trainer = Trainer(prepared.bundle, plan.trainer, (plan.metric, plan.greater))
    try:
        trainer.train([features[j] for j in np.flatnonzero(assignment != i)], dev)
    except Interrupted as stop:
        kept = sum(os.path.exists(fold_file(folder, j)) for j in range(k))
        raise Interrupted(stop.signum, f"stopped in label fold {i + 1} of {k}: {kept} finished fold(s) kept in "
                                       f"{folder}", advice="the same command continues from there") from None
    fold = _probabilities(trainer, [examples[j] for j in held], [features[j] for j in held])[1]
    _save(fold_file(folder, i), fold)
    return fold


def _probabilities(trainer, examples, features):
    predictions, _ = trainer.predict(examples, features, desc="label fold")
    return trainer.reader.label_probabilities(examples, predictions, trainer.bundle.labels)


def _given(bundle, examples):
    """The given label indices, as :meth:`label_probabilities` gives them (with placeholder probabilities)."""
    fake = [{"probs": np.zeros(len(bundle.labels))} for _ in examples]
    return bundle.reader.label_probabilities(examples, fake, bundle.labels)[0]


def check_folds(bundle, examples, k):
    """Before the run takes its folder (:func:`appzoo.run.prepare.prepare`): ConfigError for more folds than
    training examples, or than the largest class holds (stratified folds: scikit-learn refuses them)."""
    if k > len(examples):
        raise ConfigError(f"trainer.audit_folds: {k} folds of {len(examples)} training examples; at most "
                          f"{len(examples)}")
    largest = max(np.unique(_strata(_given(bundle, examples)), return_counts=True)[1], default=0)
    if k > largest:
        raise ConfigError(f"trainer.audit_folds: {k} folds, but the largest class has {largest} training examples "
                          f"(the folds are stratified by label); at most {largest}")


def _strata(given):
    """What the folds are stratified by: the label, a multi-label example's rarest label (-1: none)."""
    if given and isinstance(given[0], list):
        counts = np.bincount([j for g in given for j in g] or [0])
        return [min(g, key=lambda j: counts[j]) if g else -1 for g in given]
    return list(given)


def _stratified(given, k, seed):
    """The fold of each example: stratified by its label (a multi-label example by its rarest label), shuffled
    with ``seed``; a class with fewer examples than folds is spread as far as it goes."""
    from sklearn.model_selection import StratifiedKFold  # scikit-learn: loaded by this audit alone

    strata = _strata(given)
    assignment = np.zeros(len(given), dtype=int)
    with warnings.catch_warnings():  # "the least populated class has only n members": as the docstring says
        warnings.simplefilter("ignore", UserWarning)
        for i, (_, held) in enumerate(StratifiedKFold(k, shuffle=True, random_state=seed).split(strata, strata)):
            assignment[held] = i
    return assignment


def _saved_fold(path, shape):
    """A done fold's out-of-fold probabilities, or None for a file that is damaged (a kill, a full disk) or of
    another shape: then the fold is trained again, as a damaged teacher cache is computed again."""
    try:
        saved = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    return saved if isinstance(saved, np.ndarray) and saved.shape == shape else None


def _resume(plan, folder, assignment, k):
    """The folds already done in ``folder`` (an empty set when there are none, or they were made from other
    data or settings: then their files are removed); writes ``folds.json`` for this assignment."""
    record = {"folds": k, "train_sha256": files.file_sha256(plan.data.train), "config": plan.config,
              "assignment": assignment.tolist()}
    path = os.path.join(folder, FOLDS_FILE)
    saved = files.read_json(path, "label folds record") if os.path.exists(path) else None
    same = saved is not None and all(saved.get(key) == record[key] for key in ("folds", "train_sha256",
                                                                                 "assignment"))
    same = same and not changed_keys(saved["config"], plan.config, plan.defaults)
    if same:
        done = {i for i in range(k) if os.path.exists(fold_file(folder, i))}
        if done:
            note(f"audit: label folds {sorted(i + 1 for i in done)} of {k} already done in {folder}; "
                 f"training the rest")
        return done
    if saved is not None:
        note(f"audit: the label folds in {folder} were made from other data or settings; starting over")
    os.makedirs(folder, exist_ok=True)
    for i in range(max(k, saved.get("folds", 0) if saved else 0)):
        files.remove(fold_file(folder, i))
    files.write_json(path, record)
    return set()


def _save(path, array):
    """``array`` as ``.npy``, atomically: the file is there whole or not at all."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array, dtype="float64"))
    files.write_bytes(path, buffer.getvalue())
