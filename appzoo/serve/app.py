"""The HTTP routes of a server: KServe's Open Inference Protocol (V2, its
codec in :mod:`appzoo.serve.v2`), a plain ``/predict`` answering the rows of ``predictions.jsonl``, OpenAI's
``/v1/embeddings`` (its codec in :mod:`appzoo.serve.embeddings`), Prometheus metrics and the try-it page.

Every answer that is not a success is ``{"error": "<one line>"}`` with a 4xx
(the request's fault; 429: the model's queue is full, with ``Retry-After``)
or a 5xx (503: not ready, with ``Retry-After``; 504: no answer within the
request's deadline); a bad request never stops the server. The body is read
and checked here (size, content type, UTF-8, JSON, fields) rather than by
FastAPI's models, so every message names the field and what is accepted.
"""
import asyncio
import json
import os
import threading
import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from appzoo.errors import UserError, first_line
from appzoo.serve import auth, embeddings, v2
from appzoo.serve import deadline as deadlines, repository
from appzoo.serve.batcher import DeadlineExceeded, QueueFull, Stopped
from appzoo.serve.failure import Failure, clip
from appzoo.serve.metrics import Metrics
from appzoo.serve.models import ServedModel

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
#: the try-it page and its files, each served with its type (the page holds no inline script or style)
ASSETS = {"/": ("index.html", "text/html; charset=utf-8"), "/static/page.js": ("page.js", "text/javascript"),
          "/static/page.css": ("page.css", "text/css")}
#: the page's own files only (no inline script or style, no other origin), never inside a frame
PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                                           "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                           "form-action 'none'; frame-ancestors 'none'",
                "X-Frame-Options": "DENY"}
RETRY_AFTER = "1"  # seconds: a batch takes milliseconds to a second
NOSNIFF = (b"x-content-type-options", b"nosniff")
CLOSE = {"Connection": "close"}  # an answer sent before the body was read: the rest of it is not parsed


class Models:
    """The models of one server, loaded on a thread of their own so that
    liveness answers at once and readiness turns true when all are warm."""

    def __init__(self, specs, config, threads, metrics):
        self.specs, self.config, self.threads, self.metrics = dict(specs), config, threads, metrics
        self.loaded = {}
        self.error = None  # the one line of a model that could not be loaded (with its folder: for stderr)
        self.ready = threading.Event()
        self.loader = None  # the thread that loads them (create_app's lifespan)
        self.reloading = threading.Lock()  # one hot reload at a time (appzoo/serve/repository.py)
        self.reload_roots = {name: repository.reload_root(config, best) for name, best in self.specs.items()}

    def build(self, name, best):
        """Model ``name`` loaded from ``best`` and warmed up, its batcher counted in the metrics."""
        sizes, tokens, refused = (self.metrics.batch_size.labels(name), self.metrics.batch_tokens.labels(name),
                                  self.metrics.refused)

        def on_batch(size, padded):
            sizes.observe(size)
            tokens.inc(padded)

        model = ServedModel(name, best, self.config, self.threads, on_batch=on_batch,
                            on_refused=lambda reason: refused.labels(name, reason).inc())
        self.metrics.load_seconds.labels(name).set(model.load_seconds)
        return model

    def load(self, on_error=None):
        try:
            for name, best in self.specs.items():
                self.loaded[name] = self.build(name, best)
        except UserError as e:
            self.error = f"model {name!r} ({best}): {e}"
        except Exception as e:  # noqa: BLE001 - a broken model folder is the user's to fix; say which
            self.error = f"model {name!r} ({best}) could not be loaded: {type(e).__name__}: {first_line(e)}"
        if self.error is not None:
            if on_error is not None:
                on_error(self.error)
            return
        self.metrics.ready.set(1)
        self.ready.set()

    def get(self, name):
        self.check_name(name)
        if not self.ready.is_set():
            raise Failure(503, f"model {name!r} is loading; retry once /v2/health/ready answers 200",
                          {"Retry-After": RETRY_AFTER})
        return self.loaded[name]

    def public(self, message):
        """``message`` with each model's run folder named by the model (``cls/best/...``): an answer
        never tells where the server keeps its files."""
        for name, best in self.specs.items():
            for folder in {os.path.dirname(os.path.abspath(best)), os.path.dirname(os.path.normpath(best))}:
                if folder and folder not in (".", os.sep):
                    message = message.replace(folder + os.sep, name + "/").replace(folder, name)
        return message

    def check_name(self, name):
        """Failure 404 for a name no model of this server has."""
        if name not in self.specs:
            raise Failure(404, f"no model named {name!r} (models: {', '.join(self.specs)})")

    def stop(self, timeout):
        for model in self.loaded.values():
            model.stop(timeout)


def create_app(specs, config, threads, *, on_load_error=None, load=True, api_keys=(), allowed_hosts=("*",)):
    """The app serving ``specs`` (``{name: best folder}``) with the ``serve``
    settings ``config``; ``load``: start loading the models on a thread
    when the app starts (else call ``app.state.models.load()``); ``api_keys``: the
    keys a request must carry one of (:func:`appzoo.serve.auth.load_keys`; none: no key needed);
    ``allowed_hosts``: the names a request's Host header may give (:func:`appzoo.serve.auth.allowed_hosts`)."""
    metrics = Metrics()
    models = Models(specs, config, threads, metrics)

    async def lifespan(app):
        if load:
            models.loader = threading.Thread(target=models.load, args=(on_load_error,), name="load-models",
                                             daemon=True)
            models.loader.start()
        yield
        await run_in_threadpool(models.stop, config.drain_timeout_s)  # answer what is queued, then end

    app = FastAPI(title="appzoo", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.models, app.state.metrics = models, metrics
    app.add_middleware(auth.RequireKey, keys=api_keys, metrics=metrics)  # inside _Observe, which counts its 401s
    app.add_middleware(_Observe, metrics=metrics)
    app.add_middleware(auth.AllowedHosts, hosts=allowed_hosts)  # outermost: a misdirected request goes no further
    _answer_errors_in_one_line(app, models)
    _page_routes(app, models)
    _v2_routes(app, models, config)
    _plain_routes(app, models, config, metrics)
    _openai_routes(app, models, config)
    _repository_routes(app, models, config, keys=bool(api_keys))
    return app


def _answer_errors_in_one_line(app, models):
    """Every refusal, a missing route and a bug of ours as ``{"error": one line}`` with its status."""
    def _error(status, message, headers=None):
        return JSONResponse({"error": models.public(message)}, status_code=status, headers=headers or None)

    @app.exception_handler(Failure)
    async def failure(request, error):
        return _error(error.status, error.message, error.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, error):  # no route (404), a wrong method (405)
        if error.status_code == 405:
            allowed = error.headers.get("Allow", "") if error.headers else ""
            message = f"method {request.method} is not allowed on {request.url.path} (allowed: {allowed})"
        elif error.status_code == 404:
            message = f"no route {request.method} {request.url.path} (see / for the routes)"
        else:
            message = str(error.detail)
        return _error(error.status_code, message, error.headers)

    @app.exception_handler(Exception)
    async def internal(request, error):  # a bug of ours: say so in one line, stay up
        return _error(500, f"internal error: {type(error).__name__}: {first_line(error)}")


def _page_routes(app, models):
    """The try-it page's files and the list of models it reads."""
    def asset(path):
        name, media_type = ASSETS[path]
        with open(os.path.join(STATIC, name), "rb") as f:
            content = f.read()
        return lambda: Response(content, media_type=media_type, headers=PAGE_HEADERS)

    for path in ASSETS:
        app.add_api_route(path, asset(path), methods=["GET"], include_in_schema=False)

    @app.get("/models")
    def list_models():
        return {"ready": models.ready.is_set(),
                "models": [models.loaded[n].describe() if n in models.loaded else {"name": n, "loading": True}
                           for n in models.specs]}


def _v2_routes(app, models, config):
    """KServe's V2 inference protocol: server and model metadata, health, infer (the codec: serve/v2.py)."""
    @app.get("/v2")
    def server_metadata():
        return {"name": "appzoo", "version": _version(), "extensions": ["model_repository"]}

    @app.get("/v2/health/live")
    def live():
        return {"live": True}

    @app.get("/v2/health/ready")
    def ready():
        return _readiness(models.ready.is_set(), models.error and models.public(models.error))

    @app.get("/v2/models/{name}")
    def model_metadata(name: str):
        return v2.metadata(models.get(name))

    @app.get("/v2/models/{name}/ready")
    def model_ready(name: str):
        models.check_name(name)
        return _readiness(name in models.loaded, models.error and models.public(models.error), name=name)

    @app.post("/v2/models/{name}/infer")
    async def infer(name: str, request: Request):
        model, deadline = models.get(name), deadlines.of_request(request.headers, config)
        body = await _read_json(request, config.max_body_bytes)
        request_id, inputs = v2.inputs(body, model)
        rows, notes = await _predict(model, inputs, deadline)
        answer = {"model_name": name, "model_version": "1", "outputs": v2.outputs(rows, model)}
        if request_id is not None:
            answer["id"] = request_id
        if notes:
            answer["parameters"] = {"notes": notes}
        return answer


def _plain_routes(app, models, config, metrics):
    """``/predict`` (the rows predictions.jsonl would hold), ``/models/{name}/predict`` and ``/metrics``."""
    @app.post("/predict")
    async def predict(request: Request):
        deadline = deadlines.of_request(request.headers, config)
        body = await _read_json(request, config.max_body_bytes)
        name = body.get("model") if isinstance(body, dict) else None
        if name is None:
            if len(models.specs) > 1:
                raise Failure(422, f"model: required with several models (one of: {', '.join(models.specs)}), "
                                   f"or POST /models/NAME/predict")
            name = next(iter(models.specs))
        elif not isinstance(name, str):
            raise Failure(422, f"model: expected a model name (a string), got {clip(name)}")
        return await _plain(models.get(name), body, ("inputs", "model"), deadline)

    @app.post("/models/{name}/predict")
    async def predict_one(name: str, request: Request):
        model, deadline = models.get(name), deadlines.of_request(request.headers, config)
        return await _plain(model, await _read_json(request, config.max_body_bytes), ("inputs",), deadline)

    @app.get("/metrics")
    def prometheus():
        content, media_type = metrics.render(models.loaded)
        return Response(content, media_type=media_type)


def _openai_routes(app, models, config):
    """OpenAI's ``POST /v1/embeddings``: the vectors of texts, for the models that embed them."""
    @app.post("/v1/embeddings")
    async def embed(request: Request):
        name, texts, encoding, dimensions = embeddings.request(await _read_json(request, config.max_body_bytes),
                                                               list(models.specs))
        model = models.get(name)
        if model.embedding_size is None:
            embeddings.refuse(name, models.loaded)
        embeddings.check(model, dimensions)
        _check_count(model, "input", texts, "texts")
        deadline = deadlines.of_request(request.headers, config)  # 400 for a bad X-Request-Timeout
        try:
            with model.in_flight():  # a reload retires this model once its requests are answered
                embedded, notes = await asyncio.wait_for(run_in_threadpool(model.embed, texts, deadline.ends),
                                                         deadline.left())
        except UserError as e:
            raise Failure(422, str(e)) from None
        except QueueFull as e:
            raise _busy(model, e) from None
        except (DeadlineExceeded, asyncio.TimeoutError):  # still under way: its answer is not waited for
            model.on_refused("deadline")
            raise deadline.missed(name) from None
        answer = embeddings.answer(name, embedded, encoding)
        if notes:
            answer["notes"] = notes
        return JSONResponse(answer)  # not FastAPI's encoder, which would walk every float of every vector


def _repository_routes(app, models, config, keys):
    """KServe's model repository extension: load a model's ``best/`` again, or another one, in place of the
    one served (appzoo/serve/repository.py). It changes what the server runs, so it takes a JSON body only (a
    page of another site cannot send one without the browser asking first) and, on a server without API keys,
    a request from this machine only."""
    @app.post("/v2/repository/models/{name}/load")
    async def load(name: str, request: Request):
        models.check_name(name)
        repository.check_caller(request.headers.get("content-type", ""), request.client and request.client.host,
                                keys)
        empty = request.headers.get("content-length", "0") == "0" and "transfer-encoding" not in request.headers
        body = {} if empty else await _read_json(request, config.max_body_bytes)
        best = repository.requested_best(body)
        return await run_in_threadpool(repository.reload, models, name, best)


def _version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("appzoo")
    except PackageNotFoundError:  # run from a checkout
        return "dev"


# ---- answering -----------------------------------------------------------------------
def _readiness(is_ready, error, name=None):
    body = {"ready": is_ready} if name is None else {"name": name, "ready": is_ready}
    if is_ready:
        return body
    if error:
        body["error"] = error
    return JSONResponse(body, status_code=503, headers={"Retry-After": RETRY_AFTER})


async def _plain(model, body, accepted, deadline=None):
    """``{"model", "predictions": rows, "notes"?}`` for ``/predict``."""
    inputs = _field(body, "inputs", accepted)
    rows, notes = await _predict(model, inputs, deadline)
    answer = {"model": model.name, "predictions": rows}
    if notes:
        answer["notes"] = notes
    return answer


async def _predict(model, inputs, deadline=None):
    """The rows of one request's inputs, batched with other requests', answered by ``deadline``
    (:class:`~appzoo.serve.deadline.Deadline`; None: whenever) or refused with 504."""
    if not inputs:
        raise Failure(422, "inputs: empty list; give at least one input")
    _check_count(model, "inputs", inputs, "inputs")
    try:  # model.prepare refuses what no reader should see (appzoo.inference.predictor.check_inputs)
        with model.in_flight():
            prepared, notes = await run_in_threadpool(model.prepare, inputs)
            left = None if deadline is None else deadline.left()
            if left is not None and left <= 0:
                raise DeadlineExceeded("prepared too late")
            future = model.batcher.submit(prepared, len(prepared.examples), prepared.longest(),
                                          deadline and deadline.ends)
            return await asyncio.wait_for(asyncio.wrap_future(future), left), notes
    except Stopped:  # a reload replaced the model since this request took it: the new one answers
        if model.replaced_by is None:
            raise Failure(503, f"model {model.name!r} is stopping; retry on the next server",
                          {"Retry-After": RETRY_AFTER}) from None
        return await _predict(model.replaced_by, inputs, deadline)
    except UserError as e:
        raise Failure(422, str(e)) from None
    except QueueFull as e:
        raise _busy(model, e) from None
    except (DeadlineExceeded, asyncio.TimeoutError):  # dropped from the queue, or still under way: not waited for
        model.on_refused("deadline")
        raise deadline.missed(model.name) from None
    except Exception as e:  # noqa: BLE001 - a bug of ours: a 500 here keeps the connection (the app-level
        # handler's answer is followed by uvicorn closing it and logging a traceback)
        raise Failure(500, f"internal error: {type(e).__name__}: {first_line(e)}") from None


def _check_count(model, field, inputs, noun):
    """Failure 422 for a request of more than ``max_request_inputs`` inputs (its ``field``, counted as ``noun``)."""
    limit = model.config.max_request_inputs
    if len(inputs) > limit:
        raise Failure(422, f"{field}: {len(inputs)} {noun}, more than max_request_inputs={limit} in one request; "
                           f"send them in several requests")


def _busy(model, error):
    """The 429 of a request ``model``'s full queue refused, counted in ``appzoo_refused_total``."""
    model.on_refused("queue_full")
    return Failure(429, f"model {model.name!r} is busy: {error}; retry later", {"Retry-After": RETRY_AFTER})


def _field(body, name, accepted):
    """``body[name]``, a list, after checking ``body`` holds only ``accepted`` fields."""
    if not isinstance(body, dict):
        raise Failure(422, f"body: expected a JSON object like {{\"inputs\": [...]}}, got {type(body).__name__}")
    unknown = [k for k in body if k not in accepted]
    if unknown:
        raise Failure(422, f"body: unknown field {unknown[0]!r} (accepted: {', '.join(accepted)})")
    if name not in body:
        raise Failure(422, f"body: missing field {name!r} (a list of inputs)")
    value = body[name]
    if not isinstance(value, list):
        raise Failure(422, f"{name}: expected a list of inputs, got {type(value).__name__} {clip(value)}")
    return value


async def _read_json(request, limit):
    """The request's JSON body; Failure for a wrong content type (415), a body
    over ``limit`` bytes (413), bytes that are not UTF-8 or JSON (400)."""
    content_type = request.headers.get("content-type")
    media, _, params = (content_type or "").partition(";")
    media = media.strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise Failure(415, f"Content-Type: expected application/json, got {content_type or 'none'}")
    charset = params.strip().lower().partition("charset=")[2].strip('" ')
    if charset and charset not in ("utf-8", "utf8"):
        raise Failure(415, f"Content-Type: charset {charset!r} is not accepted (the body must be UTF-8)")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Failure(413, f"body: {declared} bytes is over max_body_bytes={limit}", CLOSE)
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Failure(413, f"body: over max_body_bytes={limit} bytes", CLOSE)
            chunks.append(chunk)
    except ClientDisconnect:
        raise Failure(499, "the client closed the connection before sending the whole body") from None
    raw = b"".join(chunks)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise Failure(400, f"body: not valid UTF-8 (byte 0x{raw[e.start]:02x} at position {e.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise Failure(400, f"body: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except ValueError as e:  # NaN, Infinity; an integer of more than 4300 digits
        raise Failure(400, f"body: not valid JSON ({first_line(e)})") from None
    except RecursionError:
        raise Failure(400, "body: JSON nested too deeply") from None


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _no_duplicate_keys(pairs):
    """A JSON object as a dict; ValueError for a key given twice in it, at any depth (``json`` would keep
    the last one silently, and a proxy or a log that keeps the first one would see another request)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {clip(key)} appears twice in one object; give each key once")
        out[key] = value
    return out


# ---- observing every request ---------------------------------------------------------
class _Observe:
    """ASGI middleware: each HTTP request's route template, status and time into the metrics, and
    ``X-Content-Type-Options: nosniff`` on every answer (a browser never runs a JSON answer as a script)."""

    def __init__(self, app, metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.monotonic(), [500]

        async def observed_send(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), NOSNIFF]}
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            route = getattr(scope.get("route"), "path", None) or scope.get(auth.SCOPE_KEY, "unmatched")
            self.metrics.observe(route, scope.get("method", ""), status[0], time.monotonic() - started)
