"""API keys: with keys given, every request but liveness, readiness and the try-it page's own files must
carry ``Authorization: Bearer KEY`` with one of them (docs/serving.md#api-keys).

Keys come from ``--api-key``, the environment variable :data:`ENV` and ``serve.api_key_file`` (one key a
line; blank lines and ``#`` comments skipped); every key given is accepted. Never from the param file's
``serve`` section itself: a run saves its resolved config into its output folder. A request without a
key, or with another key, is answered 401 with ``WWW-Authenticate: Bearer`` and one line, counted in
``/metrics`` (``appzoo_unauthorized_requests_total``). No message, log line or answer holds a key.

A key is compared by its SHA-256 digest with :func:`hmac.compare_digest`, against every key in turn with
no early exit: the time taken says neither which key nor how much of one matched.
"""
import hashlib
import hmac
import json
import os

from appzoo.errors import ConfigError

ENV = "APPZOO_API_KEY"
#: what any client may fetch: liveness and readiness (probes carry no key), and the try-it page's files (they hold
#: no data; the page asks for a key, which it then sends with its calls)
OPEN_PATHS = frozenset({"/v2/health/live", "/v2/health/ready", "/", "/static/page.js", "/static/page.css"})
#: the metrics' route of a request refused for its key (appzoo/serve/metrics.py): never the path asked for
UNAUTHORIZED = "unauthorized"
SCOPE_KEY = "appzoo.refused_as"  # where the refusal leaves that route for the metrics' middleware


def load_keys(key=None, key_file=None, environ=None):
    """The keys a server accepts, as :func:`digest` s (an empty tuple: no key needed): ``key`` (``--api-key``),
    the environment's :data:`ENV` and the lines of ``key_file``; ConfigError naming where a key is wrong, a key
    file that cannot be read or holds none, never the key."""
    environ = os.environ if environ is None else environ
    keys = []
    if key is not None:
        keys.append(_checked(key, "--api-key"))
    if ENV in environ:
        keys.append(_checked(environ[ENV], ENV))
    if key_file is not None:
        keys.extend(_read_key_file(key_file))
    return tuple(dict.fromkeys(digest(k) for k in keys))


def _read_key_file(path):
    where = f"serve.api_key_file: {path}"
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist (a file of API keys, one a line)") from None
    except IsADirectoryError:
        raise ConfigError(f"{where} is a folder, not a file of API keys") from None
    except OSError as e:
        raise ConfigError(f"{where} cannot be read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{where}: not UTF-8 text (byte {e.start})") from None
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            keys.append(_checked(line, f"{where}: line {number}"))
    if not keys:
        raise ConfigError(f"{where} holds no key (one key a line; blank lines and # comments are skipped)")
    return keys


def _checked(key, where):
    """``key`` unless it is empty or holds a character that is not visible ASCII (a header could not carry it
    as typed); ConfigError naming ``where`` and the character's place, not the key."""
    if not key:
        raise ConfigError(f"{where}: an empty API key; give a key, or none to serve without keys")
    for i, char in enumerate(key):
        if not "!" <= char <= "~":
            raise ConfigError(f"{where}: an API key is visible ASCII characters without spaces; character {i + 1} is "
                              f"U+{ord(char):04X}")
    return key


def digest(key):
    """What a key is compared by: its SHA-256 (equal lengths for :func:`hmac.compare_digest`)."""
    return hashlib.sha256(key.encode("latin-1") if isinstance(key, str) else key).digest()


def accepts(keys, given):
    """Whether ``given`` (bytes) is one of ``keys`` (digests), in a time that depends on neither."""
    seen = digest(given)
    match = False
    for key in keys:  # no early exit
        match |= hmac.compare_digest(seen, key)
    return match


class RequireKey:
    """ASGI middleware: a request to a path outside :data:`OPEN_PATHS` without one of ``keys`` is answered 401,
    counted in ``metrics.unauthorized`` by reason (``missing``, ``wrong``)."""

    def __init__(self, app, keys, metrics):
        self.app, self.keys, self.metrics = app, tuple(keys), metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.keys or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").strip().partition(b" ")
        if scheme.lower() != b"bearer" or not given.strip():
            reason, message = "missing", ("missing API key: this server needs the header 'Authorization: Bearer KEY'"
                                          " on every route but /v2/health/live and /v2/health/ready")
        elif not accepts(self.keys, given.strip()):
            reason, message = "wrong", ("wrong API key: the key in 'Authorization: Bearer KEY' is not one of this "
                                        "server's")
        else:
            return await self.app(scope, receive, send)
        self.metrics.unauthorized.labels(reason).inc()
        scope[SCOPE_KEY] = UNAUTHORIZED
        body = json.dumps({"error": message}).encode("utf-8")
        challenge = b'Bearer realm="appzoo"' + (b', error="invalid_token"' if reason == "wrong" else b"")
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", challenge)]})
        await send({"type": "http.response.body", "body": body})


def allowed_hosts(config):
    """The names a request's Host header may give (``serve.allowed_hosts``, else from ``serve.host``): the bound
    address, with localhost, 127.0.0.1 and ::1 when it is a loopback one; any (``*``) for 0.0.0.0 or ::, where
    the names the server is reached by are a proxy's or a container's."""
    if config.allowed_hosts is not None:
        return tuple(config.allowed_hosts)
    host = config.host.strip("[]").lower()
    if host in ("0.0.0.0", "::", ""):
        return ("*",)
    loopback = ("localhost", "127.0.0.1", "::1")
    return tuple(dict.fromkeys((host, *loopback))) if host in loopback or host.startswith("127.") else (host,)


def host_name(header):
    """The name of a Host header: ``example.org:8000`` -> ``example.org``, ``[::1]:8000`` -> ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class AllowedHosts:
    """ASGI middleware: a request whose Host header names none of ``hosts`` (``*``: any) is answered 421 in one
    line (DNS rebinding: a page of another site whose name resolves to this address would otherwise reach the
    whole API with the browser's help)."""

    def __init__(self, app, hosts):
        self.app, self.hosts = app, frozenset(h.lower() for h in hosts)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or "*" in self.hosts:
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if host_name(given) in self.hosts:
            return await self.app(scope, receive, send)
        body = json.dumps({"error": f"Host {given[:100]!r} is not a name this server answers to (serve.allowed_hosts: "
                                    f"{', '.join(sorted(self.hosts))})"}).encode("utf-8")
        await send({"type": "http.response.start", "status": 421,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
