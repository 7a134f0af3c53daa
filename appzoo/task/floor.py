"""A run's floor: what its encoder scores on a split before any training, which a trained model should beat.

A task declares how its floor is computed (:meth:`appzoo.task.reader.DatasetReader.floor`: a matcher's
zero-shot cosine AUC, a classifier's frozen-encoder probe); the runner asks for it before training a pretrained encoder, writes it into
metrics.json's ``floor`` and compares the run's result with it afterwards (:meth:`Floor.verdict`).
"""
import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Floor:
    """One floor: ``value`` of the dev ``metric`` (a scalar the reader's ``evaluate`` gives too) on ``split``."""

    name: str  # what it is, in a few words: "zero-shot cosine"
    metric: str  # the metric it is measured in, as the reader's evaluate names it ("auc")
    split: str  # the split it is measured on ("dev")
    value: float
    how: str  # how it was computed, in one sentence
    details: dict = dataclasses.field(default_factory=dict)  # more measurements behind ``value``, for metrics.json
    greater: bool = True  # whether a larger ``metric`` is better
    #: the floor as a sentence names it, where "the untrained encoder's <name>" would not read right
    #: ("a logistic regression on the untrained encoder's frozen vectors"); "": that default
    phrase: str = ""

    @property
    def said(self):
        """The floor as the warning and the log name it: :attr:`phrase`, else "the untrained encoder's <name>"."""
        return self.phrase or f"the untrained encoder's {self.name}"

    def to_json(self, final=None):
        """metrics.json's ``floor``: the fields, and with the run's ``final`` value of the metric (None: the
        run has none) that value and whether it is ``below`` the floor."""
        entry = {"name": self.name, "metric": self.metric, "split": self.split, "value": self.value,
                 **self.details, "how": self.how}
        if self.phrase:
            entry["phrase"] = self.phrase
        if final is not None:
            entry.update(final=final, below=self.below(final))
        return entry

    def below(self, final):
        """Whether the run's ``final`` value of the metric is worse than the floor."""
        return final < self.value if self.greater else final > self.value

    def verdict(self, final) -> Optional[str]:
        """One warning line when ``final`` is below the floor, else None."""
        if final is None or not self.below(final):
            return None
        return (f"the run's {self.split} {self.metric} {final:.4f} is below its floor of {self.value:.4f} "
                f"({self.said}): the trained model does worse at this task than its encoder did before training "
                f"(too few steps, too high a trainer.learning_rate, or a loss that does not fit?)")


def from_json(entry):
    """The :class:`Floor` of a metrics.json ``floor`` entry (the run's ``final``, ``below`` and the runner's
    ``seconds`` left out)."""
    fields = {"name", "metric", "split", "value", "how"}
    details = {k: v for k, v in entry.items() if k not in fields | {"final", "below", "seconds", "phrase"}}
    return Floor(**{k: entry[k] for k in fields}, details=details, phrase=entry.get("phrase", ""))
