"""The server answers what ``--do predict`` writes, on every task and engine; its routes,
readiness and metrics; its start-up errors; and a SIGTERM under load.

One tiny run per task (shared by the serving tests, conftest ``served_runs``);
one live server per engine holds all of them.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import read_jsonl
from serving import TASKS, assert_same_rows, live_server, raw_inputs, request, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("served")]


@pytest.fixture(scope="module", params=["dygraph", "onnxruntime"])
def server(request, served_runs):
    specs = {task: os.path.join(run, "best") for task, run in served_runs.items()}
    with live_server(specs, engine=request.param, max_wait_ms=2) as (base, app):
        yield base, app, request.param


@pytest.mark.parametrize("task", list(TASKS))
def test_predict_answers_equal_predictions_jsonl(server, served_runs, task):
    base, _, engine = server
    expected = read_jsonl(os.path.join(served_runs[task], "predictions.jsonl"))
    status, _, answer = request(base, "POST", f"/models/{task}/predict", {"inputs": raw_inputs(expected)})
    assert status == 200, answer
    assert answer["model"] == task
    assert_same_rows(answer["predictions"], expected)
    # the same through /predict naming the model, and one input at a time (batched with nothing else)
    status, _, one = request(base, "POST", "/predict", {"model": task, "inputs": raw_inputs(expected)[:1]})
    assert status == 200 and one["predictions"] == answer["predictions"][:1]


@pytest.mark.parametrize("task", ["cls", "multilabel", "ner_crf", "pointwise", "inbatch"])
def test_v2_infer_gives_the_same_answers_as_tensors(server, served_runs, task):
    base, app, _ = server
    rows = read_jsonl(os.path.join(served_runs[task], "predictions.jsonl"))[:3]
    inputs = raw_inputs(rows)
    if "text_a" in rows[0]:
        tensors = [{"name": "text_a", "shape": [3], "datatype": "BYTES", "data": [p[0] for p in inputs]},
                   {"name": "text_b", "shape": [3], "datatype": "BYTES", "data": [p[1] for p in inputs]}]
    else:  # texts (NER: the tokens joined, given as a text as a user would)
        inputs = [r.get("text") or "".join(r["tokens"]) for r in rows]
        tensors = [{"name": "text", "shape": [3], "datatype": "BYTES", "data": inputs}]
    status, _, answer = request(base, "POST", f"/v2/models/{task}/infer", {"id": "r1", "inputs": tensors})
    assert status == 200, answer
    assert answer["model_name"] == task and answer["id"] == "r1"
    outputs = {o["name"]: o for o in answer["outputs"]}
    status, _, meta = request(base, "GET", f"/v2/models/{task}")
    assert status == 200 and [o["name"] for o in meta["outputs"]] == list(outputs)
    _, _, plain = request(base, "POST", f"/models/{task}/predict", {"inputs": inputs})
    plain = plain["predictions"]
    labels = meta["parameters"]["labels"]
    if "probs" in outputs:
        assert outputs["probs"]["shape"] == [3, len(labels)]
        flat = [row["probs"][name] for row in plain for name in labels]
        assert outputs["probs"]["data"] == pytest.approx(flat, abs=1e-6)
    if "label" in outputs:
        assert outputs["label"]["data"] == [row["label"] for row in plain]
    if "labels" in outputs:
        assert [json.loads(v) for v in outputs["labels"]["data"]] == [row["labels"] for row in plain]
    if "entities" in outputs:
        assert [json.loads(v) for v in outputs["entities"]["data"]] == [row["entities"] for row in plain]
        for text, row in zip(inputs, plain):  # a text's entities are also character spans of it
            assert all(text[e["char_start"]:e["char_end"]] == e["text"] for e in row["entities"])
    if "score" in outputs:
        assert outputs["score"]["datatype"] == "FP32"
        assert outputs["score"]["data"] == pytest.approx([row["score"] for row in plain], abs=1e-6)


def test_health_metadata_page_and_metrics(server):
    base, app, engine = server
    assert request(base, "GET", "/v2/health/live")[:3:2] == (200, {"live": True})
    assert request(base, "GET", "/v2/health/ready")[:3:2] == (200, {"ready": True})
    assert request(base, "GET", "/v2/models/cls/ready")[:3:2] == (200, {"name": "cls", "ready": True})
    status, _, meta = request(base, "GET", "/v2/models/pointwise")
    assert status == 200 and meta["name"] == "pointwise" and meta["versions"] == ["1"]
    assert [i["name"] for i in meta["inputs"]] == ["text_a", "text_b"]
    status, _, listed = request(base, "GET", "/models")
    assert listed["ready"] and [m["name"] for m in listed["models"]] == list(TASKS)
    assert {m["engine"] for m in listed["models"]} == {engine}
    status, headers, page = request(base, "GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html") and "<form" in page
    assert "http://" not in page and "https://" not in page  # nothing fetched from a network: works offline
    status, headers, text = request(base, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    for series in ('appzoo_requests_total{code="200",method="GET",route="/v2/models/{name}"}',
                   'appzoo_request_seconds_bucket{le="0.001",route="/v2/health/live"}',
                   'appzoo_batch_size_count{model="cls"}', 'appzoo_queue_depth{model="cls"} 0.0',
                   'appzoo_model_load_seconds{model="ner_crf"}', "appzoo_ready 1.0"):
        assert series in text, series


def test_a_long_text_is_cut_and_the_answer_says_so(server):
    base, _, _ = server
    status, _, answer = request(base, "POST", "/models/cls/predict", {"inputs": ["好" * 1_000_000, "短"]})
    assert status == 413  # 3 MB of UTF-8 is over max_body_bytes
    status, _, answer = request(base, "POST", "/models/cls/predict", {"inputs": ["a " * 500_000, "short"]})
    assert status == 200, answer
    assert len(answer["predictions"]) == 2 and answer["predictions"][0]["text"] == "a " * 5_000
    assert answer["notes"] == ["input 0: 1000000 characters, cut at max_input_chars=10000",
                               "input 0: cut at max_seq_len=64 tokens; the rest of it was not read"]
    status, _, answer = request(base, "POST", "/models/ner_crf/predict", {"inputs": ["北京" * 100]})
    assert status == 200 and len(answer["predictions"][0]["tokens"]) == 200  # windows: nothing is cut
    assert "notes" not in answer


def test_readiness_is_false_until_every_model_is_loaded(served_runs):
    from fastapi.testclient import TestClient

    from appzoo.serve.app import create_app
    from appzoo.params.serve import ServeConfig

    app = create_app({"cls": os.path.join(served_runs["cls"], "best")}, ServeConfig(engine="dygraph"), 1,
                     load=False)
    client = TestClient(app)
    answer = client.get("/v2/health/ready")
    assert answer.status_code == 503 and answer.json() == {"ready": False} and answer.headers["retry-after"]
    assert client.get("/v2/models/cls/ready").status_code == 503
    assert client.get("/v2/health/live").json() == {"live": True}
    answer = client.post("/predict", json={"inputs": ["x"]})
    assert answer.status_code == 503 and "loading" in answer.json()["error"]
    app.state.models.load()
    assert client.get("/v2/health/ready").json() == {"ready": True}
    assert client.post("/predict", json={"inputs": ["x"]}).status_code == 200
    app.state.models.stop(5)


# ---- start-up errors: one line, exit 2 -----------------------------------------------------
def serve_main(*args):
    from appzoo.serve.__main__ import main

    return main(list(args))


def test_startup_errors_are_one_line_and_exit_2(served_runs, tmp_path, capsys, monkeypatch):
    best = os.path.join(served_runs["cls"], "best")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))  # main sets it: restore after
    try:
        assert serve_main(best, "--port", str(port), "--engine", "dygraph", "--threads", "1") == 2
    finally:
        taken.close()
    assert capsys.readouterr().err == (f"error: serve.port: cannot listen on 127.0.0.1:{port} (in use by another "
                                       f"process); choose another serve.port (--port), or stop what holds it\n")

    assert serve_main(str(tmp_path / "nowhere" / "best"), "--threads", "1") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: models: nowhere: ") and err.count("\n") == 1, err

    broken = tmp_path / "broken" / "best"
    shutil.copytree(best, broken)
    with open(broken / "model.safetensors", "r+b") as f:
        f.truncate(100)
    assert serve_main(str(broken), "--threads", "1", "--engine", "dygraph") == 2
    err = capsys.readouterr().err
    assert "model.safetensors" in err and "truncated or corrupt" in err and err.count("\n") == 1, err

    with open(broken / "model.safetensors", "wb") as f:  # sound weights, a corrupt labels.json: found while
        f.write(open(os.path.join(best, "model.safetensors"), "rb").read())  # loading, after the port opened
    (broken / "labels.json").write_text("{broken", encoding="utf-8")
    assert serve_main(str(broken), "--threads", "1", "--engine", "dygraph", "--port", "0") == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("serving broken on http://127.0.0.1:")
    assert err[1:] == [f"error: model 'broken' ({broken}): {broken}/labels.json: cannot be read as JSON (Expecting "
                       f"property name enclosed in double quotes: line 1 column 2 (char 1)); the file is truncated "
                       f"or corrupt"]

    assert serve_main(best, "a=" + best, "b=" + best, "--threads", "2") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: serve.threads: 3 model(s) x 2 thread(s) = 6 > the ") and err.count("\n") == 1

    assert serve_main("x=" + best, "x=" + best, "--threads", "1") == 2
    assert "two models named 'x'" in capsys.readouterr().err

    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    assert serve_main(best, "--engine", "onnxruntime", "--threads", "1") == 2
    assert capsys.readouterr().err == ("error: serve.engine: 'onnxruntime' needs the onnxruntime package, which is "
                                       "not installed (pip install onnxruntime)\n")


def test_do_serve_alone_and_a_bad_serve_key_in_the_param_file(served_runs, capsys):
    import run_trainer

    run = served_runs["cls"]
    example = TASKS["cls"][0]
    assert run_trainer.main(["--param_path", example, "--set", f"trainer.output_dir={run}", "--do", "serve,eval"]) == 2
    assert "serve runs alone" in capsys.readouterr().err
    assert run_trainer.main(["--param_path", example, "--set", f"trainer.output_dir={run}", "--set",
                             "serve.max_batch_size=0", "--do", "serve"]) == 2
    assert capsys.readouterr().err == "error: --set serve.max_batch_size: must be >= 1, got 0\n"
    assert run_trainer.main(["--param_path", example, "--set", f"trainer.output_dir={run}", "--set",
                             "serve.prot=1", "--do", "eval"]) == 2  # planning a run checks the section too
    assert "serve.prot: unknown key" in capsys.readouterr().err


# ---- a SIGTERM under load: what is in flight is answered, then exit 0 ------------------------
def test_two_sigterms_under_load_answer_in_flight_requests_then_exit_0(served_runs, tmp_path):
    """A second SIGTERM while draining changes nothing, and one after the drain (the process still
    exiting) does not turn the exit 0 into 143."""
    run = served_runs["cls"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "run_trainer.py", "--param_path", TASKS["cls"][0], "--set", f"trainer.output_dir={run}",
               "--set", "serve.port=0", "--set", "serve.engine=dygraph", "--set", "serve.threads=1",
               "--set", "serve.max_batch_size=64", "--do", "serve"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = process.stderr.readline()
        assert first.startswith("serving "), first
        base = first.split(" on ")[1].split("/ ")[0]
        wait_ready(base, timeout=120)
        answers, answered_at = [], []

        def client(i):  # 1000 inputs each: 8 such requests keep the model busy past the SIGTERM
            answers.append(request(base, "POST", "/predict", {"inputs": [f"text {i} {j}" for j in range(1000)]})[0])
            answered_at.append(time.monotonic())

        clients = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for c in clients:
            c.start()
        time.sleep(0.5)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        process.send_signal(signal.SIGTERM)  # while draining
        for c in clients:
            c.join(60)
        rest = []
        for line in process.stderr:
            rest.append(line)
            if line.startswith("stopped"):
                process.send_signal(signal.SIGTERM)  # drained; the process is still exiting
                time.sleep(0.2)  # and again while the interpreter shuts down (which resets a caught signal)
                process.send_signal(signal.SIGTERM)
                break
        assert process.wait(60) == 0
        rest = "".join(rest) + process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
    assert answers == [200] * 8 and max(answered_at) > signalled  # some were still under way at the SIGTERM
    assert "stopped: every request in flight was answered" in rest and "Traceback" not in rest
    with pytest.raises(OSError):
        request(base, "GET", "/v2/health/live", timeout=2)


def test_a_sigterm_while_the_model_exports_exits_0_not_abort(served_runs, tmp_path):
    """Stopped while the loading thread exports the graph (onnxruntime, inference/ removed), the process must not
    end its interpreter under paddle's running C++ code, which aborted it (SIGABRT, 'FATAL: exception not
    rethrown'): it waits for the loading and exits 0, and the export it finished is whole."""
    import shutil

    run = tmp_path / "cls"
    shutil.copytree(served_runs["cls"], run, symlinks=True)
    shutil.rmtree(run / "best" / "inference", ignore_errors=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "appzoo.serve", str(run / "best"), "--port", "0",
                                "--engine", "onnxruntime"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = process.stderr.readline()
        assert first.startswith("serving "), first
        base = first.split(" on ")[1].split("/ ")[0]
        time.sleep(0.3)  # the loading thread has started the export
        assert request(base, "GET", "/v2/health/ready")[0] == 503  # still loading: the case under test
        process.send_signal(signal.SIGTERM)
        code = process.wait(120)
        rest = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0, (code, rest[-2000:])
    assert "FATAL" not in rest and "Traceback" not in rest, rest[-2000:]


def test_a_second_ctrl_c_stops_at_once_with_130(served_runs, monkeypatch, capsys):
    """In this process (serve() runs on the main thread, which signals need): the second SIGINT ends the
    drain without waiting for the request whose batch takes 30 s."""
    from appzoo.inference.predictor import Predictor
    from appzoo.serve import server as server_module
    from appzoo.params.serve import ServeConfig

    run_batch = Predictor.predict_prepared

    def slow_batch(self, groups):  # a request's batch (not the warm-up's) holds the model 30 s
        if threading.current_thread().name.startswith("batcher-"):
            time.sleep(30)
        return run_batch(self, groups)

    monkeypatch.setattr(Predictor, "predict_prepared", slow_batch)

    sockets, answers = [], []
    listen = server_module.listen
    monkeypatch.setattr(server_module, "listen", lambda host, port: sockets.append(listen(host, port)) or sockets[0])

    def client(base):
        try:
            answers.append(request(base, "POST", "/predict", {"inputs": ["x"]}, timeout=30)[0])
        except OSError as e:  # the server left without answering
            answers.append(type(e).__name__)

    def signals():
        while not sockets:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        wait_ready(base)
        waiting = threading.Thread(target=client, args=(base,))
        waiting.start()
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)
        waiting.join(30)

    helper = threading.Thread(target=signals)
    helper.start()
    config = ServeConfig(port=0, engine="dygraph", threads=1, max_batch_size=64)
    started = time.monotonic()
    code = server_module.serve({"cls": os.path.join(served_runs["cls"], "best")}, config, 1)
    took = time.monotonic() - started
    helper.join(30)
    assert code == 130 and answers and answers[0] != 200, answers
    assert took < 20  # the request under way would have held the drain 30 s
    assert capsys.readouterr().err.splitlines()[-1] == ("stopped at once (a second Ctrl-C), without waiting for the "
                                                        "requests in flight")


def test_a_second_ctrl_c_with_requests_in_flight_exits_130_in_one_line_not_abort(served_runs):
    """Issue 42, item 12: the command line's server, stopped by two Ctrl-C while clients keep requests under way
    (inside paddle's C++ code on the pool's threads), exits 130 with its one line, not SIGABRT's 200 lines."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "appzoo.serve", os.path.join(served_runs["cls"], "best"),
                                "--port", "0", "--engine", "dygraph", "--max-batch-size", "1"],
                               stderr=subprocess.PIPE, text=True, env=env)
    stop, sent = threading.Event(), []

    def client(base):
        for _ in range(50):  # bounded: the server is gone long before
            if stop.is_set():
                return
            sent.append(1)
            try:  # 512 inputs in batches of 1: seconds under way, on a quiet machine too
                request(base, "POST", "/predict", {"inputs": ["一段要分类的文本"] * 512}, timeout=120)
            except OSError:
                return

    try:
        first = process.stderr.readline()
        assert first.startswith("serving "), first
        base = first.split(" on ")[1].split("/ ")[0]
        wait_ready(base)
        clients = [threading.Thread(target=client, args=(base,)) for _ in range(4)]
        for c in clients:
            c.start()
        ends = time.monotonic() + 30
        while len(sent) < 4 and time.monotonic() < ends:
            time.sleep(0.05)
        time.sleep(0.5)  # the four requests are under way, each for seconds: the drain must wait for them
        process.send_signal(signal.SIGINT)
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        code = process.wait(60)
        rest = process.stderr.read()
    finally:
        stop.set()
        if process.poll() is None:
            process.kill()
    assert code == 130, (code, rest[-3000:])
    assert "terminate called" not in rest and "Traceback" not in rest, rest[-3000:]
    assert rest.strip().splitlines()[-1] == ("stopped at once (a second Ctrl-C), without waiting for the requests "
                                             "in flight")


# ---- a route, added as the newcomer's map says (docs/architecture.md) ------------------------------
def test_a_route_added_to_a_route_group_answers_and_refuses_in_one_line(served_runs, monkeypatch):
    """A new route is a function in one of app.py's route groups; the app's handlers then answer its refusals
    (an unknown model, a wrong method) in one line, as every other route's."""
    from appzoo.serve import app as app_module

    plain = app_module._plain_routes

    def with_labels(app, models, config, metrics):
        plain(app, models, config, metrics)

        @app.get("/models/{name}/labels")
        def labels(name: str):
            return {"labels": models.get(name).predictor.labels}

    monkeypatch.setattr(app_module, "_plain_routes", with_labels)
    with live_server({"cls": os.path.join(served_runs["cls"], "best")}) as (base, app):
        status, _, answer = request(base, "GET", "/models/cls/labels")
        assert status == 200 and answer == {"labels": app.state.models.loaded["cls"].predictor.labels}
        status, _, answer = request(base, "GET", "/models/nope/labels")
        assert status == 404 and list(answer) == ["error"] and "\n" not in answer["error"] and "nope" in answer["error"]
        status, _, answer = request(base, "POST", "/models/cls/labels", {})
        assert status == 405 and answer == {"error": "method POST is not allowed on /models/cls/labels (allowed: GET)"}
