"""User-facing errors.

Anything the user can fix by editing a param file, a data file or a command
line raises a subclass of :class:`UserError`; ``run_trainer.py`` prints its
one-line message and exits with code 2, without a traceback.
"""


class UserError(Exception):
    """An error caused by the user's input, reported as one line."""


class ConfigError(UserError):
    """A param file or ``--set`` value that does not validate."""


class DataError(UserError):
    """A data file that cannot be read as configured (carries file:line)."""
