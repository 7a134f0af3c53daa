"""The table of sections (appzoo.params.sections) is what the param file, the plan and --describe go by:
a sixth section is one row and its dataclass, and then it is read, checked and described like the others."""
import dataclasses
import json
from typing import Annotated

import pytest

from appzoo.errors import ConfigError
from appzoo.params import sections
from appzoo.params.keys import Key
from appzoo.params.param_file import apply_overrides, load_param_file
from appzoo.run import describe
from appzoo.run.plan import validate

CLS = "examples/cls_ernie_fc_ch.json"


@dataclasses.dataclass
class CardConfig:
    """The keys of a made-up sixth section."""

    licence: Annotated[str, Key("the licence the card names", nonempty=True)] = "MIT"
    max_examples: Annotated[int, Key("examples shown on the card", ge=0, le=100)] = 5


@pytest.fixture
def sixth(monkeypatch):
    monkeypatch.setitem(sections.SECTIONS, "card", sections.Section(CardConfig, "a model card"))


def _config(tmp_path, card):
    config = load_param_file(CLS)
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**config, "card": card}))
    return str(path)


def test_a_sixth_section_is_read_checked_and_described(sixth, tmp_path):
    config = load_param_file(_config(tmp_path, {"licence": "Apache-2.0"}))  # accepted as a section
    validate(apply_overrides(config, ["card.max_examples=7"]))  # --set reaches it, and the plan checks it
    with pytest.raises(ConfigError, match=r"^card\.max_examples: must be in \[0, 100\], got 700"):
        validate(apply_overrides(config, ["card.max_examples=700"]))
    with pytest.raises(ConfigError, match=r"^card\.licens: unknown key.*did you mean 'licence'"):
        validate(load_param_file(_config(tmp_path, {"licens": "MIT"})))
    text = describe.describe("card")
    assert "licence: a string" in text and "examples shown on the card" in text
    assert "## card" in describe.markdown()


def test_without_the_row_the_section_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"card: unknown section \(accepted: dataset_reader, model, trainer, "
                                          r"serve, search, distill\)"):
        load_param_file(_config(tmp_path, {}))
