"""One HTTP/1.1 connection of a server: uvicorn's httptools protocol with the limits a server on a network needs.

uvicorn parses the bytes and answers what it cannot parse itself, in plain
text, before the app sees anything; and it bounds neither how long a request's
headers may take, nor their size (httptools buffers a header until its end)
or number. This subclass keeps uvicorn's parsing and request cycle and adds,
each answered ``{"error": "<one line>"}`` as the app answers, counted in
``/metrics`` under the route ``unparsed``:

- 400 for bytes that are not HTTP/1.1 (a bad request line, a bad
  ``Content-Length``, conflicting framing);
- 431 for a request line and headers over ``max_header_bytes`` or more than
  ``max_headers`` fields;
- 408 when a request's head has not all arrived ``read_timeout_s`` after its
  first byte (slowloris), when its body pauses longer than ``read_timeout_s``,
  or has not all arrived ``body_timeout_s`` after the head, however it trickles
  in (the route reading it ends as for a client that left: a 499 in the
  metrics); a silent connection is closed after ``idle_timeout_s`` (uvicorn's
  keep-alive timer);
- 503 with ``Retry-After`` for a connection over ``max_connections``.

An answer sent before the request's body was all read (a 413, one of the
refusals above) is followed by a lingering close, as nginx and Apache do:
the answer and a FIN go out, what the client still sends is read and
dropped for up to :data:`LINGER_S`, then the socket closes. Closing at once
with unread bytes makes the kernel send a reset, and a client that sends its
whole body before reading (Python's urllib) would never see the answer.
"""
import json
import time

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

#: a lingering close reads and drops what a refused client still sends for this long at most, ...
LINGER_S = 10.0
#: ... and at most this long without a byte (nginx: lingering_time 30 s, lingering_timeout 5 s)
LINGER_IDLE_S = 2.0
UNPARSED = "unparsed"  # the metrics' route of what never reached a route


def protocol_class(config, metrics):
    """The protocol uvicorn runs for each connection (``uvicorn.Config(http=...)``), with the ``serve``
    settings ``config`` and the app's ``metrics``."""
    return type("Connection", (Connection,), {"settings": config, "metrics": metrics})


class _Refused(Exception):
    """Raised in a parser callback: the request is refused with ``status`` and a one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.message = status, message


class _Transport:
    """The connection's transport as uvicorn's code sees it: its ``close()``
    is the connection's own (a lingering close while input is unread)."""

    def __init__(self, transport, connection):
        self.raw, self._connection = transport, connection

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def close(self):
        self._connection.close()

    def is_closing(self):
        return self._connection.lingering or self.raw.is_closing()


class Connection(HttpToolsProtocol):
    settings = None  # the ServeConfig, set by protocol_class
    metrics = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lingering = False
        self._dropping = False  # refused behind a request being answered: read nothing more
        self._head_bytes = 0  # of the request line and headers of the request being read
        self._header_fields = 0
        self._in_head = True  # between requests, or reading a request's head
        self._began_in_chunk = False
        self._head_started = None  # monotonic time of the head's first byte
        self._read_timer = None  # the head's deadline, or the body's pause
        self._body_timer = None  # the body's deadline (body_timeout_s after the head)
        self._linger_timer = None
        self._linger_ends = self._last_byte = 0.0

    # ---- the connection --------------------------------------------------------------
    def connection_made(self, transport):
        super().connection_made(_Transport(transport, self))
        if len(self.connections) > self.settings.max_connections:
            self._refuse(503, f"the server holds max_connections={self.settings.max_connections} connections; "
                              f"retry later", [(b"retry-after", b"1")])
            return
        # a connection that sends nothing is closed by uvicorn's keep-alive timer (idle_timeout_s)
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def connection_lost(self, exc):
        self._cancel_read_timer()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super().connection_lost(exc)

    def close(self):
        """Close, lingering when a request's body is still coming (see the module's docstring)."""
        if self.lingering or self.transport.raw.is_closing():
            return
        if self.cycle is not None and self.cycle.more_body:
            self._linger()
        else:
            self.transport.raw.close()

    def shutdown(self):
        if self.lingering:  # the server stops: stop reading what a refused client sends
            self.transport.raw.close()
        else:
            super().shutdown()

    def data_received(self, data):
        if self.lingering or self._dropping:
            self._last_byte = self.loop.time()
            return
        self._unset_keepalive_if_required()
        if self._in_head and self._read_timer is None:  # a request's first byte
            self._head_started = time.monotonic()
            self._read_timer = self.loop.call_later(self.settings.read_timeout_s, self._read_timed_out)
        self._began_in_chunk = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()  # no WebSocket here (ws="none"): uvicorn's warning
            return
        except httptools.HttpParserError as error:
            refused = error.__context__ if isinstance(error.__context__, _Refused) else None
            if refused is not None:
                self._refuse(refused.status, refused.message)
            else:
                self._refuse(400, f"not a valid HTTP/1.1 request ({_reason(error)})")
            return
        if self._in_head and not self._began_in_chunk:  # a head arriving over several reads (httptools keeps a
            self._head_bytes += len(data)  # field until its end): bounded here before it is complete
            if self._head_bytes > self.settings.max_header_bytes:
                self._refuse(431, self._too_large())

    def send_400_response(self, msg):  # uvicorn's plain-text 400, should any path of its own still call it
        self._refuse(400, f"not a valid HTTP/1.1 request ({msg.rstrip('.')})")

    # ---- the parser's callbacks ------------------------------------------------------
    def on_message_begin(self):
        super().on_message_begin()
        self._in_head, self._began_in_chunk = True, True
        self._head_bytes = self._header_fields = 0
        if self._read_timer is None:
            self._head_started = time.monotonic()
            self._read_timer = self.loop.call_later(self.settings.read_timeout_s, self._read_timed_out)

    def on_url(self, url):
        super().on_url(url)
        self._count_head(len(url))

    def on_header(self, name, value):
        self._header_fields += 1
        if self._header_fields > self.settings.max_headers:
            raise _Refused(431, f"more than max_headers={self.settings.max_headers} header fields")
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self):
        self._in_head = False
        self._cancel_read_timer()
        super().on_headers_complete()
        if self.cycle is not None and self.cycle.more_body:  # a body may follow: it may not pause too long, nor
            self._read_timer = self.loop.call_later(self.settings.read_timeout_s, self._body_timed_out)  # trickle
            self._body_timer = self.loop.call_later(self.settings.body_timeout_s, self._body_too_slow)

    def on_body(self, body):
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = self.loop.call_later(self.settings.read_timeout_s, self._body_timed_out)
        super().on_body(body)

    def on_message_complete(self):
        self._cancel_read_timer()
        self._in_head, self._head_bytes = True, 0  # what comes next is the next request's head
        super().on_message_complete()

    def on_response_complete(self):
        cycle = self.cycle
        if cycle is not None and cycle.response_complete and cycle.more_body and not self.transport.is_closing():
            # answered before its body was read (a 413, a 415): the rest of it is not parsed
            self.server_state.total_requests += 1
            self.close()
            return
        super().on_response_complete()

    # ---- refusing --------------------------------------------------------------------
    def _refuse(self, status, message, headers=()):
        """Answer ``status`` with ``{"error": message}`` and close (lingering): what no route saw."""
        self._cancel_read_timer()
        self._unset_keepalive_if_required()
        if self.transport.is_closing():
            return
        started = self._head_started or time.monotonic()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and (cycle.response_started or not cycle.more_body):
            # a request before this one is being answered: let it finish, then close; nothing more is read
            cycle.keep_alive = False
            self._dropping = True
        else:
            if cycle is not None and not cycle.response_complete:  # this request's body is malformed (a bad
                cycle.disconnected = True  # chunk size): its route stops waiting for it (and counts a 499)
                cycle.message_event.set()
            body = json.dumps({"error": message}, separators=(",", ":")).encode("utf-8")  # as the app's
            head = [STATUS_LINE[status]]
            fields = [*self.server_state.default_headers, (b"content-type", b"application/json"),
                      (b"content-length", str(len(body)).encode("ascii")), (b"connection", b"close"),
                      (b"x-content-type-options", b"nosniff"), *headers]
            head += [b"%s: %s\r\n" % (name, value) for name, value in fields]
            self.transport.raw.write(b"".join(head) + b"\r\n" + body)
            self._linger()
        self.metrics.observe(UNPARSED, "", status, time.monotonic() - started)

    def _too_large(self):
        return f"request line and headers over max_header_bytes={self.settings.max_header_bytes} bytes"

    def _count_head(self, size):
        self._head_bytes += size
        if self._head_bytes > self.settings.max_header_bytes:
            raise _Refused(431, self._too_large())

    def _read_timed_out(self):
        self._read_timer = None
        self._refuse(408, f"the request line and headers did not arrive within read_timeout_s="
                          f"{self.settings.read_timeout_s:g} s")

    def _body_timed_out(self):
        """The body paused longer than ``read_timeout_s``: 408; its route ends as for a client that left."""
        self._read_timer = None
        self._refuse(408, f"the request body paused longer than read_timeout_s={self.settings.read_timeout_s:g} s")

    def _body_too_slow(self):
        """The body has not all arrived ``body_timeout_s`` after the head (a trickle): as :meth:`_body_timed_out`."""
        self._body_timer = None
        self._refuse(408, f"the request body did not all arrive within body_timeout_s="
                          f"{self.settings.body_timeout_s:g} s")

    def _cancel_read_timer(self):
        """Cancel the head's or the body's timers (the request is complete, refused, or the connection ends)."""
        for name in ("_read_timer", "_body_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

    def _linger(self):
        """Send what is written and a FIN, then read and drop what comes, for a bounded time."""
        raw = self.transport.raw
        self.lingering = True
        self._cancel_read_timer()
        self._unset_keepalive_if_required()
        try:
            raw.write_eof()
        except (NotImplementedError, OSError, RuntimeError):
            raw.close()
            return
        self.flow.resume_reading()  # the body may have paused reading (uvicorn's high-water mark)
        now = self.loop.time()
        self._linger_ends, self._last_byte = now + LINGER_S, now
        self._linger_timer = self.loop.call_later(LINGER_IDLE_S, self._linger_check)

    def _linger_check(self):
        now = self.loop.time()
        due = min(self._linger_ends, self._last_byte + LINGER_IDLE_S)
        if now >= due:
            self.transport.raw.close()
        else:
            self._linger_timer = self.loop.call_later(due - now, self._linger_check)


def _reason(error):
    """httptools' message without its ``HPE_`` code prefix, or the error's class name."""
    text = str(error).strip()
    return text.split(" ", 1)[1] if text.startswith("HPE_") and " " in text else (text or type(error).__name__)
