"""Progress bars that ``trainer.progress_bar: false`` switches off everywhere.

tqdm reads its ``TQDM_*`` environment variables when it is imported, so the
run's setting is kept here and every bar of the toolkit asks for it.
"""
import contextlib

from tqdm.auto import tqdm

ENABLED = True


def progress(*args, **kwargs):
    """``tqdm(...)``, disabled when the run turned progress bars off."""
    if not ENABLED:
        kwargs["disable"] = True
    return tqdm(*args, **kwargs)


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
    """A line printed without breaking an open progress bar."""
    tqdm.write(message)
