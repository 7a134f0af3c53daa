"""Hyperparameter search: Optuna's TPE and pruning over ranges of param-file keys, one trial per run.

    python run_trainer.py --param_path X --search 'trainer.learning_rate=log_uniform(1e-5,1e-3)' \\
        --search 'model.loss.name=choice(ce,focal,logit_adjusted_ce)' --trials 30

The ranges come from ``--search KEY=RANGE`` and the param file's ``search.space``
(:mod:`~appzoo.search.space`); the other keys of the ``search`` section (trials, time budget, sampler,
pruner: :mod:`~appzoo.params.search`) are overridden by ``--trials`` and ``--timeout``. Every range's
ends and every choice are planned (:func:`appzoo.run.plan.validate`) before the first trial, so a bad key or
value stops the search with one line and nothing written.

Trial ``N`` trains in ``<output_dir>/search/trial-000N/`` on the param file with the trial's settings,
is judged on dev (``trainer.metric_for_best``) and reports each dev evaluation to the pruner, which may
stop it early. A trial whose loss diverges is recorded, not fatal (a study whose every trial
diverged exits 3, as a diverged run does). The study is SQLite in
``<output_dir>/search/study.db``: the same command started again continues it (a trial cut short by a
kill continues from its last checkpoint), and the same command started in a second terminal, or on a
second machine sharing the folder, works on the same study (:mod:`~appzoo.search.study`). When the study
has all its trials, the best one is evaluated on dev and test; ``search.md``, ``search.json``,
``search.png`` and ``best-params.json`` (:mod:`~appzoo.search.results`) are rewritten after every trial.
``--backend ray`` runs the trials as Ray tasks (:mod:`appzoo.experiments.ray`).
"""
from appzoo.params.search import PRUNERS, SAMPLERS, SearchConfig
from appzoo.search.space import KINDS, Dimension, parse_dimension, parse_specs
from appzoo.search.study import Search, plan_search, run_search

__all__ = ["PRUNERS", "SAMPLERS", "SearchConfig", "KINDS", "Dimension", "parse_dimension", "parse_specs",
           "Search", "plan_search", "run_search"]
