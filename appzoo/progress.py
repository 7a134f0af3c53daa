"""Progress bars that ``trainer.progress_bar: false`` switches off everywhere.

tqdm reads its ``TQDM_*`` environment variables when it is imported, so the
run's setting is kept here and every bar of the toolkit asks for it.
"""
from tqdm.auto import tqdm

ENABLED = True


def progress(*args, **kwargs):
    """``tqdm(...)``, disabled when the run turned progress bars off."""
    if not ENABLED:
        kwargs["disable"] = True
    return tqdm(*args, **kwargs)


def note(message):
    """A line printed without breaking an open progress bar."""
    tqdm.write(message)
