"""Hot reload (KServe's model repository extension, and SIGHUP): a model's new ``best/`` is loaded beside
the one served and warmed up, then swapped in at once; the old one answers the requests it holds, then stops.

A ``best/`` that cannot be loaded changes nothing: the old model serves on, and the answer and the log
say why in one line.
"""
import os
import sys

from appzoo.errors import UserError, first_line
from appzoo.serve.failure import Failure, clip
from appzoo.store import bundle


def log_line(line):
    print(line, file=sys.stderr, flush=True)


def requested_best(body):
    """The ``best/`` folder a load request names (``{"parameters": {"best": "PATH/best"}}``, a path on the
    server's machine), or None (no body, or no ``best``): the folder the model was loaded from."""
    if not isinstance(body, dict):
        raise Failure(422, f"body: expected {{\"parameters\": {{\"best\": \"PATH/best\"}}}} or no body, got "
                           f"{clip(body)}")
    unknown = [k for k in body if k != "parameters"]
    if unknown:
        raise Failure(422, f"body: unknown field {unknown[0]!r} (accepted: parameters)")
    parameters = body.get("parameters", {})
    if not isinstance(parameters, dict):
        raise Failure(422, f"parameters: expected an object like {{\"best\": \"PATH/best\"}}, got {clip(parameters)}")
    unknown = [k for k in parameters if k != "best"]
    if unknown:
        raise Failure(422, f"parameters: unknown field {unknown[0]!r} (accepted: best)")
    best = parameters.get("best")
    if best is not None and not (isinstance(best, str) and best):
        raise Failure(422, f"parameters.best: expected the path of a best/ folder, got {clip(best)}")
    return best


LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def reload_root(config, served_best):
    """The folder a reload of the model served from ``served_best`` may load from: ``serve.reload_root``, else
    the run folder that ``best/`` is in (its real path: a link cannot lead a reload out of it)."""
    return os.path.realpath(config.reload_root or os.path.dirname(os.path.abspath(served_best)))


def check_caller(content_type, client, keys):
    """Failure unless a reload request comes with a JSON body (415) and, on a server without API keys
    (``keys`` false), from this machine (403): a browser sends a body-less or text/plain POST to any address
    without asking, and a page of another site must not change the model."""
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise Failure(415, "a reload takes a JSON body (Content-Type: application/json); {} loads the model's own "
                           "folder again")
    if not keys and client not in LOOPBACK:
        raise Failure(403, "a reload comes from this machine only on a server without API keys; start it with "
                           "--api-key (or serve.api_key_file) to reload from elsewhere")


def _check_inside(models, name, best):
    """Failure 403 for a ``best`` outside the model's reload root; nothing about the path is looked at but
    where it resolves to, so the answer says nothing about files outside the root."""
    root = models.reload_roots[name]
    if os.path.commonpath([root, os.path.realpath(best)]) != root:
        raise Failure(403, f"model {name!r} was not reloaded: parameters.best: a reload loads only a best/ under "
                           f"the folder named when the server started (serve.reload_root; by default the run "
                           f"folder of the model's best/); the old model serves on")


def reload(models, name, best=None, log=log_line):
    """Load ``best`` (None: the folder model ``name`` is served from) as model ``name`` of ``models`` beside
    the one served, swap it in, then retire the old one (its requests answered, its batcher stopped); the
    answer ``{"name", "loaded", "load_seconds"}``. Failure (the old model serves on, the line is logged): 409
    while another reload runs, 503 while the server loads, 422 for a folder that is not a sound ``best/``, 500
    for one that could not be loaded otherwise."""
    try:
        if not models.reloading.acquire(blocking=False):
            raise Failure(409, f"model {name!r} was not reloaded: another reload is under way; retry once it is done")
        try:
            if best is not None:
                _check_inside(models, name, best)
            return _swap(models, name, best or models.specs[name], log)
        finally:
            models.reloading.release()
    except Failure as e:
        models.metrics.reloads.labels(name, "failed").inc()
        log(f"error: {e.message}")
        raise


def _swap(models, name, best, log):
    old = models.get(name)  # 503 while the server loads
    try:
        bundle.check(best, "parameters.best")
        bundle.check_pickle(best, "parameters.best", models.config.trust_pickled_weights)
        new = models.build(name, best)
    except UserError as e:
        raise Failure(422, f"model {name!r} was not reloaded: {e}; the old model serves on") from None
    except Exception as e:  # noqa: BLE001 - any load error leaves the old model serving; say which
        raise Failure(500, f"model {name!r} was not reloaded: {best!r} could not be loaded: {type(e).__name__}: "
                           f"{first_line(e)}; the old model serves on") from None
    models.specs[name], models.loaded[name] = best, new  # new requests take the new model from here on
    old.replaced_by = new  # one that took the old model and found its batcher stopped goes to the new one
    models.metrics.reloads.labels(name, "ok").inc()
    log(f"reloaded model {name!r} from {best} in {new.load_seconds:.1f} s")
    old.retire(models.config.drain_timeout_s)
    return {"name": name, "loaded": True, "load_seconds": round(new.load_seconds, 3)}


def reload_all(models, log=log_line):
    """SIGHUP: each model loaded again from its folder (a new ``best/`` saved there), one log line each."""
    for name in list(models.specs):
        try:
            reload(models, name, None, log)
        except Failure:
            pass  # logged by reload; the others are reloaded all the same
