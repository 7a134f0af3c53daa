"""``--do eval``: the metrics of dev and test on the engine the run evaluates with, each split's predictions
and mistakes, and a lower precision's loss against fp32."""
from appzoo.reports import fidelity, mistakes
from appzoo.store.run_result import SPLITS, set_against_fp32
from appzoo.task import decisions
from appzoo.utils.progress import note


class Eval:
    name = "eval"
    reads = ("dev", "test")
    writes = ("split_predictions", "errors")
    main_only = False  # every rank evaluates its share; the main process writes

    def run(self, ctx):
        plan, p, trainer = ctx.plan, ctx.prepared, ctx.trainer
        predictor, _ = ctx.inference()
        unfitted = ctx.post_hoc()  # rules the loaded model was saved without: fitted on dev now
        evaluated = {}
        for split in SPLITS:
            if split in p.splits:
                metrics, predictions = (predictor or trainer).evaluate(
                    p.splits[split], p.features[split], split=split, with_predictions=True,
                    fit=split == "dev" and bool(unfitted))
                ctx.result.set_split(split, metrics)
                evaluated[split] = (p.splits[split], predictions)
                if predictor is not None and predictor.spec.precision != "fp32":
                    _against_fp32(plan, trainer, predictor.spec, p, split, metrics)
        if unfitted and trainer.is_main:
            note(decisions.unfitted_note(unfitted, fitted_on_dev="dev" in p.splits, test="test" in p.splits))
        if trainer.is_main and not ctx.aside():  # predictions/<split>.jsonl, errors.md, the class warnings
            warnings, ctx.described = mistakes.write(ctx.folder.root, ctx.trained.reader, ctx.trained.labels,
                                                     evaluated, ctx.result.splits())
            for warning in warnings:
                note(warning)


def _against_fp32(plan, trainer, spec, p, split, metrics):
    """Compare an eval in ``spec``'s lower precision with fp32 (the dygraph model) on the same split
    (:func:`appzoo.reports.fidelity.compare`): into the split's ``metrics`` (:func:`set_against_fp32`), and a
    warning line for each class that loses more than :data:`~appzoo.reports.fidelity.DROP_POINTS` F1 points."""
    reference = trainer.evaluate(p.splits[split], p.features[split], split=f"{split} in fp32")
    comparison = fidelity.compare(reference, metrics, plan.metric)
    set_against_fp32(metrics, comparison)
    for line in fidelity.warnings(comparison, split, f"{spec.engine} {spec.precision}") if trainer.is_main else ():
        note(f"warning: {line}")
