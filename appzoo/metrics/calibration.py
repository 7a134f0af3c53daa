"""Calibration: expected calibration error with its reliability bins, and temperature scaling.

ECE (Guo et al., "On Calibration of Modern Neural Networks", ICML 2017): the
predictions are put in ``bins`` equal-width bins of their confidence (the
probability of the predicted class); ECE is the mean over predictions of the
gap between a bin's accuracy and its mean confidence,
``sum_b n_b / N * |acc_b - conf_b|``. Temperature scaling divides the logits
by one scalar ``T`` fitted for the smallest negative log-likelihood on dev:
``T > 1`` softens an over-confident model, ``T < 1`` sharpens an
under-confident one, and the predicted class never changes.
"""
import numpy as np

#: The range a fitted temperature is searched in (log-uniform).
TEMPERATURE_RANGE = (0.05, 20.0)


def calibration(confidence, correct, bins=15):
    """``{"ece", "mean_confidence", "accuracy", "bins": [{"lower", "upper", "count",
    "confidence", "accuracy"}]}`` of predictions with probability ``confidence`` of
    their predicted class, and ``correct`` whether it was the gold one. Empty
    bins are left out of the list; no predictions give an ECE of 0."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    # a confidence of exactly 1.0 belongs to the last bin, 0.0 to the first
    which = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        inside = which == b
        count = int(inside.sum())
        if not count:
            continue
        conf, acc = float(confidence[inside].mean()), float(correct[inside].mean())
        ece += count / len(confidence) * abs(acc - conf)
        rows.append({"lower": float(edges[b]), "upper": float(edges[b + 1]), "count": count,
                     "confidence": conf, "accuracy": acc})
    return {"ece": float(ece), "mean_confidence": float(confidence.mean()) if len(confidence) else 0.0,
            "accuracy": float(correct.mean()) if len(correct) else 0.0, "bins": rows}


def scale(probs, temperature):
    """``softmax(log(probs) / temperature)`` row by row: the probabilities of logits
    divided by ``temperature`` (the softmax's own shift cancels)."""
    logits = np.log(np.clip(np.asarray(probs, dtype=np.float64), 1e-300, None))
    return softmax(logits / temperature)


def adjust(probs, priors, tau):
    """Post-hoc logit adjustment (Menon et al., "Long-tail learning via logit
    adjustment", ICLR 2021): ``softmax(log(probs) - tau * log(priors))`` row by
    row, so that the argmax is that of ``logits - tau * log(prior)``; ``tau`` 1
    targets the balanced error, 0 leaves the probabilities as they are. With a
    negative ``tau`` it undoes an adjustment by ``-tau``."""
    logits = np.log(np.clip(np.asarray(probs, dtype=np.float64), 1e-300, None))
    return softmax(logits - tau * np.log(np.asarray(priors, dtype=np.float64)))


def softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def fit_temperature(probs, gold):
    """The temperature with the smallest mean negative log-likelihood of the gold
    class indices ``gold`` under :func:`scale` of ``probs`` (bounded, log-uniform
    search over :data:`TEMPERATURE_RANGE`)."""
    from scipy.optimize import minimize_scalar

    logits = np.log(np.clip(np.asarray(probs, dtype=np.float64), 1e-300, None))
    gold = np.asarray(gold, dtype=int)

    def nll(log_t):
        z = logits / np.exp(log_t)
        z = z - z.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(z).sum(axis=1))
        return float(np.mean(log_norm - z[np.arange(len(gold)), gold]))

    low, high = np.log(TEMPERATURE_RANGE[0]), np.log(TEMPERATURE_RANGE[1])
    found = minimize_scalar(nll, bounds=(low, high), method="bounded", options={"xatol": 1e-4})
    return float(np.exp(found.x))
