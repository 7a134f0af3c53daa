"""An encoder's files read and checked, each problem one line naming the file.

The checks are cheap (nothing is built): a JSON file holds an object, the
tokenizer's files are there, a weights file is not visibly truncated or
corrupt.
"""
import inspect
import json
import os
import re
import zipfile

from appzoo.errors import UserError
from appzoo.data.unigram import TOKENIZER_FILE, is_unigram_folder

TORCH_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def paddle_weights_name():
    """PaddleNLP's file name for a model's Paddle weights (paddlenlp is imported
    on use: importing it takes seconds)."""
    from paddlenlp.utils.env import PADDLE_WEIGHTS_NAME

    return PADDLE_WEIGHTS_NAME


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def read_json_object(path, prefix, error, duplicates=False):
    """``(text, object)`` of a JSON file that must hold an object; any problem
    is ``error`` with ``prefix + path(:line): reason``."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise error(f"{prefix}{path}: cannot be read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise error(f"{prefix}{path}:{line}: invalid UTF-8 byte 0x{raw[e.start]:02x}; "
                    f"the file is corrupt or not a JSON config") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates if duplicates else None)
    except _DuplicateKey as e:
        key = e.args[0]
        lines = [m.start() for m in re.finditer(r'"%s"\s*:' % re.escape(key), text)]
        line = text.count("\n", 0, lines[-1]) + 1 if lines else 1
        raise error(f"{prefix}{path}:{line}: {key}: duplicate key") from None
    except json.JSONDecodeError as e:
        raise error(f"{prefix}{path}:{e.lineno}: not valid JSON ({e.msg})" +
                    ("; the file is empty" if not text.strip() else "")) from None
    if not isinstance(value, dict):
        raise error(f"{prefix}{path}: must hold a JSON object, got {type(value).__name__}")
    return text, value


def check_encoder_folder(folder, prefix, error, weights=True):
    """Cheap checks of an encoder folder (no weights are loaded): ``config.json``
    is a JSON object, the tokenizer's files are there, and (when ``weights``)
    one weights file is there and is not visibly truncated or corrupt. Returns
    the weights file's name (or None). Raises ``error`` naming the file."""
    files = set(os.listdir(folder))
    if "config.json" not in files:
        raise error(f"{prefix}{folder!r} has no config.json")
    read_json_object(os.path.join(folder, "config.json"), prefix, error)
    _check_tokenizer_files(folder, prefix, error)
    if not weights:
        return None
    paddle_weights = paddle_weights_name()
    found = [name for name in (paddle_weights, *TORCH_WEIGHTS) if name in files]
    if not found:
        raise error(f"{prefix}{folder!r} has no weights file "
                    f"(expected {paddle_weights}, {' or '.join(TORCH_WEIGHTS)})")
    path = os.path.join(folder, found[0])
    problem = weights_problem(path)
    if problem:
        raise error(f"{prefix}{path}: cannot be read as {_weights_kind(path)} weights ({problem}); "
                    f"the file is truncated or corrupt")
    return found[0]


def _tokenizer_class(folder, prefix, error):
    """The PaddleNLP tokenizer class named by ``tokenizer_config.json``, or None
    when the file names none (PaddleNLP then guesses from the folder name)."""
    path = os.path.join(folder, "tokenizer_config.json")
    if not os.path.isfile(path):
        raise error(f"{prefix}{path}: missing; the tokenizer cannot be loaded without it "
                    f"(save one with tokenizer.save_pretrained(DIR))")
    _, settings = read_json_object(path, prefix, error)
    name = settings.get("init_class") or settings.get("tokenizer_class")
    if not name:
        return None
    import paddlenlp.transformers as transformers

    cls = getattr(transformers, str(name), None)
    if not isinstance(cls, type) or not hasattr(cls, "resource_files_names"):
        raise error(f"{prefix}{path}: tokenizer_class {name!r} is not a PaddleNLP tokenizer")
    return cls


def _check_tokenizer_files(folder, prefix, error):
    if is_unigram_folder(folder):  # read by appzoo.data.unigram, which needs no tokenizer_config.json
        if os.path.isfile(os.path.join(folder, TOKENIZER_FILE)):  # else a sentencepiece.bpe.model, read on loading
            read_json_object(os.path.join(folder, TOKENIZER_FILE), prefix, error)
        return
    cls = _tokenizer_class(folder, prefix, error)
    if cls is None:
        return
    params = inspect.signature(cls.__init__).parameters
    for arg, name in cls.resource_files_names.items():
        required = arg in params and params[arg].default is inspect.Parameter.empty
        path = os.path.join(folder, name)
        if required and not os.path.isfile(path):
            raise error(f"{prefix}{path}: missing; {cls.__name__} needs it")
        if required and os.path.getsize(path) == 0:
            raise error(f"{prefix}{path}: the file is empty; {cls.__name__} needs it")


def _weights_kind(path):
    return {"model.safetensors": "safetensors", "pytorch_model.bin": "PyTorch"}.get(os.path.basename(path), "Paddle")


def weights_problem(path):
    """Why a weights file is visibly truncated or corrupt, from its size, header
    and last byte (nothing is loaded), or None when it looks whole."""
    size = os.path.getsize(path)
    if size == 0:
        return "the file is empty"
    kind = _weights_kind(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if kind == "safetensors":
            if size < 8:
                return f"the file has only {size} bytes"
            length = int.from_bytes(head, "little")
            if length > size - 8:
                return f"its header claims {length} bytes but the file has {size}"
            try:
                header = json.loads(f.read(length))
                end = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"),
                          default=0)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                return "its header is not a safetensors header"
            if 8 + length + int(end) > size:
                return f"the file has {size} bytes but its tensors need {8 + length + int(end)}"
            return None
        if kind == "PyTorch":
            if head.startswith(b"PK"):
                try:
                    with zipfile.ZipFile(path) as archive:
                        archive.namelist()
                except (zipfile.BadZipFile, OSError) as e:
                    return f"a damaged zip archive: {e}"
                return None
            return None if head.startswith(b"\x80") else "it is neither a zip archive nor a pickle"
        f.seek(size - 1)
        last = f.read(1)
    if head[:1] != b"\x80" or head[1:2] not in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "it does not start like a Paddle (pickle) file"
    if last != b".":
        return "it ends before its data does"
    return None


def check_state_file(path):
    """Cheap check of a saved state dict file (see :func:`weights_problem`)."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file; the saved model is incomplete")
    problem = weights_problem(path)
    if problem:
        raise UserError(f"{path}: cannot be read as {_weights_kind(path)} weights ({problem}); the file is truncated "
                        f"or corrupt")

