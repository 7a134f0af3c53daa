"""A model folder is data, never code (issue 42, SEC1): a best/ holds its weights as safetensors, so no reload,
Predictor or run unpickles anything; a best/ saved before (a pickle) loads where the user runs it, with a note
on --resave, and the server refuses it unless told to trust it. A reload reads only under the folder named when
the server started, takes a JSON body, and on a server without keys comes from this machine only; a request
naming another host is refused (DNS rebinding)."""
import os
import pickle
import shutil

import pytest

import run_trainer
from appzoo import Predictor
from appzoo.errors import ConfigError
from appzoo.serve.failure import Failure
from appzoo.serve.repository import check_caller
from appzoo.store import bundle
from appzoo.store import bundle_files
from appzoo.store.bundle_files import MODEL_FILE, PICKLED_MODEL_FILE
from conftest import read_jsonl
from serving import assert_same_rows, live_server, raw_inputs, request

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("served")]


class _Hostile:
    """Unpickled, it runs a shell command that leaves ``marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _copy_best(run, name):
    """A copy of ``run``'s best/ (its real folder) as ``run/<name>/best``: under the run folder, which a reload
    of the model served from ``run/best`` may read."""
    target = os.path.join(run, name, "best")
    shutil.copytree(os.path.realpath(os.path.join(run, "best")), target)
    return target


def _plant(folder, marker):
    with open(os.path.join(folder, PICKLED_MODEL_FILE), "wb") as f:
        pickle.dump({"encoder.weight": _Hostile(marker)}, f)


def test_a_hostile_pickle_beside_the_safetensors_runs_nowhere(served_runs, tmp_path):
    run = served_runs["cls"]
    rows = read_jsonl(os.path.join(run, "predictions.jsonl"))[:3]
    folder, marker = _copy_best(run, "beside"), tmp_path / "ran"
    assert os.path.isfile(os.path.join(folder, MODEL_FILE))
    _plant(folder, marker)
    with live_server({"cls": os.path.join(run, "best")}) as (base, _):
        status, _, answer = request(base, "POST", "/v2/repository/models/cls/load", {"parameters": {"best": folder}})
        assert status == 200 and answer["loaded"] is True, answer
        status, _, answer = request(base, "POST", "/predict", {"inputs": raw_inputs(rows)})
        assert status == 200
        assert_same_rows(answer["predictions"], rows)
    assert_same_rows(Predictor(folder).predict(raw_inputs(rows)), rows)
    out = str(tmp_path / "eval")
    assert run_trainer.main(["--param_path", os.path.join(run, "config.json"), "--do", "eval", "--set",
                             f"trainer.init_from={folder}", "--set", f"trainer.output_dir={out}"]) == 0
    assert not marker.exists(), "the pickle ran"


def test_a_best_whose_weights_are_only_a_pickle_is_refused_by_the_server_and_runs_nothing(served_runs, tmp_path,
                                                                                           capsys):
    run = served_runs["cls"]
    folder, marker = _copy_best(run, "pickled"), tmp_path / "ran"
    os.remove(os.path.join(folder, MODEL_FILE))
    _plant(folder, marker)
    with live_server({"cls": os.path.join(run, "best")}) as (base, _):
        status, _, answer = request(base, "POST", "/v2/repository/models/cls/load", {"parameters": {"best": folder}})
    assert status == 422, answer
    assert answer["error"] == (
        "model 'cls' was not reloaded: parameters.best: cls/pickled/best/model_state.pdparams: the weights are a "
        "pickle (a best/ saved before appzoo wrote safetensors) and unpickling runs whatever code the file holds, so "
        "the server does not load it: re-save it as safetensors where you trust it (python run_trainer.py --resave "
        "cls/pickled/best), or start the server with --trust-pickled-weights; the old model serves on")
    with pytest.raises(ConfigError, match=r"^Predictor: .*model_state\.pdparams: the weights are a pickle"):
        Predictor(folder, allow_pickle=False)
    assert not marker.exists(), "the pickle ran"


def test_a_best_from_before_safetensors_loads_with_a_note_and_is_resaved(served_runs, capsys):
    """A best/ of an older appzoo (weights as Paddle's pickle): the Predictor loads it and says once how to
    re-save it; --resave writes its safetensors and removes the pickle; it then loads without a note, the same."""
    import paddle

    run = served_runs["cls"]
    rows = read_jsonl(os.path.join(run, "predictions.jsonl"))[:3]
    folder = _copy_best(run, "older")
    weights = bundle.weights(folder)
    paddle.save({k: paddle.to_tensor(v) for k, v in weights.items()}, os.path.join(folder, PICKLED_MODEL_FILE))
    os.remove(os.path.join(folder, MODEL_FILE))
    digest = bundle_files.digest(folder)
    capsys.readouterr()
    assert_same_rows(Predictor(folder).predict(raw_inputs(rows)), rows)
    err = capsys.readouterr().out + capsys.readouterr().err
    assert err.count("note: ") == 1 and f"python run_trainer.py --resave {folder}" in err, err

    assert run_trainer.main(["--resave", folder]) == 0
    assert [n for n in os.listdir(folder) if n in (MODEL_FILE, PICKLED_MODEL_FILE)] == [MODEL_FILE]
    assert bundle_files.digest(folder) != digest  # another weights file: an export of it is made again
    capsys.readouterr()
    assert_same_rows(Predictor(folder).predict(raw_inputs(rows)), rows)
    assert "--resave" not in capsys.readouterr().out
    assert run_trainer.main(["--resave", folder]) == 2
    assert capsys.readouterr().err.strip() == (f"error: --resave: {folder} holds its weights as safetensors already "
                                              f"({MODEL_FILE})")


def test_a_request_naming_another_host_is_421_in_one_line(served_runs):
    with live_server({"cls": os.path.join(served_runs["cls"], "best")}) as (base, _):
        port = base.rsplit(":", 1)[1]
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            assert request(base, "GET", "/v2/health/live", headers={"Host": host})[0] == 200, host
        status, _, answer = request(base, "GET", "/v2/health/live", headers={"Host": f"evil.example:{port}"})
        assert (status, answer) == (421, {"error": f"Host 'evil.example:{port}' is not a name this server answers "
                                                   f"to (serve.allowed_hosts: 127.0.0.1, ::1, localhost)"})
    with live_server({"cls": os.path.join(served_runs["cls"], "best")}, allowed_hosts=["*"]) as (base, _):
        assert request(base, "GET", "/v2/health/live", headers={"Host": "evil.example"})[0] == 200


def test_a_reload_takes_json_and_without_keys_comes_from_this_machine_only():
    check_caller("application/json; charset=utf-8", "127.0.0.1", keys=False)
    check_caller("application/json", "10.1.2.3", keys=True)  # a key holder, from anywhere
    with pytest.raises(Failure) as refused:
        check_caller("application/json", "10.1.2.3", keys=False)
    assert refused.value.status == 403 and "from this machine only" in refused.value.message
    for kind in ("", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        with pytest.raises(Failure) as refused:
            check_caller(kind, "127.0.0.1", keys=False)
        assert refused.value.status == 415
