"""The ``search`` section of a param file (``--search``, ``--trials`` and ``--timeout`` override it)."""
import dataclasses
from typing import Annotated, Dict, List, Literal, Optional

from appzoo.params.keys import Key, build_section, check_fields

SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "successive_halving", "none")


@dataclasses.dataclass
class SearchConfig:
    """Every key of the ``search`` section: its type, limits, default and help."""

    space: Annotated[Dict[str, str], Key(
        "the searched keys: {key path: range}, each range log_uniform(LOW, HIGH), uniform(LOW, HIGH), "
        "int(LOW, HIGH) or choice(V1, V2, ...); --search KEY=RANGE adds or replaces one")] = \
        dataclasses.field(default_factory=dict)
    trials: Annotated[int, Key("trials of the whole study, over every worker (finished, pruned and diverged "
                               "ones count); --trials overrides it", ge=1)] = 20
    timeout_s: Annotated[Optional[float], Key(
        "this worker starts no new trial after this many seconds (the trial running then finishes); "
        "null: no limit; --timeout overrides it", gt=0)] = None
    sampler: Annotated[Literal[SAMPLERS], Key(
        "how the next trial's settings are chosen: tpe (Optuna's Tree-structured Parzen Estimator, random "
        "for the first startup_trials) or random")] = "tpe"
    pruner: Annotated[Literal[PRUNERS], Key(
        "stopping a trial early from its dev evaluations: median (below the median of the earlier trials at "
        "the same step), successive_halving (Optuna's asynchronous successive halving with its defaults: its "
        "first rungs fall on the first dev evaluation, which pruned 33 of 36 TNEWS trials before they had "
        "learned; benchmarks/RESULTS.md) or none")] = "median"
    startup_trials: Annotated[int, Key(
        "trials that finish before TPE models the results and before median pruning starts", ge=0)] = 5
    seed: Annotated[Optional[int], Key("seed of the sampler (null: trainer.seed); a second worker of the "
                                       "same study draws with the next seed", ge=0)] = None
    start_with: Annotated[List[Dict], Key(
        "settings to try first, before the sampler's own, each {key path: value} of some searched keys "
        "(Optuna's enqueue_trial): a known good setting to beat, say")] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        check_fields(self, "search")

    @classmethod
    def from_section(cls, section):
        """The ``search`` section checked: unknown keys, types and ranges, each a ConfigError naming
        ``search.KEY`` (the space's ranges are read by :func:`appzoo.search.space.parse_specs`)."""
        return build_section(cls, section, "search")
