"""Request deadlines (504), and hot reload: a new best/ swapped in under load with no failed request, a best/
that cannot be loaded leaving the old model serving, and SIGHUP."""
import os
import signal
import threading
import time

import pytest

from conftest import read_jsonl
from serving import assert_same_rows, live_server, raw_inputs, request, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("served")]


def hold_batches(app, name="cls"):
    """``(gate, ran)``: the model's batches wait for ``gate``; ``ran`` lists the payload count of each batch."""
    batcher, gate, ran = app.state.models.loaded[name].batcher, threading.Event(), []
    run_batch = batcher.run_batch

    def held(payloads):
        ran.append(len(payloads))
        gate.wait(30)
        return run_batch(payloads)

    batcher.run_batch = held
    return gate, ran


def metric(base, line_start):
    for line in request(base, "GET", "/metrics")[2].splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# ---- deadlines ----------------------------------------------------------------------------------
def test_a_request_past_its_deadline_is_answered_504_dropped_from_the_queue_and_counted(served_runs):
    best = os.path.join(served_runs["cls"], "best")
    with live_server({"cls": best}, max_request_timeout_s=1.5) as (base, app):
        gate, ran = hold_batches(app)
        answers = {}

        def client(key, headers):
            answers[key] = request(base, "POST", "/predict", {"inputs": [f"文本 {key}"]}, headers=headers)

        under_way = threading.Thread(target=client, args=("a", {}))  # runs at once, held: the server's 1.5 s
        under_way.start()
        while not ran:
            time.sleep(0.01)
        queued = [threading.Thread(target=client, args=("b", {"X-Request-Timeout": "0.2"})),
                  threading.Thread(target=client, args=("c", {"X-Request-Timeout": "7"}))]  # capped at 1.5 s
        for c in queued:
            c.start()
        for c in [under_way, *queued]:
            c.join(30)
        gate.set()
        assert answers["b"][:1] == (504,) and answers["b"][2] == {
            "error": "model 'cls': no answer within the request's timeout of 0.2 s (X-Request-Timeout); retry later, "
                     "or allow more time"}
        for key in ("a", "c"):
            assert answers[key][:1] == (504,) and answers[key][2] == {
                "error": "model 'cls': no answer within the request's timeout of 1.5 s (serve.max_request_timeout_s); "
                         "retry later, or allow more time"}
        status, _, answer = request(base, "POST", "/predict", {"inputs": ["还好"]})
        assert status == 200 and len(answer["predictions"]) == 1
        assert ran == [1, 1]  # a's batch, then the last request's: b and c never ran
        assert metric(base, 'appzoo_refused_total{model="cls",reason="deadline"}') == 3


def test_a_malformed_timeout_header_is_a_400_in_one_line(served_runs):
    with live_server({"cls": os.path.join(served_runs["cls"], "best")}) as (base, _):
        for value in ("abc", "0", "-1", "nan", "inf", ""):
            status, _, answer = request(base, "POST", "/predict", {"inputs": ["x"]},
                                        headers={"X-Request-Timeout": value})
            assert (status, answer) == (400, {"error": f"X-Request-Timeout: expected a number of seconds > 0, got "
                                                       f"{value!r}"})


def test_bad_batching_and_timeout_settings_are_one_line_errors():
    from appzoo.errors import ConfigError
    from appzoo.params.serve import ServeConfig

    with pytest.raises(ConfigError, match=r"^serve\.max_batch_tokens: must be >= 1, got 0$"):
        ServeConfig.from_section({"max_batch_tokens": 0})
    with pytest.raises(ConfigError, match=r"^serve\.max_request_timeout_s: must be > 0, got 0$"):
        ServeConfig.from_section({"max_request_timeout_s": 0})


# ---- hot reload -----------------------------------------------------------------------------------
def test_a_reload_under_load_to_another_model_fails_no_request_and_answers_from_the_new_one(served_runs):
    old_best, new_best = (os.path.join(served_runs[task], "best") for task in ("cls", "multilabel"))
    new_rows = read_jsonl(os.path.join(served_runs["multilabel"], "predictions.jsonl"))[:4]
    texts = raw_inputs(new_rows)
    root = os.path.dirname(served_runs["cls"])  # both runs are under it: serve.reload_root names it
    with live_server({"cls": old_best}, max_wait_ms=2, reload_root=root) as (base, app):
        old = app.state.models.loaded["cls"]
        answers, reloaded, stop = [], threading.Event(), threading.Event()

        def client():
            for _ in range(400):  # bounded: the loop ends well before this many
                if stop.is_set():
                    return
                after = reloaded.is_set()  # sent after the reload answered: must be the new model's
                status, _, answer = request(base, "POST", "/predict", {"inputs": texts})
                answers.append((after, status, answer))

        clients = [threading.Thread(target=client) for _ in range(8)]
        for c in clients:
            c.start()
        ends = time.monotonic() + 60
        while len(answers) < 16 and time.monotonic() < ends:
            time.sleep(0.02)
        status, _, answer = request(base, "POST", "/v2/repository/models/cls/load", {"parameters": {"best": new_best}})
        reloaded.set()
        count = len(answers)
        while len(answers) < count + 16 and time.monotonic() < ends:
            time.sleep(0.02)
        stop.set()
        for c in clients:
            c.join(60)
    assert status == 200 and answer["name"] == "cls" and answer["loaded"] is True, answer
    assert [s for _, s, _ in answers if s != 200] == []  # 0 failed requests
    kinds = {(after, "labels" in a["predictions"][0]) for after, _, a in answers}
    assert (False, False) in kinds and (True, False) not in kinds  # the old model before, only the new one after
    for after, _, a in answers:
        if after:
            assert_same_rows(a["predictions"], new_rows)
    assert not old.batcher._thread.is_alive()  # the old model was drained and stopped


def test_a_best_that_fails_to_load_leaves_the_old_model_serving_with_one_line(served_runs, tmp_path, capsys):
    best = os.path.join(served_runs["cls"], "best")
    rows = read_jsonl(os.path.join(served_runs["cls"], "predictions.jsonl"))[:3]
    missing = os.path.join(served_runs["cls"], "nope", "best")  # under the model's run folder: looked at
    with live_server({"cls": best}) as (base, app):
        status, _, answer = request(base, "POST", "/v2/repository/models/cls/load", {"parameters": {"best": missing}})
        assert (status, answer) == (422, {"error": "model 'cls' was not reloaded: parameters.best: 'cls/nope/best' "
                                                   "does not exist; the old model serves on"})
        logged = capsys.readouterr().err
        assert f"error: model 'cls' was not reloaded: parameters.best: {missing!r} does not exist" in logged
        outside = []  # outside it: one answer whatever is there, so nothing is learnt of the machine's files
        for path in (str(tmp_path / "nope" / "best"), "/etc/shadow", "/etc", os.path.join(best, "..", "..")):
            status, _, answer = request(base, "POST", "/v2/repository/models/cls/load", {"parameters": {"best": path}})
            outside.append((status, answer["error"]))
        assert set(outside) == {(403, "model 'cls' was not reloaded: parameters.best: a reload loads only a best/ "
                                      "under the folder named when the server started (serve.reload_root; by default "
                                      "the run folder of the model's best/); the old model serves on")}
        status, _, answer = request(base, "POST", "/v2/repository/models/cls/load", {"parameters": {"path": missing}})
        assert (status, answer) == (422, {"error": "parameters: unknown field 'path' (accepted: best)"})
        status, _, answer = request(base, "POST", "/v2/repository/models/nope/load")
        assert (status, answer) == (404, {"error": "no model named 'nope' (models: cls)"})
        status, _, answer = request(base, "POST", "/predict", {"inputs": raw_inputs(rows)})
        assert status == 200
        assert_same_rows(answer["predictions"], rows)
        status, _, answer = request(base, "POST", "/v2/repository/models/cls/load")  # no body: a page could send it
        assert (status, answer) == (415, {"error": "a reload takes a JSON body (Content-Type: application/json); {} "
                                                   "loads the model's own folder again"})
        status, _, answer = request(base, "POST", "/v2/repository/models/cls/load", b"",
                                    {"Content-Type": "text/plain"})  # a CORS "simple request": no preflight
        assert status == 415
        status, _, answer = request(base, "POST", "/v2/repository/models/cls/load", {})  # the same folder again
        assert status == 200 and answer["loaded"] is True
        assert request(base, "GET", "/v2")[2]["extensions"] == ["model_repository"]
        # the malformed and the refused bodies were refused before any reload began
        assert metric(base, 'appzoo_reloads_total{model="cls",outcome="failed"}') == 5
        assert metric(base, 'appzoo_reloads_total{model="cls",outcome="ok"}') == 1


def test_sighup_reloads_every_model_from_its_folder(served_runs, monkeypatch, capsys):
    """serve() on the main thread, which signals need; SIGHUP, then one Ctrl-C to stop."""
    from appzoo.params.serve import ServeConfig
    from appzoo.serve import server as server_module

    sockets, seen = [], []
    listen = server_module.listen
    monkeypatch.setattr(server_module, "listen", lambda host, port: sockets.append(listen(host, port)) or sockets[0])

    def signals():
        while not sockets:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        wait_ready(base)
        os.kill(os.getpid(), signal.SIGHUP)
        ends = time.monotonic() + 60
        while metric(base, 'appzoo_reloads_total{model="cls",outcome="ok"}') < 1 and time.monotonic() < ends:
            time.sleep(0.1)
        seen.append(request(base, "POST", "/predict", {"inputs": ["还好"]})[0])
        os.kill(os.getpid(), signal.SIGINT)

    helper = threading.Thread(target=signals)
    helper.start()
    code = server_module.serve({"cls": os.path.join(served_runs["cls"], "best")},
                               ServeConfig(port=0, engine="dygraph", threads=1), 1)
    helper.join(30)
    err = capsys.readouterr().err
    assert code == 0 and seen == [200], (code, seen, err[-2000:])
    assert f"reloaded model 'cls' from {os.path.join(served_runs['cls'], 'best')} in " in err
