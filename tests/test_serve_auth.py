"""API keys (appzoo/serve/auth.py): where they come from and how a bad one is refused at start (one line,
exit 2), and a live server that asks every route but liveness and readiness for one: 401 in one line with
``WWW-Authenticate: Bearer``, counted in ``/metrics``, the key in no log line and no answer. Quick: no model
is loaded (the key is checked before any route)."""
import hmac
import logging
import os

import pytest

from appzoo.errors import ConfigError
from appzoo.serve import auth
from serving import live_server, request

KEYS = ["s3cret-K3Y-one", "s3cret-K3Y-two"]
WRONG = "wr0ng-K3Y-xyz"
MISSING = ("missing API key: this server needs the header 'Authorization: Bearer KEY' on every route but "
           "/v2/health/live and /v2/health/ready")
WRONG_LINE = "wrong API key: the key in 'Authorization: Bearer KEY' is not one of this server's"


# ---- where keys come from ---------------------------------------------------------------
def test_keys_come_from_the_option_the_variable_and_a_file_with_comments(tmp_path):
    path = tmp_path / "keys"
    path.write_text("# the team's keys\n\n  alpha-1  \n#beta\nbeta-2\n", encoding="utf-8")
    keys = auth.load_keys("cli-0", str(path), environ={auth.ENV: "env-9"})
    assert keys == tuple(auth.digest(k) for k in ("cli-0", "env-9", "alpha-1", "beta-2"))
    assert auth.load_keys(None, None, environ={}) == ()  # no key given: none needed
    assert auth.load_keys("same", None, environ={auth.ENV: "same"}) == (auth.digest("same"),)


@pytest.mark.parametrize("content, message", [
    (None, "serve.api_key_file: {path} does not exist (a file of API keys, one a line)"),
    ("", "serve.api_key_file: {path} holds no key (one key a line; blank lines and # comments are skipped)"),
    ("# only a comment\n\n", "serve.api_key_file: {path} holds no key (one key a line; blank lines and # comments "
                             "are skipped)"),
    (b"\xff\xfe\x00key", "serve.api_key_file: {path}: not UTF-8 text (byte 0)"),
    ("ok-key\nhas space\n", "serve.api_key_file: {path}: line 2: an API key is visible ASCII characters without "
                            "spaces; character 4 is U+0020"),
    ("clé\n", "serve.api_key_file: {path}: line 1: an API key is visible ASCII characters without spaces; "
              "character 3 is U+00E9"),
], ids=["missing", "empty", "only comments", "not UTF-8", "a space", "not ASCII"])
def test_a_bad_key_file_is_one_config_error_line_that_holds_no_key(tmp_path, content, message):
    path = tmp_path / "keys"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        auth.load_keys(None, str(path), environ={})
    assert str(error.value) == message.format(path=path)
    assert "ok-key" not in str(error.value) and "has space" not in str(error.value)


def test_a_folder_an_empty_variable_and_a_bad_option_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"^serve\.api_key_file: .* is a folder, not a file of API keys$"):
        auth.load_keys(None, str(tmp_path), environ={})
    with pytest.raises(ConfigError, match=r"^APPZOO_API_KEY: an empty API key; give a key, or none to serve "
                                          r"without keys$"):
        auth.load_keys(None, None, environ={auth.ENV: ""})
    with pytest.raises(ConfigError, match=r"^--api-key: an API key is visible ASCII characters without spaces; "
                                          r"character 1 is U\+0009$"):
        auth.load_keys("\tx", None, environ={})


@pytest.mark.parametrize("section, message", [
    ({"api_key_file": ""}, "serve.api_key_file: must not be empty, got ''"),
    ({"api_key": "x"}, "serve.api_key: unknown key for 'serve'; did you mean 'api_key_file'?"),  # never a key itself
    ({"body_timeout_s": 0}, "serve.body_timeout_s: must be > 0, got 0")])
def test_the_serve_sections_new_keys_are_checked(section, message):
    from appzoo.params.serve import ServeConfig

    with pytest.raises(ConfigError) as error:
        ServeConfig.from_section(section)
    assert str(error.value).startswith(message)


def test_the_command_line_says_a_missing_key_file_in_one_line_and_exits_2(tmp_path, capsys, monkeypatch):
    from appzoo.serve.__main__ import main

    monkeypatch.delenv(auth.ENV, raising=False)
    code = main([str(tmp_path / "run" / "best"), "--api-key-file", str(tmp_path / "nokeys")])
    assert code == 2
    assert capsys.readouterr().err == (f"error: serve.api_key_file: {tmp_path / 'nokeys'} does not exist (a file of "
                                       f"API keys, one a line)\n")


def test_help_lists_the_key_options(capsys):
    from appzoo.serve.__main__ import main

    with pytest.raises(SystemExit) as done:  # the engine's help says "25%", which argparse once read as a format
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--api-key KEY" in out and "--api-key-file API_KEY_FILE" in out and "--body-timeout-s" in out
    assert "within 25% of Paddle Inference" in out


def test_a_param_files_key_file_is_read_before_anything_is_served(tmp_path, monkeypatch):
    from appzoo.serve.__main__ import run_param_file

    monkeypatch.delenv(auth.ENV, raising=False)
    (tmp_path / "keys").write_text("# none yet\n", encoding="utf-8")
    config = {"trainer": {"output_dir": str(tmp_path / "run")}, "serve": {"api_key_file": str(tmp_path / "keys")}}
    with pytest.raises(ConfigError) as error:  # --do serve: the serve section's file, before the run's best/ is read
        run_param_file(config)
    assert str(error.value) == (f"serve.api_key_file: {tmp_path / 'keys'} holds no key (one key a line; blank lines "
                                f"and # comments are skipped)")


def test_every_key_is_compared_in_constant_time_with_no_early_exit(monkeypatch):
    calls = []
    real = hmac.compare_digest
    monkeypatch.setattr(auth.hmac, "compare_digest", lambda a, b: calls.append((len(a), len(b))) or real(a, b))
    keys = tuple(auth.digest(k) for k in ("a", "bb", "ccc"))
    assert auth.accepts(keys, b"a") and calls == [(32, 32)] * 3  # matched by the first, compared with all three
    calls.clear()
    assert not auth.accepts(keys, b"a-much-longer-wrong-key") and calls == [(32, 32)] * 3  # digests: equal lengths


# ---- a live server that needs a key -------------------------------------------------------------
class Records(logging.Handler):
    """Every log record of uvicorn's loggers and the root logger, formatted, at every level."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(self.format(record))


@pytest.fixture(scope="module")
def keyed():
    """A server whose model never loads, needing one of :data:`KEYS`, with uvicorn's access log on (a handler
    on its logger turns it on for each new connection) and every logger at DEBUG, its log lines collected."""
    with live_server({"cls": "/nowhere/best"}, load=False, api_keys=KEYS) as (base, app):
        records = Records()  # after uvicorn configured its logging (at warning, without an access log)
        loggers = [logging.getLogger(n) for n in ("", "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")]
        levels = [lg.level for lg in loggers]
        for lg in loggers:
            lg.addHandler(records)
            lg.setLevel(logging.DEBUG)
        try:
            yield base, app, records
        finally:
            for lg, level in zip(loggers, levels):
                lg.removeHandler(records)
                lg.setLevel(level)


def unauthorized(base, reason):
    text = request(base, "GET", "/metrics", headers={"Authorization": f"Bearer {KEYS[0]}"})[2]
    line = f'appzoo_unauthorized_requests_total{{reason="{reason}"}} '
    return sum(float(x.rsplit(" ", 1)[1]) for x in text.splitlines() if x.startswith(line))


@pytest.mark.parametrize("method, path", [("GET", "/models"), ("GET", "/metrics"), ("POST", "/predict"),
                                          ("POST", "/v1/embeddings"), ("GET", "/v2"), ("GET", "/v2/models/cls"),
                                          ("POST", "/v2/models/cls/infer"), ("GET", "/no/such/route")])
def test_every_route_but_health_and_the_page_files_needs_a_key(keyed, method, path):
    base = keyed[0]
    before = {reason: unauthorized(base, reason) for reason in ("missing", "wrong")}
    body = {"inputs": ["x"]} if method == "POST" else None
    for headers, reason, line, challenge in [
            ({}, "missing", MISSING, 'Bearer realm="appzoo"'),
            ({"Authorization": f"Basic {KEYS[0]}"}, "missing", MISSING, 'Bearer realm="appzoo"'),
            ({"Authorization": "Bearer "}, "missing", MISSING, 'Bearer realm="appzoo"'),
            ({"Authorization": f"Bearer {WRONG}"}, "wrong", WRONG_LINE, 'Bearer realm="appzoo", error="invalid_token"'),
            ({"Authorization": f"Bearer {KEYS[0]}x"}, "wrong", WRONG_LINE,
             'Bearer realm="appzoo", error="invalid_token"')]:
        status, answer_headers, answer = request(base, method, path, body, headers)
        assert (status, answer) == (401, {"error": line}), headers
        assert answer_headers["www-authenticate"] == challenge
        assert answer_headers["x-content-type-options"] == "nosniff"
    assert unauthorized(base, "missing") == before["missing"] + 3
    assert unauthorized(base, "wrong") == before["wrong"] + 2
    for key in KEYS:  # either key passes, and the route answers as it would without keys (503: never loaded)
        status, _, answer = request(base, method, path, body, {"Authorization": f"bearer {key}"})
        assert status != 401, answer


def test_health_and_the_page_answer_without_a_key_and_401s_are_counted_as_a_route(keyed):
    base = keyed[0]
    assert request(base, "GET", "/v2/health/live")[::2] == (200, {"live": True})
    assert request(base, "GET", "/v2/health/ready")[0] == 503  # not 401: readiness is open; the model never loads
    for path in ("/", "/static/page.js", "/static/page.css"):
        assert request(base, "GET", path)[0] == 200, path
    request(base, "GET", "/models")
    metrics = request(base, "GET", "/metrics", headers={"Authorization": f"Bearer {KEYS[1]}"})[2]
    assert any(line.startswith('appzoo_requests_total{code="401",method="GET",route="unauthorized"}')
               for line in metrics.splitlines()), metrics


def test_no_key_is_ever_logged_or_answered(keyed):
    base, _, records = keyed
    answers = []
    for key in (*KEYS, WRONG):
        for path in ("/models", "/metrics", "/nope", "/v2/health/live"):
            answers.append(request(base, "GET", path, headers={"Authorization": f"Bearer {key}"}))
    assert any("GET /models" in line for line in records.lines), records.lines[-5:]  # the access log ran
    for key in (*KEYS, WRONG):
        assert not any(key in line for line in records.lines), key
        assert not any(key in str(answer) for answer in answers), key


def test_the_start_line_counts_the_keys_and_names_none(capsys, monkeypatch, tmp_path):
    import uvicorn

    import appzoo.serve.server as server_module
    from appzoo.params.serve import ServeConfig

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # start, then stop at once
    code = server_module.serve({"cls": os.path.join(str(tmp_path), "best")}, ServeConfig(port=0, engine="dygraph"), 1,
                               api_keys=auth.load_keys(KEYS[0], None, environ={}))
    assert code == 0
    err = capsys.readouterr().err
    assert "every route but /v2/health/live and /v2/health/ready needs one of 1 API key(s)" in err
    assert KEYS[0] not in err
