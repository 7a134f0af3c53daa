"""The training objective: the one slot of the trainer's step that says what is back-propagated (PaddleNLP's
``Trainer(criterion=...)``, HF's ``Trainer.compute_loss``).

An objective is called with the model's outputs and the batch (its tensors) and returns ``(loss, parts)``: the
loss of the batch, which is logged, and the tensors to back-propagate one after the other, whose gradients add
up to the loss's. ``prepare(features, planned)`` runs once before the first step of a run (and of a resume);
``planned()`` gives the indices of the training features the steps ahead take
(:meth:`appzoo.data.sampler.Sampler.planned_indices`), computed only if asked for.

The objectives: :class:`ModelLoss` (a model's own loss: every plain run), :class:`GradCacheLoss` (a model that
trains by GradCache, :mod:`appzoo.losses.grad_cache`) and :class:`appzoo.run.teacher.Distillation` (the loss
mixed with the soft loss to a teacher's logits). A model names its own with ``TaskModel.objective()``; a
distilled run replaces it. Whether the encoder's lower layers were read from a cache
(:mod:`appzoo.encoders.frozen_prefix`) is the model's business: the outputs are the same.
"""


class ModelLoss:
    """The model's own loss, ``outputs["loss"]``."""

    def prepare(self, features, planned):
        """Nothing to get ready: the loss is in the outputs."""

    def __call__(self, outputs, batch):
        return outputs["loss"], [outputs["loss"]]


class GradCacheLoss(ModelLoss):
    """A GradCache model's loss: ``outputs["loss"]`` is detached and ``outputs["loss_parts"]`` are the parts
    to back-propagate, each built when it is (see :func:`appzoo.losses.grad_cache.grad_cache`)."""

    def __call__(self, outputs, batch):
        return outputs["loss"], outputs["loss_parts"]
