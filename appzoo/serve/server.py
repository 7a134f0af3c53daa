"""Start and stop a server: the listening socket, the models, uvicorn, and the exit codes.

Exit codes (as ``run_trainer.py``'s, README.md): 0 after a SIGTERM or
Ctrl-C once the requests in flight are answered (or ``drain_timeout_s``
passed); 2 for what the user can fix, each one line on stderr: a port in
use, a missing or corrupt ``best/``, an engine that is not installed, more
threads than cores.
"""
import signal
import socket
import sys

from appzoo.errors import ConfigError


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
        reason = "in use by another process" if e.errno == 98 else e.strerror
        raise ConfigError(f"serve.port: cannot listen on {host}:{port} ({reason}); choose another "
                          f"serve.port (--port), or stop what holds it") from None
    sock.set_inheritable(True)
    return sock


def serve(specs, config, threads, *, ready_message=True):
    """Serve ``specs`` (``{name: best}``) until SIGTERM or Ctrl-C; the exit code.
    Raises ConfigError (exit 2) before anything listens when the port cannot be had."""
    import uvicorn

    from appzoo.serve.app import create_app

    sock = listen(config.host, config.port)
    host, port = sock.getsockname()[:2]
    failed = []

    def on_load_error(message):
        failed.append(message)
        server.should_exit = True

    app = create_app(specs, config, threads, on_load_error=on_load_error)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                           timeout_graceful_shutdown=config.drain_timeout_s))
    stops = []
    previous = {sig: signal.signal(sig, lambda signum, frame: stops.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}  # uvicorn raises a caught signal again at its end
    if ready_message:
        print(f"serving {', '.join(specs)} on http://{_url_host(host)}:{port}/ (loading; ready when "
              f"/v2/health/ready answers 200)", file=sys.stderr, flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    if failed:
        print(f"error: {failed[0]}", file=sys.stderr)
        return 2
    print("stopped: every request in flight was answered" if stops else "stopped", file=sys.stderr)
    return 0


def _url_host(host):
    return f"[{host}]" if ":" in host else host
