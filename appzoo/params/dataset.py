"""The keys of the ``dataset_reader`` section that every task shares (the rest go to the reader)."""
import dataclasses
from typing import Annotated, Optional

from appzoo.params.keys import Key, check_fields

SPLITS = ("train", "dev", "test", "predict")


@dataclasses.dataclass
class DatasetConfig:
    """The keys of ``dataset_reader`` that every task shares; the rest go to the reader."""

    type: Annotated[Optional[str], Key("the task's reader (null: the model's first reader)")] = None
    train: Annotated[Optional[str], Key("training data file")] = None
    dev: Annotated[Optional[str], Key("dev data file: evaluated during training; chooses best/")] = None
    test: Annotated[Optional[str], Key("test data file: evaluated after training")] = None
    predict: Annotated[Optional[str], Key("file to predict (labels optional): predictions.jsonl")] = None
    max_seq_len: Annotated[int, Key("tokens per encoded sequence, [CLS] and [SEP] included", ge=8)] = 128

    def __post_init__(self):
        check_fields(self, "dataset_reader")

    @classmethod
    def split_section(cls, section):
        """``(shared keys, reader keys)`` of a ``dataset_reader`` section."""
        shared = {k: v for k, v in section.items() if k in cls.__dataclass_fields__}
        return shared, {k: v for k, v in section.items() if k not in cls.__dataclass_fields__}
