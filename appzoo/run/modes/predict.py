"""``--do predict``: predictions.jsonl, one row per example of ``dataset_reader.predict``."""
from appzoo.task import decisions
from appzoo.utils import files
from appzoo.utils.progress import note


class Predict:
    name = "predict"
    reads = ("predict",)
    writes = ("predictions",)
    main_only = False  # every rank predicts its share; the main process writes

    def run(self, ctx):
        plan, p, trained = ctx.plan, ctx.prepared, ctx.trained
        if not p.splits["predict"] and ctx.is_main:
            note(f"note: {plan.data.predict} has no rows to predict; predictions.jsonl is empty")
        unfitted = [] if plan.do.evaluates else ctx.post_hoc()  # an eval before fitted them, or said why not
        if unfitted and ctx.is_main:
            note(decisions.unfitted_note(unfitted, fitted_on_dev=False))
        predictor, _ = ctx.inference()
        predict = predictor.predict_features if predictor else ctx.trainer.predict
        predictions, _ = predict(p.splits["predict"], p.features["predict"])
        if ctx.is_main:
            files.write_jsonl(ctx.folder.predictions,
                              trained.reader.prediction_rows(p.splits["predict"], predictions, trained.labels))
