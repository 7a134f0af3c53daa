"""Ctrl-C and SIGTERM: stop at the next step boundary, keep a checkpoint.

Inside :func:`deferred` (the training loop) a first signal only asks the loop
to stop; the loop saves a resumable checkpoint after the step it is in and
raises :class:`~appzoo.errors.Interrupted`. Outside, or at a second signal,
the signal raises at once. Installed by :func:`handled` for the run only, so
importing the library changes no process-wide handler.
"""
import contextlib
import signal

from appzoo.errors import Interrupted
from appzoo.utils.progress import note

_pending = None
_deferring = 0


def _handler(signum, frame):
    global _pending
    if _deferring and _pending is None:
        _pending = signum
        note(f"{signal.Signals(signum).name}: stopping after this step to save a checkpoint "
             f"(press Ctrl-C again to stop at once)")
        return
    raise Interrupted(signum, f"{signal.Signals(signum).name}: stopped; nothing half-written was kept")


@contextlib.contextmanager
def handled():
    """Route SIGINT and SIGTERM to :func:`_handler` for the ``with`` block."""
    global _pending
    _pending = None
    previous = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred():
    """A block whose work must not be cut mid-way: signals only set :func:`pending`."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1


def pending():
    """The signal number asked for during :func:`deferred`, or None."""
    return _pending
