"""What a run's modes share (:class:`RunContext`): the plan, the prepared data and model, the run folder, the
trainer, the metrics so far, and the model eval and predict run on."""
import dataclasses

from appzoo.params.inference import CAPABILITIES, DYGRAPH, InferenceSpec
from appzoo.store import run_result
from appzoo.store.run_result import RunResult
from appzoo.utils.progress import note

#: What the metrics of a metrics.json that does not say (one written before they were labelled) came from.
OWN_ENGINE = InferenceSpec(DYGRAPH).evaluated_with()


@dataclasses.dataclass
class RunContext:
    """One run's state as its modes (:data:`appzoo.run.modes.MODES`) pass it on, in the order they run."""

    plan: object  # the validated plan (appzoo.run.plan)
    prepared: object  # the data and model read before the first write (appzoo.run.prepare.Prepared)
    folder: object  # the run folder (appzoo.store.archive.RunFolder)
    trainer: object  # appzoo.run.trainer.Trainer: trains, and evaluates the dygraph model
    resume_from: object = None  # the checkpoint a resumed run continues from
    started: float = 0.0  # time.time() when the run began
    result: RunResult = dataclasses.field(default_factory=RunResult)  # what metrics.json gets, mode by mode
    described: dict = dataclasses.field(default_factory=dict)  # the mistakes of each evaluated split (report.html)
    _inference: tuple = None
    _aside: bool = None
    _post_hoc: list = None

    @property
    def is_main(self):
        return self.trainer.is_main

    @property
    def trained(self):
        """The model, its reader, tokenizer and labels (appzoo.store.bundle.Bundle)."""
        return self.prepared.bundle

    def inference(self):
        """``(predictor, engine)``: the :class:`~appzoo.inference.predictor.Predictor` eval and predict run on
        under ``trainer.inference_engine`` (None: the dygraph model, through the trainer), built once, when a
        mode first asks (after training), and what it is (:meth:`InferenceSpec.evaluated_with`)."""
        if self._inference is None:
            predictor = _predictor_for(self)
            engine = dict(OWN_ENGINE) if predictor is None else predictor.spec.evaluated_with()
            self._inference = predictor, engine
        return self._inference

    def post_hoc(self):
        """The decision rules (:mod:`appzoo.task.decisions`) a model loaded to be evaluated or to predict was
        saved without, which this run's reader settings ask for: an eval fits them on dev first. None fitted
        when the run trains (each dev evaluation fits them)."""
        if self._post_hoc is None:
            self._post_hoc = [] if self.plan.do.trains else self.trained.reader.decisions.unfitted()
        return self._post_hoc

    def evaluated_with(self):
        """What this run's eval measures: the engine (:meth:`inference`) and the rules it fitted on dev now
        (``fitted_on_dev``: their keys)."""
        engine = self.inference()[1]
        rules = [rule.key for rule in self.post_hoc()] if self.plan.do.evaluates else []
        return {**engine, "fitted_on_dev": rules} if rules else engine

    def aside(self):
        """Whether this run's eval goes beside the run's own metrics rather than in their place: an eval that
        does not train, of another engine or precision than the one they came from (:func:`is_the_runs_own`),
        or with decision rules the model was saved without (:meth:`post_hoc`). Decided once, from metrics.json
        as the run found it."""
        if self._aside is None:
            plan = self.plan
            self._aside = (plan.do.evaluates_a_trained_run
                           and not is_the_runs_own(self.folder, self.evaluated_with()))
        return self._aside

    def source(self):
        """The best/ folder the run's model is (this run's, once trained; else the one it was loaded from)."""
        return self.folder.best if self.plan.do.trains else self.plan.init_from


def _predictor_for(ctx):
    """Its graph is ``<output_dir>/inference/``, exported first unless it is of this very model
    (:func:`appzoo.inference.export.current`: best/'s contents, not its timestamps)."""
    plan = ctx.plan
    cfg = plan.trainer
    if not CAPABILITIES[cfg.inference.engine].graph or not plan.do.reads_a_model:
        return None
    if ctx.trainer.world_size > 1:
        note(f"note: trainer.inference_engine: {cfg.inference_engine!r} is single-process; this data-parallel "
             f"run evaluates and predicts on the dygraph model")
        return None
    from appzoo.inference.predictor import Predictor  # paddle inference and onnxruntime: only for a graph engine

    return Predictor(ctx.source(), trained=ctx.trained, spec=cfg.inference, inference_dir=ctx.folder.inference,
                     batch_size=cfg.eval_batch_size, progress_bar=True)  # bars as trainer.progress_bar says


def engine_label(engine):
    """The key of an eval in metrics.json's ``eval``: ``onnxruntime/int8``, ``onnxruntime/int8-static``,
    ``dygraph/fp32+logit_adjust`` (a rule fitted on dev by this eval), ..."""
    label = f"{engine['engine']}/{engine['precision']}"
    label = f"{label}-static" if engine.get("quantization") == "static" else label
    return "+".join([label, *(key.rsplit(".", 1)[-1] for key in engine.get("fitted_on_dev", ()))])


def is_the_runs_own(folder, engine):
    """Whether an eval that does not train gives the run's own metrics (metrics.json's ``dev`` and
    ``test``): when it has none yet, or they came from the same engine and precision. Another eval (int8
    after fp32, say) goes beside them, under ``eval``."""
    saved = run_result.read(folder.metrics)
    if not saved.splits():
        return True
    return engine_label(saved.evaluated_with or OWN_ENGINE) == engine_label(engine)
