"""Errors reported as one line, each with its exit code.

Anything the user can fix by editing a param file, a data file or a command
line raises a subclass of :class:`UserError`; ``run_trainer.py`` prints its
one-line message and exits with the class's ``exit_code``, without a
traceback. The codes are documented in README.md:

====  ==========================================================
 2    bad input: param file, ``--set``, data file, encoder folder,
      output folder (:class:`ConfigError`, :class:`DataError`)
 1    the run could not save (a full disk, a read-only folder)
 3    training stopped on a non-finite loss or gradient
130   interrupted by Ctrl-C (SIGINT)
143   stopped by SIGTERM
====  ==========================================================
"""
import signal


def first_line(error):
    """The first line of an exception's message, at most 200 characters (libraries raise long ones)."""
    text = str(error).strip().splitlines()
    return text[0][:200] if text else ""


class UserError(Exception):
    """An error caused by the user's input, reported as one line."""

    exit_code = 2


class ConfigError(UserError):
    """A param file or ``--set`` value that does not validate."""


class DataError(UserError):
    """A data file that cannot be read as configured (carries file:line)."""


class RunError(UserError):
    """The run could not write what it must (a full disk, say)."""

    exit_code = 1


class DivergedError(UserError):
    """The training loss or a gradient is not finite."""

    exit_code = 3


class Interrupted(UserError):
    """SIGINT or SIGTERM; the message says what was kept, then (``advice``) how to continue."""

    def __init__(self, signum, message, advice=None):
        super().__init__(f"{message}; {advice}" if advice else message)
        self.signum = signum
        self.exit_code = 128 + signum
        self.kept, self.advice = message, advice

    def advising(self, advice):
        """The same stop with other advice: a sweep or a search continues its run by its own command."""
        return Interrupted(self.signum, self.kept, advice)

    @property
    def signal_name(self):
        return signal.Signals(self.signum).name
