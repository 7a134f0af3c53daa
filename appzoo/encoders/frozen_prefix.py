"""A pretrained encoder's frozen prefix (``model.encoder.freeze_layers``): the embeddings and the first N layers,
never trained and run without dropout, and their output for each text kept in a cache on disk.

The prefix's output for a text depends only on the frozen weights and the text's token ids (a padded position
gets no attention), so it is computed once and read back by every later step, epoch and run: Embedding Recycling
(Saad-Falcon et al., EACL Findings 2023). The cache is content-addressed, so it is shared beyond one run:

* its folder (``<cache_dir>/<key>/``) is named by the frozen weights (a pruned vocabulary's embeddings included),
  the encoder's config, N and the stored precision;
* a text's entry is named by its token ids and token types, which the tokenizer, its settings, ``max_seq_len`` and
  the text decide.

So the seeds and settings of a sweep, a search's trials, a resume, a second run into another folder, the label
audit's folds and the run's own eval and predict all read what the first one computed. Entries are written in
chunks (``chunk-*.npz``), each atomically (a temporary name, then a rename): a killed run leaves only whole chunks
and temporary files no reader opens. A chunk that cannot be read, or that names another folder's key, is not
trusted: a note says so, the file is removed and its texts are computed again.

The model itself stays whole: ``best/`` holds every weight, and an exported graph, the Predictor and the server
run the full encoder and need no cache. The cache is a training-time shortcut, attached to the encoder of the
run that trains (:func:`attach`) and used by :func:`appzoo.task.model.encode` in dynamic mode only.
"""
import hashlib
import io
import json
import os
import time
import zipfile

import numpy as np

from appzoo.encoders.prune import transformer_layers
from appzoo.errors import ConfigError
from appzoo.utils import files
from appzoo.utils.progress import note

FREEZE = "model.encoder.freeze_layers"
#: where caches go when ``model.encoder.cache_dir`` is null
DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "appzoo", "prefix")
CHUNK_ROWS = 4096  # texts per chunk file: a killed run loses at most this much of the cache's work
FORMAT = 1  # of the chunk files; part of the folder's key
ATTRIBUTE = "frozen_prefix"  # the encoder attribute encode() looks for
_OPEN = {}  # folder -> PrefixCache: the runs of one process (a sweep, a search) share the entries in memory


def cache_root(spec):
    """The folder that holds the caches of ``spec`` (an :class:`~appzoo.encoders.spec.EncoderSpec`)."""
    return os.path.abspath(os.path.expanduser(spec.cache_dir)) if spec.cache_dir else DEFAULT_DIR


def check_cache_dir(spec, key_path="model.encoder.cache_dir"):
    """Plan time: the cache folder can be made and written (nothing is created here)."""
    if not spec.freeze_layers or spec.prefix_cache == "off":
        return
    root = cache_root(spec)
    probe = root
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise ConfigError(f"{key_path}: {root!r} cannot be made: {probe!r} is a file, not a folder (give a folder "
                          f"the run may write, or set model.encoder.prefix_cache to off)")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{key_path}: {probe!r} is not writable, so the frozen layers' cache {root!r} cannot be "
                          f"written (give a folder the run may write, or set model.encoder.prefix_cache to off)")


def attach(encoder, spec):
    """Freeze ``spec.freeze_layers`` layers of ``encoder`` and attach its :class:`FrozenPrefix` (with its cache
    unless ``prefix_cache`` is off); returns it. ConfigError when the encoder has fewer layers."""
    layers = transformer_layers(encoder)
    if layers is None:
        raise ConfigError(f"{FREEZE}: this encoder ({type(encoder).__name__}) has no transformer layers to find "
                          f"(model.encoder.encoder.layers); set freeze_layers to 0")
    if spec.freeze_layers > len(layers):
        raise ConfigError(f"{FREEZE}: {spec.freeze_layers} is more than the encoder's {len(layers)} layers; give "
                          f"0 to {len(layers)} ({len(layers)}: the whole encoder)")
    prefix = FrozenPrefix(encoder, spec.freeze_layers)
    if spec.prefix_cache != "off":
        prefix.cache = PrefixCache.open(cache_root(spec), prefix.digest(spec.prefix_cache), spec.prefix_cache,
                                        encoder.config.hidden_size)
    setattr(encoder, ATTRIBUTE, prefix)
    return prefix


def detach(encoder):
    """Take the :class:`FrozenPrefix` off ``encoder``: it is the whole encoder again (the model a run leaves)."""
    if attached(encoder) is not None:
        delattr(encoder, ATTRIBUTE)


def attached(encoder):
    """The encoder's :class:`FrozenPrefix`, or None."""
    return getattr(encoder, ATTRIBUTE, None)


class FrozenPrefix:
    """The frozen embeddings and first ``n`` layers of ``encoder``, and the encoder's forward split at them."""

    def __init__(self, encoder, n):
        self.encoder, self.n = encoder, n
        self.stack, self.layers = encoder.encoder, transformer_layers(encoder)
        self.frozen = [encoder.embeddings, *list(self.layers)[:n]]
        for layer in self.frozen:
            for p in layer.parameters():
                p.stop_gradient = True
        self.cache = None  # a PrefixCache, or None: computed at every step
        self.computed = 0  # texts whose prefix this process computed
        self.read = 0  # texts whose prefix came from the cache
        self.skip_top = False  # warming the cache: the layers above are not run (their output is not used)

    def frozen_parameters(self):
        return sum(int(np.prod(p.shape)) for layer in self.frozen for p in layer.parameters())

    def digest(self, precision):
        """The cache folder's key: the frozen weights, the encoder's config, ``n``, the precision, the format."""
        content = hashlib.sha256()
        for layer in self.frozen:
            for name, value in sorted(layer.state_dict().items()):
                array = np.ascontiguousarray(value.numpy())
                content.update(f"{name}:{array.dtype}:{array.shape}".encode())
                content.update(array.tobytes())
        config = {k: v for k, v in sorted(self.encoder.config.to_dict().items())
                  if isinstance(v, (int, float, str, bool)) or v is None}
        key = {"weights": content.hexdigest(), "config": config, "layers": self.n, "precision": precision,
               "format": FORMAT}
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]

    # ---- the split forward --------------------------------------------------------
    def __call__(self, input_ids, token_type_ids, attention):
        """``(sequence, pooled)`` as the whole encoder gives them: the prefix's output (cached or computed), then
        the layers above it, the stack's final norm and the pooler."""
        hidden = self.prefix_states(input_ids, token_type_ids, attention)
        if self.skip_top:
            return hidden, hidden[:, 0]
        for layer in list(self.layers)[self.n:]:
            hidden = self._layer(layer, hidden, attention)
        if getattr(self.stack, "norm", None) is not None:
            hidden = self.stack.norm(hidden)
        return hidden, self.encoder.pooler(hidden)

    def _layer(self, layer, hidden, attention):
        out = layer(hidden, src_mask=attention) if hasattr(self.stack, "layers") else layer(hidden, attention)
        return out[0] if isinstance(out, tuple) else out

    def _compute(self, input_ids, token_type_ids, attention):
        """The prefix's output ``[B, T, H]``, computed in eval mode (no dropout) without gradients."""
        import paddle

        modes = [layer.training for layer in self.frozen]
        try:
            for layer in self.frozen:
                layer.eval()
            with paddle.no_grad():
                hidden = self.encoder.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
                for layer in self.frozen[1:]:
                    hidden = self._layer(layer, hidden, attention)
        finally:
            for layer, mode in zip(self.frozen, modes):
                layer.train() if mode else layer.eval()
        return hidden

    def prefix_states(self, input_ids, token_type_ids, attention):
        """The prefix's output for a batch: each row read from the cache or computed (and cached)."""
        import paddle

        if self.cache is None:
            self.computed += int(input_ids.shape[0])
            return self._compute(input_ids, token_type_ids, attention)
        ids = input_ids.numpy()
        types = token_type_ids.numpy() if token_type_ids is not None else np.zeros_like(ids)
        real = attention.numpy().reshape(ids.shape) == 0  # the additive mask: 0 on real tokens
        lengths = real.sum(axis=1)
        if not all(real[i, :n].all() for i, n in enumerate(lengths)):  # padding inside a row: not cacheable
            self.computed += len(ids)
            return self._compute(input_ids, token_type_ids, attention)
        keys = [row_key(ids[i, :n], types[i, :n]) for i, n in enumerate(lengths)]
        rows = [self.cache.get(k) for k in keys]
        missing = [i for i, row in enumerate(rows) if row is None]
        if missing:
            width = int(lengths[missing].max())
            sub = [paddle.to_tensor(a[missing][:, :width]) for a in (ids, types)]
            mask = paddle.to_tensor(attention.numpy()[missing][..., :width])
            computed = self._compute(sub[0], sub[1], mask).numpy()
            for j, i in enumerate(missing):
                rows[i] = self.cache.put(keys[i], computed[j, :lengths[i]])
            self.computed += len(missing)
        self.read += len(ids) - len(missing)
        states = np.zeros(ids.shape + (rows[0].shape[-1],), dtype="float32")
        for i, row in enumerate(rows):
            states[i, :len(row)] = row
        return paddle.to_tensor(states)

    def close(self):
        """Write what this process computed and has not saved yet."""
        if self.cache is not None:
            self.cache.flush()

    def summary(self):
        """One line: what is frozen, where its cache is and how big, what was read and computed."""
        depth = len(self.layers)
        what = "the whole encoder" if self.n == depth else f"the embeddings and {self.n} of {depth} layers"
        line = f"{FREEZE}: {what} frozen ({self.frozen_parameters() / 1e6:.1f}M parameters)"
        if self.cache is None:
            return f"{line}, computed at every step (prefix_cache off)"
        return (f"{line}; their output for {self.read + self.computed:,} text(s): {self.read:,} read from the cache, "
                f"{self.computed:,} computed; the cache: {self.cache.folder} ({len(self.cache):,} texts, "
                f"{self.cache.size_bytes() / 2**20:.1f} MB on disk)")


def row_key(ids, types):
    """A text's entry in the cache: its token ids and token types."""
    content = hashlib.sha1(np.ascontiguousarray(ids, dtype="int64").tobytes())
    content.update(b"|")
    content.update(np.ascontiguousarray(types, dtype="int64").tobytes())
    return content.digest()


class PrefixCache:
    """The prefix's outputs of one folder: ``{text key: [tokens, hidden] array}``, in memory and in chunk files."""

    def __init__(self, folder, key, precision, hidden):
        self.folder, self.key, self.hidden = folder, key, hidden
        self.dtype = np.float16 if precision == "fp16" else np.float32
        self.rows = {}
        self.pending = {}  # computed, not yet written
        self.unwritable = None  # why a chunk could not be written (said once; the run goes on)
        self._load()

    @classmethod
    def open(cls, root, key, precision, hidden):
        """The cache of ``key`` under ``root``, shared within the process."""
        folder = os.path.join(root, key)
        if folder not in _OPEN:
            _OPEN[folder] = cls(folder, key, precision, hidden)
        return _OPEN[folder]

    def __len__(self):
        return len(self.rows)

    def get(self, key):
        return self.rows.get(key)

    def put(self, key, states):
        row = np.ascontiguousarray(states, dtype=self.dtype)
        self.rows[key] = self.pending[key] = row
        if len(self.pending) >= CHUNK_ROWS:
            self.flush()
        return row

    def size_bytes(self):
        if not os.path.isdir(self.folder):
            return 0
        return sum(os.path.getsize(os.path.join(self.folder, n)) for n in os.listdir(self.folder)
                   if n.startswith("chunk-") and n.endswith(".npz"))

    # ---- on disk -----------------------------------------------------------------
    def _chunks(self):
        if not os.path.isdir(self.folder):
            return []
        return sorted(n for n in os.listdir(self.folder) if n.startswith("chunk-") and n.endswith(".npz"))

    def _load(self):
        for name in self._chunks():
            path = os.path.join(self.folder, name)
            try:
                rows = self._read(path)
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
                note(f"note: {FREEZE}: {path} cannot be trusted ({type(e).__name__}: {e}); it is removed and "
                     f"its texts are computed again")
                try:
                    os.remove(path)
                except OSError:
                    pass
                continue
            self.rows.update(rows)

    def _read(self, path):
        with np.load(path) as saved:
            key = bytes(saved["key"]).decode("ascii", "replace")
            keys, offsets, states = saved["keys"], saved["offsets"], saved["states"]
        if key != self.key:
            raise ValueError(f"it belongs to the cache {key!r}, not {self.key!r}")
        if states.ndim != 2 or states.shape[1] != self.hidden or states.dtype != self.dtype:
            raise ValueError(f"its states are {states.dtype} {list(states.shape)}, expected "
                             f"{np.dtype(self.dtype).name} [tokens, {self.hidden}]")
        if keys.ndim != 2 or keys.shape[1] != 20 or offsets.shape != (len(keys) + 1,) \
                or offsets[0] != 0 or offsets[-1] != len(states) or (np.diff(offsets) < 1).any():
            raise ValueError("its index does not match its states")
        return {bytes(k): states[a:b] for k, a, b in zip(keys, offsets[:-1], offsets[1:])}

    def flush(self):
        """Write the pending entries as one chunk (atomically); a folder that cannot be written is said once and
        the run goes on with the entries in memory."""
        if not self.pending or self.unwritable:
            return
        keys = list(self.pending)
        rows = [self.pending[k] for k in keys]
        offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype("int64")
        buffer = io.BytesIO()
        np.savez(buffer, key=np.frombuffer(self.key.encode("ascii"), dtype="uint8"),
                 keys=np.frombuffer(b"".join(keys), dtype="uint8").reshape(len(keys), 20),
                 offsets=offsets, states=np.concatenate(rows))
        name = f"chunk-{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}-{hashlib.sha1(b''.join(keys)).hexdigest()[:12]}.npz"
        try:
            os.makedirs(self.folder, exist_ok=True)
            files.write_bytes(os.path.join(self.folder, name), buffer.getvalue())
        except OSError as e:
            self.unwritable = f"{type(e).__name__}: {e}"
            note(f"note: {FREEZE}: the cache cannot be written in {self.folder} ({self.unwritable}); the run goes "
                 f"on with the frozen layers' output in memory")
            return
        self.pending.clear()
