"""appzoo/store/run_result.py: metrics.json as one RunResult, read and written back without changing a byte."""
import json

from appzoo.store.run_result import RunResult

TRAINED = {"best": {"step": 4, "metric": "accuracy", "value": 0.5}, "train": {"steps": 4, "epochs_completed": 1,
           "parameter_groups": []}, "dev": {"accuracy": 0.5}, "test": {"accuracy": 0.25}, "wall_time_s": 3.0,
           "evaluated_with": {"engine": "dygraph", "precision": "fp32"}}


def test_a_file_reads_and_writes_back_byte_for_byte_keeping_unknown_keys_and_their_order():
    data = {"test": {"accuracy": 0.25}, "from_a_newer_version": [1], **TRAINED}
    assert json.dumps(RunResult.from_json(data).to_json()) == json.dumps(data)


def test_a_new_result_writes_its_keys_in_the_order_runs_always_wrote_them():
    result = RunResult(wall_time_s=3.0, evaluated_with=TRAINED["evaluated_with"], test={"accuracy": 0.25},
                       dev={"accuracy": 0.5}, train=TRAINED["train"], best=TRAINED["best"])
    assert list(result.to_json()) == list(TRAINED) and result.to_json() == TRAINED
    assert result.steps == 4 and result.parameter_groups == [] and result.complete(["train", "eval"])
    assert not RunResult(best=TRAINED["best"]).complete(["train"]), "no wall time: the run did not finish"


def test_an_eval_beside_the_runs_own_moves_under_eval_and_leaves_the_saved_numbers_in_place():
    """What a later int8 eval of a trained run writes: the saved dict with the new eval appended, as
    ``{**saved, **new}`` always gave it."""
    saved = RunResult.from_json(TRAINED)
    new = RunResult(dev={"accuracy": 0.4}, wall_time_s=1.0)
    engine = {"engine": "onnxruntime", "precision": "int8", "quantization": "dynamic"}
    new.aside("onnxruntime/int8", engine)
    merged = new.merged_into(saved).to_json()
    assert merged == {**TRAINED, "eval": {"onnxruntime/int8": {**engine, "dev": {"accuracy": 0.4},
                                                                "wall_time_s": 1.0}}}
    assert list(merged) == [*TRAINED, "eval"]
