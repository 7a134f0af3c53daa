"""Hostile requests against a live server on 127.0.0.1: each gets its status and a one-line
``{"error": ...}``, is counted in /metrics, and the server answers a good request afterwards."""
import json
import os
import re
import socket
import threading
import time

import pytest

from serving import live_server, request

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("served")]

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
    ("a blank text", "POST", "/models/cls/predict", J, {"inputs": [" \t\n"]}, 422, r'got " \\t\\n"$'),
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
    with live_server({k: os.path.join(v, "best") for k, v in specs.items()}, max_body_bytes=1_100_000) as (base, _):
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


def test_a_burst_past_max_queue_gets_503_with_retry_after_and_the_rest_are_answered(served_runs):
    best = os.path.join(served_runs["cls"], "best")
    with live_server({"cls": best}, max_queue=2, max_batch_size=64, max_wait_ms=1000) as (base, _):
        results = []

        def client(i):
            results.append(request(base, "POST", "/predict", {"inputs": [f"文本 {i}"]}))

        clients = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(60)
        codes = sorted(status for status, _, _ in results)
        refused = [(headers, answer) for status, headers, answer in results if status == 503]
        assert codes.count(200) >= 2 and codes.count(503) >= 1 and set(codes) == {200, 503}, codes
        for headers, answer in refused:
            assert headers["retry-after"] == "1"
            assert re.fullmatch(r"model 'cls' is busy: 2 requests are waiting \(max_queue 2\); retry later",
                                answer["error"]), answer
        good(base)


@pytest.mark.parametrize("raw, answers", [
    (b"GARBAGE\r\n\r\n", (b"HTTP/1.1 400",)),
    (b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", (b"HTTP/1.1 400",)),
    # h11 refuses a header this long; httptools (used when installed) takes it: either is fine
    (b"GET / HTTP/1.1\r\n" + b"X-Long: " + b"a" * 100_000 + b"\r\n\r\n", (b"HTTP/1.1 4", b"HTTP/1.1 200"))],
    ids=["not HTTP", "a bad Content-Length", "a 100 kB header"])
def test_requests_that_are_not_http_are_refused_by_the_http_layer_and_the_server_stays_up(server, raw, answers):
    host, port = server.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        try:
            sock.sendall(raw)
            reply = sock.recv(4096)
        except OSError:  # closed without an answer
            reply = b""
    assert reply == b"" or reply.startswith(answers), reply[:80]
    good(server)


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
