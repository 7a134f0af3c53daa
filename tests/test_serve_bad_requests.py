"""Hostile requests against a live server on 127.0.0.1: each gets its status and a one-line
``{"error": ...}``, is counted in /metrics, and the server answers a good request afterwards. Those the
HTTP layer refuses before any route (appzoo/serve/protocol.py) go through raw sockets."""
import json
import os
import re
import shutil
import socket
import threading
import time

import pytest

from serving import live_server, request

pytestmark = pytest.mark.xdist_group("served")
slow = pytest.mark.slow  # what needs the trained runs; the HTTP layer's tests below need none and stay quick

J = {"Content-Type": "application/json"}
PAIR = [{"name": "text_a", "shape": [1], "datatype": "BYTES", "data": ["a"]},
        {"name": "text_b", "shape": [1], "datatype": "BYTES", "data": ["b"]}]


def text_tensor(**changes):
    return {"name": "text", "shape": [1], "datatype": "BYTES", "data": ["好"], **changes}


# (id, method, path, headers, body bytes or JSON value, status, a regex of the one-line error)
CASES = [
    # the body: type, size, bytes, JSON
    ("no content type", "POST", "/models/cls/predict", {}, b'{"inputs": ["x"]}', 415,
     r"^Content-Type: expected application/json, got none$"),
    ("text/plain", "POST", "/models/cls/predict", {"Content-Type": "text/plain"}, b'{"inputs": ["x"]}', 415,
     r"got text/plain"),
    ("a form", "POST", "/models/cls/predict", {"Content-Type": "application/x-www-form-urlencoded"}, b"inputs=x",
     415, r"expected application/json"),
    ("latin-1 charset", "POST", "/models/cls/predict", {"Content-Type": "application/json; charset=latin-1"},
     b'{"inputs": ["x"]}', 415, r"charset 'latin-1' is not accepted"),
    ("malformed JSON", "POST", "/models/cls/predict", J, b'{"inputs": [', 400, r"^body: not valid JSON \(.+ at line 1"),
    ("empty body", "POST", "/models/cls/predict", J, b"", 400, r"^body: not valid JSON"),
    ("invalid UTF-8", "POST", "/models/cls/predict", J, b'{"inputs": ["\xff\xfe"]}', 400,
     r"^body: not valid UTF-8 \(byte 0xff at position 13\)$"),
    ("NaN", "POST", "/models/cls/predict", J, b'{"inputs": [NaN]}', 400, r"NaN is not JSON"),
    ("nested 100000 deep", "POST", "/models/cls/predict", J, b"[" * 100_000 + b"]" * 100_000, 400,
     r"nested too deeply"),
    ("a 5000-digit number", "POST", "/models/cls/predict", J, b'{"inputs": [' + b"9" * 5000 + b"]}", 400,
     r"^body: not valid JSON"),
    # a key given twice: json keeps the last one, a proxy or a log may keep the first
    ("inputs twice", "POST", "/models/cls/predict", J, b'{"inputs": ["a"], "inputs": ["b"]}', 400,
     r"^body: not valid JSON \(the key 'inputs' appears twice in one object; give each key once\)$"),
    ("a key twice in a V2 tensor", "POST", "/v2/models/cls/infer", J,
     b'{"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a"], "data": ["b"]}]}', 400,
     r"the key 'data' appears twice in one object"),
    ("over max_body_bytes", "POST", "/models/cls/predict", J, b'{"inputs": ["' + b"a" * 2_000_000 + b'"]}', 413,
     r"^body: 2000016 bytes is over max_body_bytes=1100000$"),
    # the fields of /predict
    ("a list", "POST", "/models/cls/predict", J, ["x"], 422, r"^body: expected a JSON object .*got list$"),
    ("a string", "POST", "/models/cls/predict", J, "x", 422, r"got str$"),
    ("null", "POST", "/models/cls/predict", J, b"null", 422, r"got NoneType$"),
    ("no inputs", "POST", "/models/cls/predict", J, {}, 422, r"^body: missing field 'inputs'"),
    ("an extra field", "POST", "/models/cls/predict", J, {"inputs": ["x"], "top_k": 3}, 422,
     r"^body: unknown field 'top_k' \(accepted: inputs\)$"),
    ("inputs a string", "POST", "/models/cls/predict", J, {"inputs": "x"}, 422,
     r"^inputs: expected a list of inputs, got str 'x'$"),
    ("inputs a number", "POST", "/models/cls/predict", J, {"inputs": 3}, 422, r"got int 3$"),
    ("inputs an object", "POST", "/models/cls/predict", J, {"inputs": {"a": 1}}, 422, r"got dict"),
    ("an empty list", "POST", "/models/cls/predict", J, {"inputs": []}, 422, r"^inputs: empty list"),
    ("too many inputs", "POST", "/models/cls/predict", J, {"inputs": ["x"] * 1025}, 422,
     r"^inputs: 1025 inputs, more than max_request_inputs=1024 in one request; send them in several requests$"),
    ("a null item", "POST", "/models/cls/predict", J, {"inputs": [None]}, 422,
     r"^input 0: expected a non-empty text \(a string\), got null$"),
    ("a number item", "POST", "/models/cls/predict", J, {"inputs": ["ok", 1]}, 422, r"^input 1: expected"),
    ("an empty text", "POST", "/models/cls/predict", J, {"inputs": [""]}, 422, r"^input 0: expected a non-empty"),
    ("a blank text", "POST", "/models/cls/predict", J, {"inputs": [" \t\n"]}, 422,
     r'^input 0: " \\t\\n" is blank \(only whitespace and invisible format characters such as U\+200B\); '
     r'expected a non-empty text$'),
    # invisible format characters (Unicode Cf) are as blank as spaces: the tokenizer drops them
    ("a zero-width space", "POST", "/models/cls/predict", J, {"inputs": ["ok", "\u200b"]}, 422,
     r'^input 1: "\\u200b" is blank'),
    ("joiners and a BOM", "POST", "/models/cls/predict", J, {"inputs": [" \u200c\u200d\u2060\ufeff "]}, 422,
     r'^input 0: " \\u200c\\u200d\\u2060\\ufeff " is blank'),
    ("a bidi mark in a pair", "POST", "/models/pointwise/predict", J, {"inputs": [["a", "\u200e\u2066"]]}, 422,
     r'^input 0: "\\u200e\\u2066" is blank'),
    ("a zero-width token", "POST", "/models/ner/predict", J, {"inputs": [["北", "\u200b"]]}, 422,
     r'^input 0: "\\u200b" is blank'),
    ("a newline in the echo", "POST", "/models/pointwise/predict", J, {"inputs": ["a\nb"]}, 422, r"got a\\nb$"),
    ("a pair to a classifier", "POST", "/models/cls/predict", J, {"inputs": [["a", "b"]]}, 422, r"^input 0:"),
    ("a lone surrogate", "POST", "/models/cls/predict", J, b'{"inputs": ["a\\ud800b"]}', 422,
     r"^input 0: not valid Unicode text \(surrogates not allowed at character 1\)$"),
    ("one text to a matcher", "POST", "/models/pointwise/predict", J, {"inputs": ["a"]}, 422,
     r"^input 0: expected a pair of non-empty texts"),
    ("a 1-tuple to a matcher", "POST", "/models/pointwise/predict", J, {"inputs": [["a"]]}, 422, r"^input 0:"),
    ("a 3-tuple to a matcher", "POST", "/models/pointwise/predict", J, {"inputs": [["a", "b", "c"]]}, 422,
     r"^input 0:"),
    ("no tokens", "POST", "/models/ner/predict", J, {"inputs": [[]]}, 422,
     r"^input 0: expected a text or a list of non-empty tokens"),
    ("an empty token", "POST", "/models/ner/predict", J, {"inputs": [["北", ""]]}, 422, r"^input 0:"),
    ("a number token", "POST", "/models/ner/predict", J, {"inputs": [["北", 3]]}, 422, r"^input 0:"),
    # which model
    ("/predict without a model", "POST", "/predict", J, {"inputs": ["x"]}, 422,
     r"^model: required with several models \(one of: cls, ner, pointwise\)"),
    ("/predict, a number model", "POST", "/predict", J, {"model": 5, "inputs": ["x"]}, 422, r"^model: expected"),
    ("/predict, an unknown model", "POST", "/predict", J, {"model": "nope", "inputs": ["x"]}, 404,
     r"^no model named 'nope' \(models: cls, ner, pointwise\)$"),
    ("an unknown model", "POST", "/models/nope/predict", J, {"inputs": ["x"]}, 404, r"^no model named 'nope'"),
    ("V2 metadata, unknown", "GET", "/v2/models/nope", {}, None, 404, r"^no model named 'nope'"),
    ("V2 ready, unknown", "GET", "/v2/models/nope/ready", {}, None, 404, r"^no model named 'nope'"),
    ("V2 infer, unknown", "POST", "/v2/models/nope/infer", J, {"inputs": [text_tensor()]}, 404, r"^no model"),
    # routes and methods
    ("GET /predict", "GET", "/predict", {}, None, 405, r"^method GET is not allowed on /predict \(allowed: POST\)$"),
    ("PUT a predict route", "PUT", "/models/cls/predict", J, {"inputs": ["x"]}, 405, r"allowed: POST"),
    ("DELETE live", "DELETE", "/v2/health/live", {}, None, 405, r"allowed: GET"),
    ("no such route", "GET", "/admin", {}, None, 404, r"^no route GET /admin"),
    ("a path traversal", "GET", "/../../etc/passwd", {}, None, 404, r"^no route"),
    # KServe V2 inference requests
    ("V2 empty object", "POST", "/v2/models/cls/infer", J, {}, 422,
     r"^inputs: expected a non-empty list of input tensors, got null$"),
    ("V2 inputs not a list", "POST", "/v2/models/cls/infer", J, {"inputs": "x"}, 422, r"^inputs: expected"),
    ("V2 unknown field", "POST", "/v2/models/cls/infer", J, {"inputs": [text_tensor()], "x": 1}, 422,
     r"^body: unknown field 'x'"),
    ("V2 id a number", "POST", "/v2/models/cls/infer", J, {"id": 7, "inputs": [text_tensor()]}, 422, r"^id:"),
    ("V2 tensor not an object", "POST", "/v2/models/cls/infer", J, {"inputs": ["x"]}, 422,
     r"^inputs\[0\]: expected a tensor object"),
    ("V2 no data", "POST", "/v2/models/cls/infer", J, {"inputs": [{"name": "text", "shape": [1],
                                                                     "datatype": "BYTES"}]}, 422,
     r"^inputs\[0\]: missing field 'data'$"),
    ("V2 wrong name", "POST", "/v2/models/cls/infer", J, {"inputs": [text_tensor(name="input_ids")]}, 422,
     r"^inputs\[0\]\.name: 'input_ids' is not an input of this model \(inputs: text\)$"),
    ("V2 FP32 texts", "POST", "/v2/models/cls/infer", J, {"inputs": [text_tensor(datatype="FP32")]}, 422,
     r"texts are BYTES"),
    ("V2 shape mismatch", "POST", "/v2/models/cls/infer", J, {"inputs": [text_tensor(shape=[3])]}, 422,
     r"^inputs\[0\]\.shape: \[3\] does not fit 1 value\(s\) \(use \[1\]\)$"),
    ("V2 negative shape", "POST", "/v2/models/cls/infer", J, {"inputs": [text_tensor(shape=[-1])]}, 422,
     r"^inputs\[0\]\.shape: expected a list of sizes"),
    ("V2 null text", "POST", "/v2/models/cls/infer", J, {"inputs": [text_tensor(data=[None])]}, 422,
     r"^input 0: expected a non-empty text"),
    ("V2 a second text tensor", "POST", "/v2/models/cls/infer", J, {"inputs": [text_tensor(), text_tensor()]}, 422,
     r"a second tensor named 'text'"),
    ("V2 matcher without text_b", "POST", "/v2/models/pointwise/infer", J, {"inputs": PAIR[:1]}, 422,
     r"^inputs: missing the tensor 'text_b' \(this model takes text_a, text_b\)$"),
    ("V2 matcher, lengths differ", "POST", "/v2/models/pointwise/infer", J,
     {"inputs": [PAIR[0], {**PAIR[1], "shape": [2], "data": ["b", "c"]}]}, 422, r"have different lengths \(1, 2\)"),
]


@pytest.fixture(scope="module")
def server(served_runs):
    specs = {"cls": served_runs["cls"], "ner": served_runs["ner_crf"], "pointwise": served_runs["pointwise"]}
    # allowed_hosts "*": the raw-HTTP cases send a made-up Host (x); the Host check: tests/test_serve_security.py
    with live_server({k: os.path.join(v, "best") for k, v in specs.items()}, max_body_bytes=1_100_000,
                     allowed_hosts=["*"]) as (base, _):
        yield base


def good(base):
    status, _, answer = request(base, "POST", "/models/cls/predict", {"inputs": ["还好"]})
    assert status == 200 and len(answer["predictions"]) == 1


def errors_counted(base, code):
    text = request(base, "GET", "/metrics")[2]
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("appzoo_request_errors_total{") and f'code="{code}"' in line)


def test_there_are_at_least_40_cases():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


@slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_request_gets_its_status_and_one_line(server, case):
    _, method, path, headers, body, status, pattern = case
    before = errors_counted(server, status)
    got, _, answer = request(server, method, path, body, headers)
    assert got == status, answer
    assert isinstance(answer, dict) and list(answer) == ["error"], answer
    assert "\n" not in answer["error"] and re.search(pattern, answer["error"]), answer["error"]
    assert errors_counted(server, status) == before + 1
    good(server)


@slow
def test_a_chunked_body_over_the_limit_is_413_without_reading_it_all(server):
    host, port = server.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /models/cls/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"a" * 65536
        try:
            for _ in range(40):  # 2.6 MB, more than max_body_bytes
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass  # the server answered and closed before the end
        reply = b""
        while b'"}' not in reply:
            data = sock.recv(4096)
            if not data:
                break
            reply += data
        reply = reply.decode("latin-1")
    assert reply.startswith("HTTP/1.1 413"), reply[:100]
    assert '{"error":"body: over max_body_bytes=1100000 bytes"}' in reply
    good(server)


@slow
def test_a_64_mb_body_sent_whole_by_urllib_gets_its_413_read(server):
    """urllib sends the whole body before it reads: closing on the 413 with 64 MB unread would reset the
    connection under it (the answer lost); the server lingers, dropping the rest, and the client reads it."""
    import urllib.error
    import urllib.request

    body = b'{"inputs": ["' + b"a" * (64 << 20) + b'"]}'
    ask = urllib.request.Request(server + "/models/cls/predict", data=body, headers=J)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(ask, timeout=60)
    assert refused.value.code == 413 and refused.value.headers["connection"] == "close"
    assert json.loads(refused.value.read()) == {"error": "body: 67108880 bytes is over max_body_bytes=1100000"}
    good(server)


@slow
def test_no_answer_tells_where_the_models_are_on_disk(server, served_runs, tmp_path):
    from fastapi.testclient import TestClient

    from appzoo.serve.app import create_app
    from appzoo.params.serve import ServeConfig

    answers = [request(server, "GET", path)[2] for path in ("/models", "/v2/models/cls", "/v2", "/v2/health/ready")]
    assert [m["name"] for m in answers[0]["models"]] == ["cls", "ner", "pointwise"]
    broken = tmp_path / "run" / "best"  # a model that fails to load: its error says where, by the model's name
    shutil.copytree(os.path.join(served_runs["cls"], "best"), broken)
    (broken / "labels.json").write_text("{broken", encoding="utf-8")
    app = create_app({"cls": str(broken)}, ServeConfig(engine="dygraph"), 1, load=False)
    app.state.models.load()
    assert str(tmp_path) in app.state.models.error  # the operator's stderr line keeps the folder
    client = TestClient(app)
    for path in ("/v2/health/ready", "/v2/models/cls/ready", "/models"):
        answers.append(client.get(path).json())
    assert answers[-3]["error"].startswith("model 'cls' (cls/best): cls/best/labels.json: cannot be read as JSON")
    for root in (str(tmp_path), os.path.dirname(served_runs["cls"]), os.getcwd(), os.path.expanduser("~")):
        assert root not in json.dumps(answers), root


def test_a_body_that_stops_arriving_gets_408_after_read_timeout_s_and_its_route_a_499(bare):
    before, refused = errors_counted(bare, 499), unparsed(bare, 408)
    # promises 1000 bytes, sends 10, waits
    reply, took = exchange(bare, b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 1000\r\n\r\n{\"inputs\":")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower(), reply[:200]
    assert json.loads(body) == {"error": "the request body paused longer than read_timeout_s=1 s"}
    assert 0.8 < took < 2.5
    deadline = time.monotonic() + 5
    while errors_counted(bare, 499) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert errors_counted(bare, 499) == before + 1  # the route that was reading it
    assert unparsed(bare, 408) == refused + 1


def test_a_body_that_trickles_in_gets_408_after_body_timeout_s(bare):
    """A byte every 0.3 s never pauses read_timeout_s (1 s), and is cut at body_timeout_s (2 s) all the same."""
    host, port = bare.split("//")[1].split(":")
    started, reply = time.monotonic(), b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n")
        sock.settimeout(0.3)
        while time.monotonic() - started < 8:  # bounded: the answer is due at 2 s
            try:
                data = sock.recv(4096)
            except socket.timeout:
                sock.sendall(b" ")
                continue
            if not data:
                break
            reply += data
    took = time.monotonic() - started
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert json.loads(body) == {"error": "the request body did not all arrive within body_timeout_s=2 s"}
    assert 1.8 < took < 4
    assert request(bare, "GET", "/v2/health/live")[0] == 200


@slow
def test_a_client_that_leaves_mid_request_is_counted_and_harmless(server):
    before = errors_counted(server, 499)
    host, port = server.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:  # promises 1000 bytes, sends 10
        sock.sendall(b"POST /models/cls/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"inputs\":")
    deadline = time.monotonic() + 10
    while errors_counted(server, 499) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert errors_counted(server, 499) == before + 1
    with socket.create_connection((host, int(port)), timeout=30) as sock:  # sends it all, leaves before the answer
        body = json.dumps({"inputs": ["走了"] * 50}).encode()
        sock.sendall(b"POST /models/cls/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    good(server)


@slow
def test_a_burst_past_max_queue_gets_429_with_retry_after_counted_and_the_rest_are_answered(served_runs):
    best = os.path.join(served_runs["cls"], "best")
    with live_server({"cls": best}, max_queue=2, max_batch_size=64) as (base, app):
        batcher, gate, held = app.state.models.loaded["cls"].batcher, threading.Event(), threading.Event()
        run_batch = batcher.run_batch

        def hold(payloads):  # the first batch waits for the gate
            held.set()
            return gate.wait(30) and run_batch(payloads)

        batcher.run_batch, results = hold, []

        def client(i):
            results.append(request(base, "POST", "/predict", {"inputs": [f"文本 {i}"]}))

        clients = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        clients[0].start()  # alone, so that the held batch is this one request whatever the timing
        assert held.wait(30)
        for c in clients[1:]:
            c.start()
        ends = time.monotonic() + 30
        while len(results) < 5 and time.monotonic() < ends:  # one runs, two wait, five are refused at once
            time.sleep(0.05)
        gate.set()
        for c in clients:
            c.join(60)
        codes = sorted(status for status, _, _ in results)
        assert codes == [200] * 3 + [429] * 5, codes
        for headers, answer in [(headers, answer) for status, headers, answer in results if status == 429]:
            assert headers["retry-after"] == "1"
            assert answer == {"error": "model 'cls' is busy: 2 requests are waiting (max_queue 2); retry later"}
        assert 'appzoo_refused_total{model="cls",reason="queue_full"} 5.0' in request(base, "GET", "/metrics")[2]
        good(base)


@slow
def test_a_bug_of_ours_is_a_500_in_one_line_and_the_server_goes_on(served_runs, monkeypatch):
    with live_server({"cls": os.path.join(served_runs["cls"], "best")}) as (base, app):
        def broken(payloads):
            raise RuntimeError("boom\nsecond line")

        monkeypatch.setattr(app.state.models.loaded["cls"].batcher, "run_batch", broken)
        status, _, answer = request(base, "POST", "/predict", {"inputs": ["x"]})
        assert (status, answer) == (500, {"error": "internal error: RuntimeError: boom"})
        monkeypatch.undo()
        good(base)


def test_the_listening_socket_is_tcp_so_answers_go_out_without_a_delayed_ack_stall():
    from appzoo.serve.server import listen

    sock = listen("127.0.0.1", 0)
    try:  # asyncio sets TCP_NODELAY on the connections it accepts only for this protocol
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_an_address_that_is_not_this_machines_blames_serve_host_not_the_port():
    from appzoo.errors import ConfigError
    from appzoo.serve.server import listen

    with pytest.raises(ConfigError, match=r"^serve\.host: cannot listen on 8\.8\.8\.8:0 \(Cannot assign requested "
                                          r"address\): not an address of this machine; use 127\.0\.0\.1, 0\.0\.0\.0"):
        listen("8.8.8.8", 0)
    with pytest.raises(ConfigError, match=r"^serve\.host: 'no-such-host\.invalid' is not an address"):
        listen("no-such-host.invalid", 0)


def test_more_connections_than_file_descriptors_is_refused_at_start():
    from appzoo.errors import ConfigError
    from appzoo.serve.server import FD_RESERVE, check_file_descriptors

    assert check_file_descriptors(1000, limits=(4096, 4096)) == 4096  # room already: nothing changes
    assert check_file_descriptors(1000, limits=(1024, 4096)) == 1000 + FD_RESERVE  # the soft limit is raised
    with pytest.raises(ConfigError, match=r"^serve\.max_connections: 1000 connections and 256 other files need "
                                          r"1256 file descriptors, and this process may open 1024 at most "
                                          r"\(ulimit -Hn\); set serve\.max_connections to 768 or less"):
        check_file_descriptors(1000, limits=(1024, 1024))


# ---- the HTTP layer: what is refused before any route (no model needed) ----------------------
@pytest.fixture(scope="module")
def bare():
    """A server whose model never loads (the HTTP layer answers the same), with 1 s timeouts (2 s: a body's)."""
    with live_server({"cls": "/nowhere/best"}, load=False, read_timeout_s=1, idle_timeout_s=1,
                     body_timeout_s=2, allowed_hosts=["*"]) as (base, _):  # raw HTTP, Host: x
        yield base


def exchange(base, raw, timeout=10):
    """What the server sends back on a connection given ``raw`` (then left open) until it closes it,
    and how long that took."""
    host, port = base.split("//")[1].split(":")
    started, reply = time.monotonic(), b""
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(raw)
        while True:
            data = sock.recv(65536)
            if not data:
                return reply, time.monotonic() - started
            reply += data


def unparsed(base, code):
    text = request(base, "GET", "/metrics")[2]
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("appzoo_requests_total{") and 'route="unparsed"' in line and f'code="{code}"' in line)


LIVE = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n"


@pytest.mark.parametrize("raw, status, message", [
    (b"GARBAGE\r\n\r\n", 400, "not a valid HTTP/1.1 request (Invalid method encountered)"),
    (b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400,
     "not a valid HTTP/1.1 request (Invalid character in Content-Length)"),
    (b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
     "not a valid HTTP/1.1 request (Transfer-Encoding can't be present with Content-Length)"),
    (b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"zz\r\n", 400, "not a valid HTTP/1.1 request (Invalid character in chunk size)"),  # the route was reading it
    (LIVE + b"X-A: a\x01b\r\n\r\n", 400, "not a valid HTTP/1.1 request (Invalid header value char)"),
    (LIVE + b"X-Long: " + b"a" * 100_000 + b"\r\n\r\n", 431,
     "request line and headers over max_header_bytes=16384 bytes"),
    (b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n", 431, "request line and headers over max_header_bytes=16384 bytes"),
    (LIVE + b"".join(b"X-%d: a\r\n" % i for i in range(5000)) + b"\r\n", 431,
     "more than max_headers=100 header fields"),
    (LIVE + b"X-Half: a", 408, "the request line and headers did not arrive within read_timeout_s=1 s")],
    ids=["not HTTP", "a bad Content-Length", "two framings", "a bad chunk size", "a control character", "a 100 kB header", "a 20 kB URL", "5000 headers",
         "half a header"])
def test_the_http_layer_refuses_in_one_json_line_counts_it_and_closes(bare, raw, status, message):
    before = unparsed(bare, status)
    reply, took = exchange(bare, raw)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), reply[:200]
    for field in (b"content-type: application/json", b"connection: close", b"x-content-type-options: nosniff"):
        assert field in head.lower().split(b"\r\n"), (field, head)
    assert json.loads(body) == {"error": message}
    assert took < 3  # answered at once (the half header: after read_timeout_s=1), then closed
    assert unparsed(bare, status) == before + 1
    assert request(bare, "GET", "/v2/health/live")[0] == 200


def test_a_slow_header_is_cut_at_read_timeout_s_even_while_bytes_trickle_in(bare):
    host, port = bare.split("//")[1].split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(LIVE)
        reply = b""
        for _ in range(20):  # a byte every 0.2 s: never idle, never complete (slowloris)
            try:
                sock.sendall(b"X")
            except OSError:
                break
            time.sleep(0.2)
            sock.setblocking(False)
            try:
                reply += sock.recv(4096)
            except BlockingIOError:
                pass
            finally:
                sock.setblocking(True)
            if reply:
                break
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:80]
    assert time.monotonic() - started < 2.5


def test_a_silent_connection_is_closed_after_idle_timeout_s_and_so_is_a_kept_alive_one(bare):
    reply, took = exchange(bare, b"")
    assert reply == b"" and 0.8 < took < 2.5
    reply, took = exchange(bare, LIVE + b"\r\n")  # answered, then kept alive: closed once idle for 1 s
    assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(b'{"live":true}') and 0.8 < took < 2.5


def test_a_connection_over_max_connections_gets_503_and_the_others_are_served():
    with live_server({"cls": "/nowhere/best"}, load=False, max_connections=2, idle_timeout_s=5,
                     allowed_hosts=["*"]) as (base, _):  # raw HTTP, Host: x
        host, port = base.split("//")[1].split(":")
        held = [socket.create_connection((host, int(port)), timeout=10) for _ in range(2)]
        try:
            time.sleep(0.2)  # both accepted
            reply, _ = exchange(base, LIVE + b"\r\n")
            head, _, body = reply.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in head.lower()
            assert json.loads(body) == {"error": "the server holds max_connections=2 connections; retry later"}
            held[0].sendall(LIVE + b"\r\n")  # one that was let in is served
            assert held[0].recv(4096).startswith(b"HTTP/1.1 200 ")
        finally:
            for sock in held:
                sock.close()


def test_the_try_it_page_forbids_inline_script_framing_and_sniffing(bare):
    status, headers, page = request(bare, "GET", "/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    policy = dict(p.strip().split(" ", 1) for p in headers["content-security-policy"].split(";"))
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"  # no 'unsafe-inline'
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in page and "<style>" not in page and " style=" not in page
    for path, kind in (("/static/page.js", "text/javascript"), ("/static/page.css", "text/css")):
        status, headers, _ = request(bare, "GET", path)
        assert status == 200 and headers["content-type"].startswith(kind) and headers["x-content-type-options"] == "nosniff"
    for path in ("/v2/health/live", "/v2/health/ready", "/nope", "/metrics"):  # every answer: nosniff
        assert request(bare, "GET", path)[1]["x-content-type-options"] == "nosniff", path
