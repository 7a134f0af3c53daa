"""Helpers of the serving tests: tiny trained runs of every task, and a live server on 127.0.0.1.

``LiveServer`` runs the real app under uvicorn on a thread of the test
process (no second paddle import), listening on a free loopback port.
"""
import contextlib
import http.client
import json
import threading
import time

import run_trainer

#: Steps of the served runs: at a high learning rate, enough for models that give varied labels (a model that
#: answers one label would make engine and precision comparisons say nothing; tests/test_precision.py checks).
STEPS = 30
FAST = ["--set", f"trainer.max_steps={STEPS}", "--set", "trainer.learning_rate=0.003", "--set", "trainer.progress_bar=false",
        "--set", "trainer.plots=false"]
#: a run of each task the server answers: name -> (example param file, its extra --set)
TASKS = {
    "cls": ("examples/cls_ernie_fc_ch.json", []),
    "multilabel": ("examples/cls_ernie_fc_multilabel.json",
                   ["--set", "dataset_reader.predict=data/cls_multilabel/test.tsv"]),  # it has no predict file
    "ner_softmax": ("examples/ner_ernie_fc_ch.json", []),
    "ner_crf": ("examples/ner_ernie_crf_ch.json", []),
    "pointwise": ("examples/mtch_ernie_fc_pointwise_ch.json", []),
    "pairwise": ("examples/mtch_ernie_pairwise_simnet_with_circle_loss.json", []),
    "inbatch": ("examples/mtch_ernie_siamese_infonce.json", []),
}


def train(root, names=tuple(TASKS)):
    """``{name: run folder}`` of a short run (:data:`STEPS`) of each task (train, eval, predict) under ``root``."""
    out = {}
    for name in names:
        example, extra = TASKS[name]
        out[name] = str(root / name)
        code = run_trainer.main(["--param_path", example, "--set", f"trainer.output_dir={out[name]}", *FAST,
                                 *extra])
        assert code == 0, (name, code)
    return out


@contextlib.contextmanager
def live_server(specs, *, load=True, api_keys=(), **settings):
    """``(base url, app)`` of a server of ``specs`` (``{name: best}``) with the ``serve`` ``settings``,
    ready (every model loaded; ``load=False``: none is loaded, the server answers as while loading);
    stopped, gracefully, at the end of the block. uvicorn runs with the settings the server's own.
    ``api_keys``: keys (strings) one of which every request but liveness and readiness must carry."""
    import uvicorn

    from appzoo.serve.app import create_app
    from appzoo.serve.auth import allowed_hosts, digest
    from appzoo.params.serve import ServeConfig
    from appzoo.serve.server import listen, uvicorn_config

    config = ServeConfig(**{"port": 0, "engine": "dygraph", **settings})
    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = create_app(specs, config, threads=1, load=load, api_keys=tuple(digest(k) for k in api_keys),
                     allowed_hosts=allowed_hosts(config))
    server = uvicorn.Server(uvicorn_config(app, config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        if load:
            wait_ready(f"http://127.0.0.1:{port}", app)
        else:
            wait_live(f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


def wait_live(base, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if request(base, "GET", "/v2/health/live")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{base} not live after {timeout} s")


def wait_ready(base, app=None, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if app is not None and app.state.models.error:
            raise AssertionError(app.state.models.error)
        try:
            status, _, _ = request(base, "GET", "/v2/health/ready")
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{base} not ready after {timeout} s")


def request(base, method, path, body=None, headers=None, timeout=60):
    """``(status, headers, parsed JSON or text)``; ``body``: bytes, or anything JSON (sent as application/json)."""
    host, port = base.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    headers = dict(headers or {})
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8")
        headers.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read()
    finally:
        conn.close()
    kind = response.getheader("content-type", "")
    data = json.loads(raw) if kind.startswith("application/json") else raw.decode("utf-8", "replace")
    return response.status, dict(response.getheaders()), data


def raw_inputs(rows):
    """What a user would send for the rows of a predictions.jsonl: texts, token lists or [text_a, text_b]."""
    if "tokens" in rows[0]:
        return [r["tokens"] for r in rows]
    if "text_a" in rows[0]:
        return [[r["text_a"], r["text_b"]] for r in rows]
    return [r["text"] for r in rows]


def assert_same_rows(got, expected, atol=1e-4):
    """Rows equal but for the gold labels; probabilities and scores within ``atol`` (a graph engine's float error)."""
    import numpy as np
    import pytest

    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        e = {k: v for k, v in e.items() if k != "gold"}
        assert set(g) == set(e)
        for key, value in e.items():
            if key == "probs":
                assert list(g[key]) == list(value)
                np.testing.assert_allclose(list(g[key].values()), list(value.values()), atol=atol)
            elif key == "score":
                assert g[key] == pytest.approx(value, abs=atol)
            else:  # label(s), tags, entity spans, the inputs
                assert g[key] == value, key
