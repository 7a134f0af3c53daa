"""Post-hoc decision rules: fitted on dev outputs after each evaluation, saved with the model, applied when decoding.

A rule turns a model's outputs into decisions with a few numbers that
training does not learn: a threshold on a score, one per label, a logit
adjustment, a temperature. Each has

* ``fit(outputs, gold, labels, metric)``: fit on the dev ``outputs`` as
  decoded so far (this rule applied with its current value) and the gold
  answers; returns the outputs decoded with the value just fitted;
* ``apply(outputs, labels)``: outputs to probabilities or decisions;
* ``state()`` / ``load_state(state)``: the rule's part of the reader's state,
  saved with the model: a few keys of one flat dict;
* ``fits``: whether :meth:`fit` fits anything (a configured value is kept);
* ``fitted``: whether it holds a fitted value, by :meth:`fit` or from a saved state that had one (a model
  trained without the rule, evaluated with it, has none: ``--do eval`` then fits it on dev first);
* ``key`` and ``said()``: the param key that sets the rule and its value in a few words, for messages.

A reader composes them in :class:`Decisions`, in the order they apply.
"""
import numpy as np

from appzoo.errors import ConfigError
from appzoo.metrics.calibration import adjust, fit_temperature, scale
from appzoo.metrics.classification import decision_score
from appzoo.metrics.matching import best_threshold

#: ``dataset_reader.logit_adjust: tune``: the values of tau tried on dev (0, no adjustment, among them)
TAUS = tuple(round(0.1 * i, 1) for i in range(21))
#: metrics a decision rule changes; logit_adjust is tuned for trainer.metric_for_best when it is one, else macro_f1
DECISION_METRICS = ("accuracy", *(f"{a}_{m}" for a in ("macro", "micro", "weighted")
                                  for m in ("precision", "recall", "f1")))


class Decisions:
    """The rules a reader decodes with, applied and fitted in their order;
    the reader's state is theirs, merged (``None`` rules are left out, so a
    reader can list the ones its config switched off)."""

    def __init__(self, *rules):
        self.rules = tuple(rule for rule in rules if rule is not None)

    def __iter__(self):
        return iter(self.rules)

    def get(self, kind):
        """The rule of class ``kind``, or None where there is none."""
        return next((rule for rule in self.rules if isinstance(rule, kind)), None)

    @property
    def fits(self):
        return any(rule.fits for rule in self.rules)

    def unfitted(self):
        """The rules that fit on dev but hold no fitted value: the model was saved without them."""
        return [rule for rule in self.rules if rule.fits and not rule.fitted]

    def fit(self, outputs, gold, labels, metric=None):
        for rule in self.rules:
            outputs = rule.fit(outputs, gold, labels, metric)
        return outputs

    def apply(self, outputs, labels):
        for rule in self.rules:
            outputs = rule.apply(outputs, labels)
        return outputs

    def state(self):
        return {key: value for rule in self.rules for key, value in rule.state().items()}

    def load_state(self, state):
        for rule in self.rules:
            rule.load_state(state)


def unfitted_note(rules, fitted_on_dev, test=True):
    """The line an eval or a prediction says of ``rules`` (:meth:`Decisions.unfitted`): fitted on dev now, or
    left out (no dev set). ``test``: whether a test split was evaluated too."""
    keys = ", ".join(rule.key for rule in rules)
    if fitted_on_dev:
        unlike_test = ", test's are not" if test else ""
        return (f"note: {keys}: the model was saved without it, so it was fitted on dev now "
                f"({', '.join(rule.said() for rule in rules)}): dev's metrics are scored on the data it was fitted "
                f"on{unlike_test}; train with it to save it with the model")
    return (f"note: {keys}: the model was saved without it and there is no dev set here to fit it on, so it "
            f"decodes without it; evaluate with a dev set, or train with it to save it with the model")


class Threshold:
    """A score at or above ``value`` is positive: ``fixed``, else tuned on dev
    for the best ``tune_for`` (the positive class's F1, or accuracy:
    :func:`~appzoo.metrics.matching.best_threshold`), else ``default`` (no dev
    set). State: ``{"threshold", "tuned"}``, with ``"dev_f1"`` (or
    ``"tuned_for": "accuracy"`` and ``"dev_accuracy"``) once tuned. A saved
    threshold tuned for another metric than ``tune_for`` is not fitted: an
    eval fits it again on dev."""

    @property
    def key(self):
        return "dataset_reader.threshold" if self.tune_for == "f1" else "dataset_reader.tune_threshold_for"

    def __init__(self, fixed=None, default=0.5, tune_for="f1"):
        self.fixed, self.default, self.tune_for = fixed, default, tune_for
        self.tuned, self.dev_value = None, None

    @property
    def fitted(self):
        return self.tuned is not None

    @property
    def fits(self):
        return self.fixed is None

    @property
    def value(self):
        if self.fixed is not None:
            return self.fixed
        return self.tuned if self.tuned is not None else self.default

    def fit(self, scores, gold, labels=None, metric=None):
        if self.fixed is None:
            self.tuned, self.dev_value = best_threshold(gold, scores, self.tune_for)
        return self.apply(scores, labels)

    def apply(self, scores, labels=None):
        return np.asarray(scores) >= self.value

    def said(self):
        tuned = f", tuned for {self.tune_for}" if self.fixed is None and self.tune_for != "f1" else ""
        return f"threshold {self.value:.4g}{tuned}"

    def state(self):
        if self.fixed is not None:
            return {"threshold": self.fixed, "tuned": False}
        if self.tuned is None:  # no dev set: nothing was tuned
            return {"threshold": self.default, "tuned": False}
        tuned_for = {} if self.tune_for == "f1" else {"tuned_for": self.tune_for}
        return {"threshold": self.tuned, "tuned": True, **tuned_for, f"dev_{self.tune_for}": self.dev_value}

    def load_state(self, state):
        same = state.get("tuned_for", "f1") == self.tune_for
        self.tuned = state.get("threshold") if state.get("tuned") and same else None
        self.dev_value = state.get(f"dev_{self.tune_for}") if same else None


class PerLabelThresholds:
    """Multi-label: a label is given when its probability is at least its
    threshold, ``threshold`` unless ``tune`` tuned one on dev for its best F1
    (labels with at least ``min_positives`` dev positives; candidates and ties
    as :func:`~appzoo.metrics.matching.best_threshold`). State:
    ``{"threshold", "per_label": {label: {"threshold", "dev_f1",
    "dev_positives"}}}``; a label not listed uses ``threshold``."""

    key = "dataset_reader.per_label_thresholds"

    def __init__(self, threshold=0.5, tune=True, min_positives=5):
        self.threshold, self.tune, self.min_positives = threshold, tune, min_positives
        self.tuned = {}  # label -> {"threshold", "dev_f1", "dev_positives"}, from the last fit
        self.fitted = False

    @property
    def fits(self):
        return self.tune

    def thresholds(self, labels):
        """The decision threshold of each of ``labels``."""
        tuned = self.tuned if self.tune else {}  # a saved state's tuned ones do not override tune: false
        return np.array([tuned[name]["threshold"] if name in tuned else self.threshold for name in labels])

    def fit(self, probs, gold, labels, metric=None):
        """``gold``: a 0/1 matrix shaped like ``probs``."""
        if self.tune:
            self.tuned = {}
            for j, name in enumerate(labels):
                positives = int(gold[:, j].sum())
                if positives >= self.min_positives:
                    threshold, f1 = best_threshold(gold[:, j], probs[:, j])
                    self.tuned[name] = {"threshold": threshold, "dev_f1": f1, "dev_positives": positives}
            self.fitted = True
        return self.apply(probs, labels)

    def apply(self, probs, labels):
        return probs >= self.thresholds(labels)

    def said(self):
        return f"thresholds of {len(self.tuned)} labels"

    def state(self):
        return {"threshold": self.threshold, "per_label": {k: dict(v) for k, v in self.tuned.items()}}

    def load_state(self, state):
        self.tuned = {k: dict(v) for k, v in state.get("per_label", {}).items()}
        self.fitted = "per_label" in state


class Temperature:
    """Temperature scaling of a softmax (:func:`~appzoo.metrics.calibration.scale`),
    the temperature fitted on dev for the smallest log-loss; the argmax, so the
    predicted label, never changes. State: ``{"temperature"}``."""

    fits = True
    key = "dataset_reader.calibrate"

    def __init__(self):
        self.temperature = 1.0
        self.fitted = False

    def fit(self, probs, gold, labels=None, metric=None):
        unscaled = self.undo(probs)
        self.temperature = fit_temperature(unscaled, gold)
        self.fitted = True
        return scale(unscaled, self.temperature)

    def apply(self, probs, labels=None):
        return scale(probs, self.temperature) if self.temperature != 1.0 else probs

    def undo(self, probs):
        """``probs`` as they were before this temperature scaled them."""
        return scale(probs, 1.0 / self.temperature)

    def said(self):
        return f"temperature {self.temperature:.4g}"

    def state(self):
        return {"temperature": self.temperature}

    def load_state(self, state):
        self.temperature = float(state.get("temperature", 1.0))
        self.fitted = "temperature" in state


class LogitAdjust:
    """Post-hoc logit adjustment (Menon et al. 2021, :func:`~appzoo.metrics.calibration.adjust`):
    the argmax of ``logits - tau * log(prior)``. ``tau``: a number, or
    ``"tune"`` to choose it among :data:`TAUS` on dev for the ``metric`` of
    the fit (the smallest of equals, so 0 unless an adjustment helps).
    ``priors``: the training label shares, set by the reader from the training
    data, from a saved state, or from the training label counts a model was
    saved with (a model trained without this rule). State:
    ``{"logit_adjust": {"tau", "priors"}}``."""

    key = "dataset_reader.logit_adjust"

    def __init__(self, tau):
        self.mode = tau
        self.tau = 0.0 if tau == "tune" else float(tau)  # "tune": from the last fit
        self.priors = None
        self.fitted = False

    def priors_from_counts(self, counts):
        """The priors from training label counts, where none are set (a label with no training example counts
        as one, so its log-prior stays finite)."""
        if self.priors is None and counts:
            clamped = np.maximum(np.asarray(counts, dtype=np.float64), 1.0)
            self.priors = (clamped / clamped.sum()).tolist()

    @property
    def fits(self):
        return self.mode == "tune"

    def fit(self, probs, gold, labels, metric=None):
        if self.mode != "tune":
            return probs
        self._need_priors()
        metric = metric if metric in DECISION_METRICS else "macro_f1"
        raw = self.undo(probs)
        best = max(TAUS, key=lambda tau: (decision_score(gold, adjust(raw, self.priors, tau).argmax(axis=1),
                                                         len(labels), metric), -tau))
        self.tau, self.fitted = float(best), True
        return adjust(raw, self.priors, self.tau)

    def apply(self, probs, labels=None):
        if not self.tau:
            return probs
        self._need_priors()
        return adjust(probs, self.priors, self.tau)

    def undo(self, probs):
        """``probs`` without this adjustment."""
        return adjust(probs, self.priors, -self.tau) if self.tau else probs

    def said(self):
        return f"tau {self.tau:g}"

    def state(self):
        return {"logit_adjust": {"tau": self.tau, "priors": self.priors}}

    def load_state(self, state):
        saved = state.get("logit_adjust")
        if saved and saved.get("priors"):
            self.priors = [float(v) for v in saved["priors"]]
        if self.mode == "tune":
            self.tau = float(saved["tau"]) if saved else 0.0
        self.fitted = bool(saved)

    def _need_priors(self):
        if self.priors is None:
            raise ConfigError("dataset_reader.logit_adjust: needs the training label priors, which this model "
                              "was saved without (nor with its training label counts); train it with logit_adjust set")
