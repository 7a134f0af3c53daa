"""The study's SQLite file (``<output_dir>/search/study.db``): checked read-only before a search writes
anything (a folder or a file in its place, read-only, damaged, another Optuna version's schema), and an error
of SQLite once the search runs turned into one line naming the file and what to do."""
import contextlib
import os
import sqlite3
import urllib.parse

from appzoo.errors import RunError, UserError, first_line

STUDY_FILE = "study.db"
NEW_STUDY = ("move it and the trial folders beside it away, or set trainer.output_dir to another folder, to start "
             "a new study")


def check_study_folder(root):
    """Before anything is written: ``root`` (``<output_dir>/search``) is a folder or absent, and its
    ``study.db`` is absent, empty, or an Optuna study that SQLite reads whole and this process may write.
    A UserError naming the file otherwise; reads only (a read-only connection)."""
    if not os.path.lexists(root):
        return
    if not os.path.isdir(root):
        raise UserError(f"{root}: is a file, not a folder; a search keeps its study and its trials in "
                        f"<output_dir>/search/: move the file away, or set trainer.output_dir to another folder")
    if not os.access(root, os.W_OK | os.X_OK):
        raise UserError(f"{root}: cannot write in this folder (the study and its trials are kept there); make it "
                        f"writable, or set trainer.output_dir to another folder")
    path = os.path.join(root, STUDY_FILE)
    if not os.path.lexists(path):
        return
    if os.path.isdir(path):
        raise UserError(f"{path}: is a folder, not an Optuna study file; {NEW_STUDY}")
    if not os.path.isfile(path):
        raise UserError(f"{path}: not a regular file (a broken link, a device or a pipe); {NEW_STUDY}")
    if not os.access(path, os.R_OK | os.W_OK):
        raise UserError(f"{path}: cannot write the study (read-only); make it writable, or set "
                        f"trainer.output_dir to another folder")
    if os.path.getsize(path) == 0:
        return  # made and left empty (a start killed at once): Optuna makes the study in it
    try:
        tables = _read_tables(path)
    except sqlite3.DatabaseError as error:
        if "readonly" in str(error):  # a journal a killed writer left: Optuna's read-write connection rolls it back
            return
        raise UserError(f"{path}: not a readable Optuna study ({first_line(error)}); {NEW_STUDY}") from None
    if tables and not {"studies", "version_info"} <= set(tables):
        raise UserError(f"{path}: not an Optuna study (an SQLite database of the tables {', '.join(tables)}); "
                        f"{NEW_STUDY}")
    if tables:
        _check_schema(path)


def _check_schema(path):
    """Optuna opens the study read-only: a schema of another Optuna version is a UserError that says how
    to upgrade it (Optuna's own advice, with the study's address)."""
    import optuna

    url = f"sqlite:///{os.path.abspath(path)}"
    try:
        storage = optuna.storages.RDBStorage(f"sqlite:///file:{urllib.parse.quote(os.path.abspath(path))}"
                                             f"?mode=ro&uri=true", engine_kwargs={"connect_args": {"timeout": 60}})
    except RuntimeError as error:  # Optuna's message ends with the command that upgrades the study
        raise UserError(f"{path}: {str(error).strip().splitlines()[0].replace('$STORAGE_URL', url)}") from None
    except Exception as error:  # noqa: B902  (only an error SQLite raised underneath is translated)
        cause = _sqlite_error(error)
        if cause is None:
            raise
        raise UserError(f"{path}: not a readable Optuna study ({first_line(cause)}); {NEW_STUDY}") from None
    storage.engine.dispose()


def _read_tables(path):
    """The tables of the SQLite database ``path``, after SQLite's own check of every page (quick_check)."""
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=60)) as db:
        problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError(f"database disk image is malformed: {problems[0]}")
        return sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def _sqlite_error(error):
    """The sqlite3 error under an SQLAlchemy or Optuna one (each wraps the one below), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, sqlite3.Error):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


@contextlib.contextmanager
def storage_errors(root):
    """An error of SQLite under the study (read-only, full, locked for too long, damaged) as one line
    naming ``study.db`` and what to do, in place of SQLAlchemy's traceback."""
    try:
        yield
    except Exception as error:  # noqa: B902  (only an error SQLite raised underneath is translated)
        cause = _sqlite_error(error)
        if cause is None:
            raise
        path, text = os.path.join(root, STUDY_FILE), first_line(cause)
        if "readonly" in text or "unable to open" in text:
            raise UserError(f"{path}: cannot write the study ({text}); make it and its folder writable, or set "
                            f"trainer.output_dir to another folder") from None
        if "full" in text:
            raise RunError(f"{path}: cannot write the study ({text}); free some space, then the same command "
                           f"continues the study") from None
        if "locked" in text:
            raise RunError(f"{path}: another worker held the study locked for over a minute ({text}); on a "
                           f"network file system without working locks, keep trainer.output_dir on a local "
                           f"disk") from None
        raise UserError(f"{path}: not a readable Optuna study ({text}); {NEW_STUDY}") from None
