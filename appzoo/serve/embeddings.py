"""OpenAI's embeddings API codec (``POST /v1/embeddings``): a request's fields checked into texts, and a
model's vectors into OpenAI's answer, so that OpenAI's clients (the ``openai`` package, LangChain's
``OpenAIEmbeddings``, ...) can point their base URL at a server.

A request is ``{"model": NAME, "input": TEXT or [TEXT, ...], "encoding_format": "float" | "base64",
"user": ...}``; the answer ``{"object": "list", "data": [{"object": "embedding", "index": i, "embedding":
[...] or "<base64>"}], "model": NAME, "usage": {"prompt_tokens": n, "total_tokens": n}}``, base64 being
the little-endian float32 bytes, as OpenAI sends them. What OpenAI's API takes and this server does not
(token-id arrays, ``dimensions`` other than the model's own) is refused in one line.
"""
import base64

import numpy as np

from appzoo.serve.failure import Failure, clip

ACCEPTED = ("model", "input", "encoding_format", "dimensions", "user")
ENCODINGS = ("float", "base64")


def request(body, names):
    """``(model name, texts, encoding_format, dimensions)`` of a request body; Failure 422 naming the field
    that is wrong, 404 for a model ``names`` (the server's) lacks."""
    if not isinstance(body, dict):
        raise Failure(422, f"body: expected a JSON object like {{\"model\": ..., \"input\": [...]}}, got "
                           f"{type(body).__name__}")
    unknown = [k for k in body if k not in ACCEPTED]
    if unknown:
        raise Failure(422, f"body: unknown field {unknown[0]!r} (accepted: {', '.join(ACCEPTED)})")
    name = body.get("model")
    if not isinstance(name, str):
        raise Failure(422, f"model: expected a model name (one of: {', '.join(names)}), got {clip(name)}"
                      if "model" in body else f"body: missing field 'model' (one of: {', '.join(names)})")
    if name not in names:
        raise Failure(404, f"no model named {name!r} (models: {', '.join(names)})")
    encoding = body.get("encoding_format", "float")
    if encoding not in ENCODINGS:
        raise Failure(422, f"encoding_format: {clip(encoding)} is not accepted (accepted: {', '.join(ENCODINGS)})")
    dimensions = body.get("dimensions")
    if dimensions is not None and (not isinstance(dimensions, int) or isinstance(dimensions, bool)
                                   or dimensions < 1):
        raise Failure(422, f"dimensions: expected a positive integer, got {clip(dimensions)}")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise Failure(422, f"user: expected a string, got {clip(user)}")
    return name, _texts(body), encoding, dimensions


def _texts(body):
    if "input" not in body:
        raise Failure(422, "body: missing field 'input' (a text, or a list of texts)")
    value = body["input"]
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list):
        raise Failure(422, f"input: expected a text or a list of texts, got {type(value).__name__} {clip(value)}")
    if not texts:
        raise Failure(422, "input: empty list; give at least one text")
    for i, text in enumerate(texts):
        if isinstance(text, int) and not isinstance(text, bool) or (
                isinstance(text, list) and text and all(isinstance(t, int) for t in text)):
            raise Failure(422, "input: token-id arrays are not accepted (the model's own tokenizer reads the "
                               "texts); send a text or a list of texts")
        if not isinstance(text, str):
            raise Failure(422, f"input {i}: expected a text, got {type(text).__name__} {clip(text)}")
        if not text:
            raise Failure(422, f"input {i}: an empty text; expected a non-empty text")
    return texts


def check(model, dimensions):
    """Failure 422 unless ``model`` (a ServedModel) embeds texts and gives ``dimensions`` (None: its own)."""
    if dimensions is not None and dimensions != model.embedding_size:
        raise Failure(422, f"dimensions: {dimensions} is not supported: the model {model.name!r} gives vectors of "
                           f"{model.embedding_size} dimensions (leave dimensions out, or give "
                           f"{model.embedding_size})")


def refuse(name, models):
    """Failure 422 for the model ``name`` that embeds no text, naming those of ``models`` (loaded ServedModels by
    name) that do."""
    able = [n for n, m in models.items() if m.embedding_size is not None]
    raise Failure(422, f"model: {name!r} ({models[name].task}) embeds no text on its own; models that do: "
                       f"{', '.join(able) if able else 'none on this server (a text classifier or a siamese matcher)'}")


def answer(name, embedded, encoding):
    """OpenAI's answer for the :class:`~appzoo.inference.predictor.Embedded` texts of the model ``name``."""
    vectors = np.asarray(embedded.vectors, dtype="<f4")
    if encoding == "base64":
        data = [base64.b64encode(v.tobytes()).decode("ascii") for v in vectors]
    else:
        data = [v.tolist() for v in vectors]  # each float32 as the double that is exactly it
    tokens = int(sum(embedded.tokens))
    return {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(data)],
            "model": name, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
