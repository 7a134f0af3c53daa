"""The ``distill`` section: a trained teacher whose softened outputs a run's model learns from as well as
from the labels (knowledge distillation; Hinton et al. 2015). The teacher's work and its cache:
:mod:`appzoo.run.teacher`; the soft loss: :func:`appzoo.losses.kl.distillation_loss`."""
import dataclasses
from typing import Annotated, Literal, Optional

from appzoo.params.inference import ENGINES
from appzoo.params.keys import Key

TEACHER_ENGINES = ("auto", *ENGINES)


@dataclasses.dataclass
class DistillConfig:
    """Every key of the ``distill`` section: its type, limits, default and help."""

    teacher: Annotated[Optional[str], Key(
        "the teacher: the best/ folder of a trained run of the same task and labels (its encoder, vocabulary and "
        "max_seq_len may differ: sequence labeling is aligned by words); required", nonempty=True)] = None
    temperature: Annotated[float, Key(
        "T: both models' logits are divided by it before the softmax, and the soft loss is multiplied by T^2 "
        "(Hinton et al. 2015); a higher T shows more of the teacher's view of the wrong classes", gt=0)] = 2.0
    alpha: Annotated[float, Key(
        "weight of the soft loss (KL divergence to the teacher's softened outputs); the hard-label loss gets "
        "1 - alpha (1: learn from the teacher alone)", ge=0, le=1)] = 0.5
    transfer: Annotated[Optional[str], Key(
        "a file of unlabelled inputs in the training file's format (read as a predict file: a label there is not "
        "used), which the student learns on as well, each labelled by the teacher: its prediction is the hard "
        "label (per word for a tagger), its logits the soft targets (Hinton et al.'s transfer set)",
        nonempty=True)] = None
    teacher_engine: Annotated[Literal[TEACHER_ENGINES], Key(
        "what the teacher runs on, once per training example, its logits cached in the run's teacher/ folder: "
        "auto (ONNX Runtime, checked against the Paddle model on the first examples, else the Paddle model; the "
        "Paddle model for fewer than 1,024 examples, where the export costs more than it saves), or an engine")] = "auto"
