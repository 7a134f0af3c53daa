"""Progress bars that ``trainer.progress_bar: false`` switches off everywhere.

tqdm reads its ``TQDM_*`` environment variables when it is imported, so the
run's setting is kept here and every bar of the toolkit asks for it.
"""
import contextlib
import sys
import threading

from tqdm.auto import tqdm

ENABLED = True
_THREAD = threading.local()  # quiet(): this thread only (a server's request threads)


#: seconds between two lines of a bar whose output is not a terminal (a redirected log, a job's output file)
LOG_INTERVAL = 60


def progress(*args, **kwargs):
    """``tqdm(...)``, disabled when the run turned progress bars off. Into a file or pipe rather than a
    terminal, a bar is a plain line every :data:`LOG_INTERVAL` seconds and at its end, not a redraw per step
    (carriage returns that fill a log)."""
    if not ENABLED or _quiet():
        kwargs["disable"] = True
    stream = kwargs.get("file") or sys.stderr
    if not kwargs.get("disable") and not _is_terminal(stream):
        kwargs.update(file=_Lines(stream), mininterval=LOG_INTERVAL, maxinterval=LOG_INTERVAL * 10,
                      dynamic_ncols=False, ncols=100)
    return tqdm(*args, **kwargs)


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream: treat as a file
        return False


class _Lines:
    """A stream that gets tqdm's redraws as whole lines: each carriage return starts a new line."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        for line in text.replace("\r", "\n").split("\n"):
            if line.strip():
                self.stream.write(line.rstrip() + "\n")

    def flush(self):
        self.stream.flush()


@contextlib.contextmanager
def quiet():
    """Within the block, this thread shows no bar and prints no note (a
    server's requests: what a note says goes into the answer instead)."""
    before = _quiet()
    _THREAD.quiet = True
    try:
        yield
    finally:
        _THREAD.quiet = before


@contextlib.contextmanager
def bars(enabled):
    """Within the block, bars are shown only when ``enabled`` and the run allows them."""
    global ENABLED
    before = ENABLED
    ENABLED = before and enabled
    try:
        yield
    finally:
        ENABLED = before


def note(message):
    """A line printed without breaking an open progress bar (none within :func:`quiet`)."""
    if not _quiet():
        tqdm.write(message)


def _quiet():
    return getattr(_THREAD, "quiet", False)
