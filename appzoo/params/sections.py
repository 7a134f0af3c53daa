"""The table of a param file's sections: each one's keys (a dataclass) and whether a ``type`` picks them.

``param_file`` (which sections a file may have), ``plan`` (each section checked before anything runs) and
``describe`` (``--describe`` and docs/params.md) iterate :data:`SECTIONS`; a seventh section is one row here
and its dataclass.
"""
import dataclasses
from typing import Optional

from appzoo.params.dataset import DatasetConfig
from appzoo.params.distill import DistillConfig
from appzoo.params.keys import build_section
from appzoo.params.search import SearchConfig
from appzoo.params.serve import ServeConfig
from appzoo.params.trainer import TrainerConfig


@dataclasses.dataclass(frozen=True)
class Section:
    schema: Optional[type]  # the dataclass of its keys; for a typed section, the keys every type shares
    about: str
    typed: Optional[str] = None  # "reader" / "model": the section's ``type`` picks a registered class


SECTIONS = {
    "dataset_reader": Section(DatasetConfig, "the data files and the reader that reads them", typed="reader"),
    "model": Section(None, "the encoder, the task model and its loss", typed="model"),
    "trainer": Section(TrainerConfig, "the run: modes, optimisation, evaluation, saving, the engine"),
    "serve": Section(ServeConfig, "--do serve and python -m appzoo.serve"),
    "search": Section(SearchConfig, "--search: the Optuna study"),
    "distill": Section(DistillConfig, "knowledge distillation: a teacher's best/, its temperature and weight"),
}


def plain_sections():
    """The sections whose keys are their dataclass's alone (no ``type``), in the table's order."""
    return [name for name, section in SECTIONS.items() if section.typed is None]


def build(name, values):
    """Section ``name`` (a plain one) from the param file's ``values``: unknown keys, types and ranges each a
    ConfigError naming ``name.KEY``."""
    return build_section(SECTIONS[name].schema, values, name)
