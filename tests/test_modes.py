"""appzoo/run/modes/: each --do mode is one object of MODES, which declares the splits it reads and the run
files it writes; what a run reads and the owner column of docs/reliability.md are those declarations."""
import itertools

import pytest

from appzoo.run.modes import BY_NAME, MODES, WRITES_AFTER, needed_splits
from appzoo.store.run_files import BY_KEY, RUN_FILES

#: written by commands other than a run's modes (--do reproduce; a sweep's or search's job)
ELSEWHERE = {"reproductions", "reproduction", "diverged", "run_marker"}  # the mark: when a run takes the folder


def test_the_modes_run_in_the_documented_order_and_each_is_named_once():
    assert [m.name for m in MODES] == ["audit", "train", "eval", "predict", "export"]
    assert len(BY_NAME) == len(MODES)


@pytest.mark.parametrize("do", [list(c) for n in range(1, 4) for c in itertools.combinations(BY_NAME, n)])
def test_a_run_reads_the_splits_its_modes_read(do):
    """The rule the runner had spelled by hand: the audit reads every split; train reads train and dev; eval dev
    and test; predict the predict file; export none."""
    audit = "audit" in do
    expected = {split for split, needed in (
        ("train", "train" in do or audit), ("dev", bool({"train", "eval"} & set(do)) or audit),
        ("test", "eval" in do or audit), ("predict", "predict" in do or audit)) if needed}
    assert needed_splits(do) == expected


def test_every_run_file_is_written_by_a_mode_that_declares_it():
    declared = [key for mode in MODES for key in mode.writes] + list(WRITES_AFTER)
    assert set(declared) <= set(BY_KEY), "a mode declares a file the run folder table does not name"
    written_by_runs = {f.key for f in RUN_FILES if f.owner is not None} - ELSEWHERE
    assert written_by_runs <= set(declared), sorted(written_by_runs - set(declared))
    assert BY_KEY["predictions"].owner == "run/modes/predict.py" and "predictions" in BY_NAME["predict"].writes
    assert BY_KEY["metrics"].owner == "run/modes/__init__.py" and "metrics" in WRITES_AFTER
