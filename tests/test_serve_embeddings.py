"""``POST /v1/embeddings``: OpenAI's official client against a live server on 127.0.0.1 gets the
Predictor's own vectors (a siamese matcher's cosine is its score), base64 as float32 little-endian,
and every refusal in one line."""
import base64
import os
import time

import numpy as np
import pytest

from serving import live_server, request

openai = pytest.importorskip("openai")  # requirements.txt installs it (tests/required_skips.py)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("served")]
TEXTS = ["今天天气很好", "明天会下雨吗", "银行股集体上涨", "今天天气很好"]


@pytest.fixture(scope="module")
def served(served_runs):
    specs = {name: os.path.join(served_runs[name], "best") for name in ("pairwise", "cls", "pointwise", "ner_crf")}
    with live_server(specs, engine="onnxruntime", api_keys=["k-1"]) as (base, app):
        yield base, app


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served[0] + "/v1", api_key="k-1", max_retries=0, timeout=60)


def predictor(app, name):
    return app.state.models.loaded[name].predictor


def cosine(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", ["pairwise", "cls"])
def test_the_openai_client_gets_the_predictors_own_vectors_as_floats_and_base64(served, client, name):
    expected = predictor(served[1], name).embed(TEXTS)
    for encoding in ("float", "base64", None):  # None: the client's own default (base64, which it decodes; asked
        options = {} if encoding is None else {"encoding_format": encoding}  # for, base64 is left to the caller)
        answer = client.embeddings.create(model=name, input=TEXTS, **options)
        assert answer.model == name and answer.object == "list"
        assert [d.index for d in answer.data] == [0, 1, 2, 3]
        got = np.array([np.frombuffer(base64.b64decode(d.embedding), "<f4") if encoding == "base64" else d.embedding
                        for d in answer.data], dtype="float32")
        assert got.shape == expected.vectors.shape
        np.testing.assert_allclose(got, expected.vectors, rtol=0, atol=1e-6)
        assert all(cosine(g, e) == pytest.approx(1, abs=1e-6) for g, e in zip(got, expected.vectors))
        assert answer.usage.prompt_tokens == answer.usage.total_tokens == sum(expected.tokens) > len(TEXTS)
    one = client.embeddings.create(model=name, input=TEXTS[2], encoding_format="float", user="someone")
    assert len(one.data) == 1
    np.testing.assert_allclose(one.data[0].embedding, expected.vectors[2], atol=1e-6)


def test_a_siamese_matchers_cosine_of_two_embeddings_is_its_score(served, client):
    answer = client.embeddings.create(model="pairwise", input=TEXTS[:3], encoding_format="float")
    vectors = [np.array(d.embedding) for d in answer.data]
    pairs = [[TEXTS[0], TEXTS[1]], [TEXTS[0], TEXTS[2]], [TEXTS[1], TEXTS[2]]]
    scores = [row["score"] for row in predictor(served[1], "pairwise").predict(pairs)]  # the onnxruntime graph
    cosines = [cosine(vectors[0], vectors[1]), cosine(vectors[0], vectors[2]), cosine(vectors[1], vectors[2])]
    np.testing.assert_allclose(cosines, scores, atol=1e-4)
    assert len({round(s, 3) for s in scores}) == 3  # the pairs score differently: the check says something
    for v in vectors:  # similarity "cosine": the model's vectors are L2-normalised
        assert np.linalg.norm(v) == pytest.approx(1, abs=1e-5)


def test_base64_is_little_endian_float32_of_the_float_answer(served):
    base, headers = served[0], {"Authorization": "Bearer k-1"}
    floats = request(base, "POST", "/v1/embeddings", {"model": "cls", "input": TEXTS[:2]}, headers)
    packed = request(base, "POST", "/v1/embeddings", {"model": "cls", "input": TEXTS[:2], "encoding_format": "base64"},
                     headers)
    assert floats[0] == packed[0] == 200
    for f, p in zip(floats[2]["data"], packed[2]["data"]):
        decoded = np.frombuffer(base64.b64decode(p["embedding"]), dtype="<f4")
        assert decoded.tolist() == f["embedding"]  # the same float32 values, bit for bit
    assert floats[2]["usage"] == packed[2]["usage"]
    size = len(floats[2]["data"][0]["embedding"])
    models = {m["name"]: m for m in request(base, "GET", "/models", headers=headers)[2]["models"]}
    assert models["cls"]["embedding_size"] == size and models["ner_crf"]["embedding_size"] is None
    same = request(base, "POST", "/v1/embeddings", {"model": "cls", "input": "x", "dimensions": size}, headers)
    assert same[0] == 200 and len(same[2]["data"][0]["embedding"]) == size


@pytest.mark.parametrize("body, status, message", [
    ({"model": "ner_crf", "input": "x"}, 422,
     "model: 'ner_crf' (sequence_labeling) embeds no text on its own; models that do: pairwise, cls"),
    ({"model": "pointwise", "input": "x"}, 422,
     "model: 'pointwise' (text_matching) embeds no text on its own; models that do: pairwise, cls"),
    ({"model": "nope", "input": "x"}, 404, "no model named 'nope' (models: pairwise, cls, pointwise, ner_crf)"),
    ({"input": "x"}, 422, "body: missing field 'model' (one of: pairwise, cls, pointwise, ner_crf)"),
    ({"model": 3, "input": "x"}, 422,
     "model: expected a model name (one of: pairwise, cls, pointwise, ner_crf), got 3"),
    ({"model": "cls"}, 422, "body: missing field 'input' (a text, or a list of texts)"),
    ({"model": "cls", "input": []}, 422, "input: empty list; give at least one text"),
    ({"model": "cls", "input": [101, 102]}, 422, "input: token-id arrays are not accepted (the model's own tokenizer "
                                                 "reads the texts); send a text or a list of texts"),
    ({"model": "cls", "input": [[101, 102]]}, 422, "input: token-id arrays are not accepted (the model's own "
                                                   "tokenizer reads the texts); send a text or a list of texts"),
    ({"model": "cls", "input": ["a", None]}, 422, "input 1: expected a text, got NoneType null"),
    ({"model": "cls", "input": {"a": 1}}, 422, 'input: expected a text or a list of texts, got dict {"a": 1}'),
    ({"model": "cls", "input": ["a", ""]}, 422, "input 1: an empty text; expected a non-empty text"),
    ({"model": "cls", "input": ["a", "\u200b "]}, 422, 'input 1: "\\u200b " is blank (only whitespace and invisible '
                                                        'format characters such as U+200B); expected a non-empty text'),
    ({"model": "cls", "input": "x", "encoding_format": "int8"}, 422,
     "encoding_format: 'int8' is not accepted (accepted: float, base64)"),
    ({"model": "cls", "input": "x", "dimensions": 8}, 422,
     "dimensions: 8 is not supported: the model 'cls' gives vectors of 128 dimensions (leave dimensions out, or give "
     "128)"),
    ({"model": "cls", "input": "x", "dimensions": "8"}, 422, "dimensions: expected a positive integer, got '8'"),
    ({"model": "cls", "input": "x", "user": 5}, 422, "user: expected a string, got 5"),
    ({"model": "cls", "input": "x", "stream": True}, 422,
     "body: unknown field 'stream' (accepted: model, input, encoding_format, dimensions, user)"),
    (["x"], 422, "body: expected a JSON object like {\"model\": ..., \"input\": [...]}, got list"),
], ids=lambda v: str(v)[:40] if not isinstance(v, int) else None)
def test_a_bad_embeddings_request_is_refused_in_one_line(served, body, status, message):
    got = request(served[0], "POST", "/v1/embeddings", body, {"Authorization": "Bearer k-1"})
    assert (got[0], got[2]) == (status, {"error": message})


def test_the_openai_client_sees_the_one_line_and_too_many_texts_are_refused(served, client):
    with pytest.raises(openai.UnprocessableEntityError) as error:
        client.embeddings.create(model="ner_crf", input="x", encoding_format="float")
    assert error.value.status_code == 422
    assert error.value.body == "model: 'ner_crf' (sequence_labeling) embeds no text on its own; models that do: " \
                               "pairwise, cls"
    limit = served[1].state.models.loaded["cls"].config.max_request_inputs
    got = request(served[0], "POST", "/v1/embeddings", {"model": "cls", "input": ["a"] * (limit + 1)},
                  {"Authorization": "Bearer k-1"})
    assert got[2] == {"error": f"input: {limit + 1} texts, more than max_request_inputs={limit} in one request; "
                               f"send them in several requests"}


def test_embeddings_beside_predictions_on_the_dygraph_model_stay_the_predictors(served_runs):
    """The vectors run on the Paddle model on request threads while the batcher runs the same model (engine
    dygraph) for /predict: bounded concurrent traffic of both, every answer as the model alone gives it."""
    import concurrent.futures

    best = os.path.join(served_runs["cls"], "best")
    with live_server({"cls": best}, engine="dygraph", max_wait_ms=1) as (base, app):
        model = app.state.models.loaded["cls"]
        expected = model.predictor.embed(TEXTS).vectors
        rows = model.predictor.predict(TEXTS)

        def embed(_):
            got = request(base, "POST", "/v1/embeddings", {"model": "cls", "input": TEXTS})
            return np.array([d["embedding"] for d in got[2]["data"]], dtype="float32")

        def predict(_):
            return request(base, "POST", "/predict", {"inputs": TEXTS})[2]["predictions"]

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            vectors = list(pool.map(embed, range(12)))
            predictions = list(pool.map(predict, range(12)))
            mixed = [pool.submit(embed if i % 2 else predict, i) for i in range(12)]
            results = [f.result(timeout=120) for f in mixed]
        for got in vectors + results[1::2]:
            np.testing.assert_allclose(got, expected, atol=1e-5)
        for got in predictions + results[0::2]:
            assert [r["label"] for r in got] == [r["label"] for r in rows]


def test_embedding_requests_past_max_queue_get_429_in_one_line_counted(served_runs):
    import threading

    with live_server({"cls": os.path.join(served_runs["cls"], "best")}, engine="dygraph", max_queue=1) as (base, app):
        model, release = app.state.models.loaded["cls"], threading.Event()
        real = model.predictor.embed
        model.predictor.embed = lambda texts: release.wait(30) and real(texts)  # the first request holds the model
        first = []
        thread = threading.Thread(target=lambda: first.append(
            request(base, "POST", "/v1/embeddings", {"model": "cls", "input": ["a"]})))
        thread.start()
        deadline = time.monotonic() + 10
        while model._embeddings_waiting < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        status, headers, answer = request(base, "POST", "/v1/embeddings", {"model": "cls", "input": ["b"]})
        release.set()
        thread.join(30)
        assert (status, answer) == (429, {"error": "model 'cls' is busy: 1 embedding requests wait (max_queue=1); "
                                                   "retry later"})
        assert headers["retry-after"] == "1"
        assert first[0][0] == 200
        metrics = request(base, "GET", "/metrics")[2]
        assert 'appzoo_request_errors_total{code="429",route="/v1/embeddings"} 1.0' in metrics


def test_an_embeddings_request_keeps_its_x_request_timeout(served_runs):
    """Issue 42, item 18: a bad X-Request-Timeout is a 400 in one line; a request not answered within it a 504,
    counted, and the server answers the next one."""
    import threading

    with live_server({"cls": os.path.join(served_runs["cls"], "best")}, engine="dygraph") as (base, app):
        status, _, answer = request(base, "POST", "/v1/embeddings", {"model": "cls", "input": ["a"]},
                                    {"X-Request-Timeout": "soon"})
        assert (status, answer) == (400, {"error": "X-Request-Timeout: expected a number of seconds > 0, got 'soon'"})
        model, release = app.state.models.loaded["cls"], threading.Event()
        real = model.predictor.embed
        model.predictor.embed = lambda texts: release.wait(30) and real(texts)  # held until released
        status, _, answer = request(base, "POST", "/v1/embeddings", {"model": "cls", "input": ["a"]},
                                    {"X-Request-Timeout": "0.3"})
        release.set()
        assert (status, answer) == (504, {"error": "model 'cls': no answer within the request's timeout of 0.3 s "
                                                   "(X-Request-Timeout); retry later, or allow more time"})
        model.predictor.embed = real
        assert request(base, "POST", "/v1/embeddings", {"model": "cls", "input": ["a"]})[0] == 200
        metrics = request(base, "GET", "/metrics")[2]
        assert 'appzoo_request_errors_total{code="504",route="/v1/embeddings"} 1.0' in metrics


def test_a_classifiers_vector_is_the_one_its_classifier_reads(served):
    """The text classifier's served vector is its pooled text vector: its linear layer on it gives the logits."""
    import paddle

    from appzoo.data.encoding import encode_texts, pad

    predictor_ = predictor(served[1], "cls")
    vectors = predictor_.embed(TEXTS[:3]).vectors
    model = predictor_.model
    encoded = encode_texts(predictor_.tokenizer, TEXTS[:3], max_seq_len=predictor_.max_seq_len)
    with paddle.no_grad():
        logits = model(paddle.to_tensor(pad(encoded["input_ids"], predictor_.tokenizer.pad_token_id)),
                       paddle.to_tensor(pad(encoded["token_type_ids"], 0)))["logits"].numpy()
        again = model.classifier(paddle.to_tensor(vectors)).numpy()
    np.testing.assert_allclose(again, logits, atol=1e-4)
