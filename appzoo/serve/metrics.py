"""What ``GET /metrics`` reports, in the Prometheus text format (prometheus_client).

Each app has a registry of its own (two servers in one process, as in the
tests, do not mix their counts). Routes are labelled by their template
(``/v2/models/{name}/infer``), never by the raw path, so a client cannot
grow the label set; a path no route matches counts as ``unmatched``, and what
the HTTP layer refused before any route (appzoo/serve/protocol.py) as ``unparsed``, and a request refused
for its API key (appzoo/serve/auth.py) as ``unauthorized``.
"""
from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram,
                               disable_created_metrics, generate_latest)

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    def __init__(self):
        disable_created_metrics()  # the *_created series say only when a label first appeared
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("appzoo_requests", "HTTP requests answered, by route, method and status code",
                                ["route", "method", "code"], registry=r)
        self.errors = Counter("appzoo_request_errors", "HTTP requests answered with a 4xx or 5xx code (499: the "
                              "client left first), by route and code", ["route", "code"], registry=r)
        self.latency = Histogram("appzoo_request_seconds", "time from a request's arrival to its answer, by route",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.batch_size = Histogram("appzoo_batch_size", "inputs run together in one batch, by model", ["model"],
                                    buckets=BATCH_BUCKETS, registry=r)
        self.batch_tokens = Counter("appzoo_batch_tokens", "padded tokens run (each batch's longest input's tokens x "
                                    "its inputs: what the engine computed), by model", ["model"], registry=r)
        self.queue_depth = Gauge("appzoo_queue_depth", "requests waiting for a batch, by model", ["model"],
                                 registry=r)
        self.refused = Counter("appzoo_refused", "requests a model's batcher refused, by model and reason: "
                               "queue_full (answered 429), deadline (answered 504: no answer within the request's "
                               "timeout)", ["model", "reason"], registry=r)
        self.reloads = Counter("appzoo_reloads", "hot reloads of a model (POST /v2/repository/models/{name}/load or "
                               "SIGHUP), by model and outcome (ok, failed)", ["model", "outcome"], registry=r)
        self.load_seconds = Gauge("appzoo_model_load_seconds", "time to load and warm up each model", ["model"],
                                  registry=r)
        self.unknown_pieces = Gauge("appzoo_unknown_pieces", "pieces outside a pruned vocabulary "
                                    "(model.encoder.prune_vocab) read as <unk> since loading, by model", ["model"],
                                    registry=r)
        self.unauthorized = Counter("appzoo_unauthorized_requests", "requests refused 401 for their API key, by reason "
                                    "(missing: no 'Authorization: Bearer' header; wrong: a key not the server's)",
                                    ["reason"], registry=r)
        self.ready = Gauge("appzoo_ready", "1 once every model is loaded and warmed up", registry=r)

    def observe(self, route, method, code, seconds):
        self.requests.labels(route, method, str(code)).inc()
        if code >= 400:
            self.errors.labels(route, str(code)).inc()
        self.latency.labels(route).observe(seconds)

    def render(self, models):
        for name, model in models.items():
            self.queue_depth.labels(name).set(model.batcher.depth)
            unknown = getattr(model.predictor.tokenizer, "unknown_pieces", None)
            if unknown is not None:
                self.unknown_pieces.labels(name).set(unknown)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
