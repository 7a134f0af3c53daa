"""Progress bars that ``trainer.progress_bar: false`` switches off everywhere.

tqdm reads its ``TQDM_*`` environment variables when it is imported, so the
run's setting is kept here and every bar of the toolkit asks for it.
"""
import contextlib
import threading

from tqdm.auto import tqdm

ENABLED = True
_THREAD = threading.local()  # quiet(): this thread only (a server's request threads)


def progress(*args, **kwargs):
    """``tqdm(...)``, disabled when the run turned progress bars off."""
    if not ENABLED or _quiet():
        kwargs["disable"] = True
    return tqdm(*args, **kwargs)


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
