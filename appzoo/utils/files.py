"""Crash-safe file I/O: atomic writes, JSON and JSONL, Paddle weights, and the fault hook.

Every file a run leaves is written through :func:`write_bytes`: a temporary
file in the same folder, flushed to disk, then renamed over the target, so a
kill or a full disk never leaves a torn file where a complete one was.

``APPZOO_FAULT=POINT[:N][:enospc]`` kills the process (or raises ENOSPC) the
N-th time a save reaches ``POINT``: the tests use it to check that every save
point leaves a resumable folder (see :data:`FAULT_POINTS`).
"""
import errno
import hashlib
import json
import os
import shutil
import signal

from appzoo.errors import RunError, UserError, first_line

#: The save points APPZOO_FAULT can name, in the order a run reaches them.
FAULT_POINTS = ("checkpoint.files", "checkpoint.marker", "checkpoint.rename", "checkpoint.prune",
                "best.files", "best.marker", "best.link", "best.swap", "metrics", "replace.aside")
_fault_hits = {}


def fault(point):
    """Test hook: ``APPZOO_FAULT=POINT[:N][:enospc]``."""
    spec = os.environ.get("APPZOO_FAULT")
    if not spec:
        return
    name, *rest = spec.split(":")
    if name != point:
        return
    nth = int(rest[0]) if rest and rest[0].isdigit() else 1
    _fault_hits[point] = _fault_hits.get(point, 0) + 1
    if _fault_hits[point] != nth:
        return
    if "enospc" in rest:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), point)
    os.kill(os.getpid(), signal.SIGKILL)


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path, data):
    """Write ``data`` to ``path`` atomically: a temporary file in the same
    folder, flushed to disk, then renamed over ``path``."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_text(path, text):
    """:func:`write_bytes` of ``text`` in UTF-8."""
    write_bytes(path, text.encode("utf-8"))


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json(path, obj):
    write_text(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def write_jsonl(path, rows):
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_json(path, what="file"):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise UserError(f"{path}: missing ({what})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot be read as JSON ({e}); the file is truncated or corrupt") from None


def read_jsonl(path):
    """Rows of a JSONL log; a torn last line (a kill mid-write) is dropped."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return rows


def load_weights(path):
    """``paddle.load`` of a saved state dict, with a one-line error for a
    missing, truncated or corrupt file."""
    import paddle

    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file; the saved model is incomplete")
    try:
        state = paddle.load(path)
    except Exception as e:  # paddle raises ValueError, EOFError, UnpicklingError, ... for a bad file
        reason = f"{type(e).__name__}: {first_line(e).replace(path, 'the file')}"
    else:
        if isinstance(state, dict):
            return state
        reason = f"it holds a {type(state).__name__}, not a state dict"
    raise UserError(f"{path}: cannot be read as Paddle weights ({reason}); the file is truncated or corrupt")


def save_tensors(state, path):
    """A state dict as safetensors (plain arrays under a JSON header: reading it runs no code, unlike a pickle),
    flushed to disk."""
    import numpy as np
    from safetensors.numpy import save_file

    save_file({name: np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else value)
               for name, value in state.items()}, path)
    _fsync(path)


def load_tensors(path):
    """A state dict of numpy arrays from a safetensors file, with a one-line error for a missing, truncated or
    corrupt one."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file; the saved model is incomplete")
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        raise UserError(f"{path}: cannot be read as safetensors weights ({type(e).__name__}: "
                        f"{first_line(e).replace(path, 'the file')}); the file is truncated or corrupt") from None


def save_weights(obj, path):
    import paddle

    paddle.save(obj, path)
    _fsync(path)


def remove(path):
    if os.path.islink(path) or os.path.isfile(path):
        os.remove(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def swap_in(tmp, folder):
    """Rename the complete folder ``tmp`` to ``folder``, replacing what was there."""
    if not os.path.exists(folder):
        os.rename(tmp, folder)
        return
    old = f"{folder}.old-{os.getpid()}"
    os.rename(folder, old)
    os.rename(tmp, folder)
    remove(old)


def place_cached(work, target, marker):
    """Rename the complete folder ``work`` to the cache entry ``target``: an incomplete entry there (no
    ``marker`` file) is never trusted and is replaced; a complete one another process placed first is kept."""
    if os.path.isdir(target):
        shutil.rmtree(target)
    try:
        os.replace(work, target)
    except OSError:  # another run put a complete copy there first
        if not os.path.isfile(os.path.join(target, marker)):
            raise


def disk_error(what, folder, error, kept):
    reason = error.strerror or str(error)
    hint = " (free some space)" if error.errno == errno.ENOSPC else ""
    return RunError(f"could not save {what} in {folder}: {reason}{hint}; {kept}")
