"""Start and stop a server: the listening socket, the models, uvicorn, and the exit codes.

Exit codes (as ``run_trainer.py``'s, README.md): 0 after a SIGTERM or
Ctrl-C once the requests in flight are answered (or ``drain_timeout_s``
passed); a second SIGTERM while draining changes nothing (a process manager
that repeats its SIGTERM loses no request; SIGKILL is the way to force), a
second Ctrl-C stops at once: 130. 2 for what the user can fix, each one
line on stderr: an address or port that cannot be had, a missing or corrupt
``best/``, an engine that is not installed, more threads than cores, more
connections than file descriptors.

SIGHUP reloads every model from its folder (:mod:`appzoo.serve.repository`),
one line each on stderr; a model that fails to load serves on as it was.
"""
import errno
import logging
import os
import signal
import socket
import sys
import threading

from appzoo.errors import ConfigError
from appzoo.serve import auth
from appzoo.serve.protocol import protocol_class
from appzoo.serve.repository import reload_all

#: file descriptors kept for what is not a connection: the listening socket, model and log files, the
#: engines' own, a restart's export
FD_RESERVE = 256
#: bind errors that are the port's (another process holds it, or it needs privileges); any other is the address's
_PORT_ERRORS = {errno.EADDRINUSE: "in use by another process", errno.EACCES: "a port below 1024 needs privileges"}


def listen(host, port):
    """A bound, listening socket; ConfigError naming the address when it cannot be had."""
    try:
        family, kind, protocol = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][:3]
    except socket.gaierror as e:
        raise ConfigError(f"serve.host: {host!r} is not an address this machine can listen on ({e.strerror})") \
            from None
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on accepted sockets of that protocol, and without it
    # an answer's body waits ~40 ms behind its headers for the client's delayed ACK (benchmarks/serve_load.py)
    sock = socket.socket(family, kind, protocol or socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart may reuse a port in TIME_WAIT
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        if e.errno in _PORT_ERRORS:
            raise ConfigError(f"serve.port: cannot listen on {host}:{port} ({_PORT_ERRORS[e.errno]}); choose "
                              f"another serve.port (--port), or stop what holds it") from None
        raise ConfigError(f"serve.host: cannot listen on {host}:{port} ({e.strerror}): not an address of this "
                          f"machine; use 127.0.0.1, 0.0.0.0 (every interface) or one of its own addresses "
                          f"(--host)") from None
    sock.set_inheritable(True)
    return sock


def serve(specs, config, threads, *, ready_message=True, keep_signal_handlers=False, api_keys=()):
    """Serve ``specs`` (``{name: best}``) until SIGTERM or Ctrl-C; the exit code.
    Raises ConfigError (exit 2) before anything listens when the address, the port or the file descriptors
    cannot be had. ``keep_signal_handlers``: once served, ignore SIGTERM and SIGINT (the command line, whose
    process is about to exit: a signal repeated after the drain must not turn its exit 0 into 143; ignored, not
    caught, since the interpreter's shutdown puts a caught signal back to its default, which kills). ``api_keys``:
    the keys a request must carry one of (:func:`appzoo.serve.auth.load_keys`)."""
    import uvicorn

    from appzoo.serve.app import create_app  # fastapi and paddle: only once serving starts

    check_file_descriptors(config.max_connections)
    sock = listen(config.host, config.port)
    host, port = sock.getsockname()[:2]
    failed = []

    def on_load_error(message):
        failed.append(message)
        server.should_exit = True

    app = create_app(specs, config, threads, on_load_error=on_load_error, api_keys=api_keys,
                     allowed_hosts=auth.allowed_hosts(config))
    server = uvicorn.Server(uvicorn_config(app, config))
    quiet_after_force = lambda record: not server.force_exit  # noqa: E731 - the cancelled tasks' tracebacks
    logging.getLogger("uvicorn.error").addFilter(quiet_after_force)  # of a second Ctrl-C: its one line says it
    stops = []
    previous = {sig: signal.signal(sig, lambda signum, frame: stops.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}  # uvicorn raises a caught signal again at its end
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda signum, frame: _reload_in_background(app))
    if ready_message:
        print(f"serving {', '.join(specs)} on http://{_url_host(host)}:{port}/ (loading; ready when "
              f"/v2/health/ready answers 200){_keys_note(api_keys)}", file=sys.stderr, flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if keep_signal_handlers else handler)
        sock.close()
        logging.getLogger("uvicorn.error").removeFilter(quiet_after_force)
    if failed:
        print(f"error: {failed[0]}", file=sys.stderr)
        return 2
    if server.force_exit:  # uvicorn's second Ctrl-C: no drain, no answer to what was in flight
        app.state.models.stop(0)
        print("stopped at once (a second Ctrl-C), without waiting for the requests in flight", file=sys.stderr)
        if keep_signal_handlers:  # the command line's process ends here: requests still inside paddle's or ONNX
            sys.stdout.flush()  # Runtime's C++ code on the pool's threads would abort the interpreter's
            sys.stderr.flush()  # teardown (SIGABRT, "terminate called without an active exception")
            os._exit(128 + signal.SIGINT)
        return _leave_loading(app.state.models.loader, 0, 128 + signal.SIGINT)
    print("stopped: every request in flight was answered" if stops else "stopped", file=sys.stderr)
    return _leave_loading(app.state.models.loader, config.drain_timeout_s, 0)


def _reload_in_background(app):
    """SIGHUP: reload on a thread of its own (the signal interrupts the event loop's thread, which must go on
    answering; a reload takes seconds)."""
    threading.Thread(target=reload_all, args=(app.state.models,), name="reload", daemon=True).start()


def _leave_loading(loader, timeout, code):
    """``code``, once the thread loading the models is done. Stopped while it exports or quantizes, the
    interpreter would end under paddle's or ONNX Runtime's running C++ code, which aborts the process (SIGABRT,
    'FATAL: exception not rethrown'): wait up to ``timeout`` for it, then leave without the interpreter's
    teardown (nothing is half-written: exports are renamed into place whole)."""
    if loader is None or not loader.is_alive():
        return code
    loader.join(timeout)
    if loader.is_alive():
        print("stopped while the models were still loading", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)
    return code


def uvicorn_config(app, config):
    """uvicorn's settings for ``app`` with the ``serve`` settings ``config``: a graceful stop within
    ``drain_timeout_s``, the connection limits of :mod:`appzoo.serve.protocol`, no WebSocket."""
    import uvicorn

    return uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", ws="none",
                          http=protocol_class(config, app.state.metrics),
                          timeout_graceful_shutdown=config.drain_timeout_s,
                          timeout_keep_alive=config.idle_timeout_s)


def check_file_descriptors(max_connections, limits=None):
    """Make room for ``max_connections`` connections, each a file descriptor, plus :data:`FD_RESERVE`:
    raise the soft limit toward the hard one when needed (``resource``; ``limits``: ``(soft, hard)`` to
    check instead); ConfigError naming serve.max_connections when even the hard limit is too low."""
    import resource

    needed = max_connections + FD_RESERVE
    soft, hard = limits or resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise ConfigError(f"serve.max_connections: {max_connections} connections and {FD_RESERVE} other files need "
                          f"{needed} file descriptors, and this process may open {hard} at most (ulimit -Hn); set "
                          f"serve.max_connections to {max(1, hard - FD_RESERVE)} or less, or raise the limit")
    if limits is None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return needed


def _keys_note(api_keys):
    """What the start line says of the API keys: how many, never which."""
    if not api_keys:
        return ""
    return f"; every route but /v2/health/live and /v2/health/ready needs one of {len(api_keys)} API key(s)"


def _url_host(host):
    return f"[{host}]" if ":" in host else host
