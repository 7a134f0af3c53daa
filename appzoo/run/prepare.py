"""Everything a run reads and builds before its first write (:func:`prepare`): the splits its modes read,
the labels, the encoder and the model, a distilled run's teacher, and the frozen prefix's cache filled; it
raises everything the data can get wrong, still without writing anything."""
import dataclasses
import tempfile

from appzoo.encoders import frozen_prefix
from appzoo.inference import prediction
from appzoo.params.dataset import SPLITS
from appzoo.run import label_folds, param_groups
from appzoo.run.teacher import Teacher
from appzoo.store import bundle as bundles
from appzoo.store.archive import RunFolder
from appzoo.task.inputs import forward_inputs
from appzoo.utils.progress import note


@dataclasses.dataclass
class Prepared:
    """Everything read and built before the first write."""

    bundle: object  # the model, its reader, tokenizer, labels and model arguments (appzoo.store.bundle.Bundle)
    splits: dict  # split -> examples
    features: dict  # split -> features
    work_dir: object  # a TemporaryDirectory holding a from-scratch vocabulary until the run ends
    teacher: object = None  # a distilled run's appzoo.run.teacher.Teacher (None: no teacher, or alpha 0)

    def cleanup(self):
        """Save the frozen prefix's last cache entries (and say what it read and computed); remove the
        from-scratch vocabulary's temporary folder (the saved run has its own copy)."""
        frozen = frozen_prefix.attached(self.bundle.model.encoder) if self.bundle is not None else None
        if frozen is not None:
            frozen.close()
            note(f"note: {frozen.summary()}")
            frozen_prefix.detach(self.bundle.model.encoder)
        if self.work_dir is not None:
            self.work_dir.cleanup()
            self.work_dir = None


def prepare(plan, needed):
    """Read the splits ``needed`` (those the plan's modes read: :func:`appzoo.run.modes.needed_splits`) and build
    the model (:func:`appzoo.store.bundle.build`); the caller removes the temporary folder with
    :meth:`Prepared.cleanup`."""
    data = plan.data
    reader = plan.reader_class(**plan.reader_kwargs)
    reader.tune_metric = plan.trainer.dev_metric(reader)[0]
    splits = {}
    for split in SPLITS:
        path = getattr(data, split)
        if path and split in needed:
            splits[split] = reader.read(path, split)
            reader.check_split(splits[split], split, path, plan.metric)

    work_dir = None if plan.init_from else tempfile.TemporaryDirectory(prefix="appzoo-vocab-")
    try:
        trained = bundles.build(plan, reader, splits, work_dir and work_dir.name)
        if plan.do.trains:  # a learning-rate key that names no parameter of the model: refused before any write
            param_groups.groups(trained.model, plan.trainer)
        if plan.do.audits and plan.trainer.audit_labels:  # the folds, refused before the run takes its folder
            label_folds.check_folds(trained, splits["train"], plan.trainer.audit_folds)
        features = {s: reader.encode(ex, trained.tokenizer, trained.labels, data.max_seq_len, s)
                    for s, ex in splits.items()}
        teacher = _teacher(plan, trained, splits)
        _fill_prefix_cache(plan, trained, features)
    except BaseException:
        if work_dir is not None:
            work_dir.cleanup()
        raise
    return Prepared(trained, splits, features, work_dir, teacher)


def _fill_prefix_cache(plan, trained, features):
    """``model.encoder.freeze_layers`` with a cache: the frozen layers' output for every text of every split,
    computed for those the cache lacks (the layers above are not run), so no training step computes it."""
    frozen = frozen_prefix.attached(trained.model.encoder)
    if frozen is None or frozen.cache is None:
        return
    inputs = forward_inputs(trained.model, labels=False)
    trained.model.eval()
    frozen.skip_top = True
    try:
        for split, split_features in features.items():
            prediction.run_only(lambda batch, tensors: trained.model(**inputs(tensors)), trained, split_features,
                                batch_size=plan.trainer.eval_batch_size, bar=plan.trainer.progress_bar,
                                desc=f"frozen layers, {split}")
    finally:
        frozen.skip_top = False
    frozen.close()


def _teacher(plan, trained, splits):
    """A distilled run's teacher, loaded and checked against the student's labels (nothing run yet)."""
    if plan.distill is None:
        return None
    if plan.distill.alpha == 0 and not plan.distill.transfer:
        note("note: distill.alpha is 0: the student learns from the labels alone, and the teacher is not run")
        return None
    cfg = plan.trainer
    return Teacher(plan.distill, trained, RunFolder(cfg.output_dir), splits["train"],
                   num_threads=cfg.num_threads or None, bar=cfg.progress_bar)
