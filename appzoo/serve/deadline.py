"""A request's deadline: ``serve.max_request_timeout_s`` after it arrived, or sooner when the client asks
with the header ``X-Request-Timeout`` (seconds); past it, a 504 in one line."""
import math
import time

from appzoo.serve.failure import Failure, clip

#: the header in which a client asks for less time than serve.max_request_timeout_s (seconds, a number > 0)
HEADER = "X-Request-Timeout"


class Deadline:
    """When a request must be answered by (``ends``, ``time.monotonic()`` seconds), its ``seconds`` and where
    they came from (``source``: the header, or the server's setting)."""

    def __init__(self, seconds, source):
        self.ends, self.seconds, self.source = time.monotonic() + seconds, seconds, source

    def left(self):
        return self.ends - time.monotonic()

    def missed(self, model):
        """The 504 of a request of ``model`` (its name) not answered in time."""
        return Failure(504, f"model {model!r}: no answer within the request's timeout of {self.seconds:g} s "
                            f"({self.source}); retry later, or allow more time")


def of_request(headers, config):
    """The :class:`Deadline` of a request with ``headers`` arriving now, capped at the ``serve`` settings'
    ``max_request_timeout_s``; Failure 400 for a header that is not a number of seconds > 0."""
    seconds, source = config.max_request_timeout_s, "serve.max_request_timeout_s"
    given = headers.get(HEADER)
    if given is not None:
        try:
            asked = float(given)
        except ValueError:
            asked = math.nan
        if not (math.isfinite(asked) and asked > 0):
            raise Failure(400, f"{HEADER}: expected a number of seconds > 0, got {clip(given)}")
        if asked < seconds:
            seconds, source = asked, HEADER
    return Deadline(seconds, source)
