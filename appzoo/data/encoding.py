"""The one tokenizer call and the one padding collator every task's reader uses."""
import numpy as np

from appzoo.data import fast_tokenizer
from appzoo.data.unigram import UnigramTokenizer
from appzoo.utils.progress import note, progress

#: what a padded label position holds: the ``ignore_index`` every loss skips
IGNORE_INDEX = -100
_CHUNK = 1000  # texts per tokenizer call: big enough to amortise its overhead, small enough for a progress bar


def encode_texts(tokenizer, texts, texts_b=None, *, max_seq_len=None, split="", what="texts",
                 special_tokens=True, word_start=True, offsets=False):
    """Token ids of each text, or of each pair ``(texts[i], texts_b[i])`` as one
    sequence ``[CLS] a [SEP] b [SEP]``: ``{"input_ids": [...], "token_type_ids": [...]}``,
    one list per text.

    With ``max_seq_len`` a sequence is cut to it, and a note says how many of
    the ``split``'s ``what`` (texts, pairs, ...) reached it; without, nothing
    is cut. ``special_tokens=False`` gives a text's word pieces alone.
    ``word_start=False`` reads each text as a token inside a longer text: a
    SentencePiece tokenizer's bare word-start piece ``▁`` before the token's
    other pieces is dropped (a Chinese character is one piece, not two; no
    effect on a BERT tokenizer). ``offsets=True`` adds ``"offsets"``: each
    id's ``(start, end)`` characters in its text, ``(0, 0)`` for a special token.

    The ids are paddlenlp's, computed by its Rust twin where there is one
    (:mod:`appzoo.data.fast_tokenizer`; ``APPZOO_TOKENIZER=python`` turns it
    off); an XLM-R-family ``tokenizer.json`` is run by ``tokenizers`` itself
    (:mod:`appzoo.data.unigram`). A pruned vocabulary's tokenizer reads a
    piece outside it as ``<unk>``; a note says how many.
    """
    texts = list(texts)
    out = {"input_ids": [], "token_type_ids": [], **({"offsets": []} if offsets else {})}
    unknown_before = getattr(tokenizer, "unknown_pieces", 0)
    for start in progress(range(0, len(texts), _CHUNK), desc=f"tokenize {split}".strip(), unit="k texts",
                          leave=False):
        chunk, chunk_b = texts[start:start + _CHUNK], texts_b[start:start + _CHUNK] if texts_b is not None else None
        if isinstance(tokenizer, UnigramTokenizer):
            encoded = tokenizer.encode(chunk, chunk_b, max_seq_len=max_seq_len, special_tokens=special_tokens,
                                       word_start=word_start, offsets=offsets)
        else:
            encoded = fast_tokenizer.encode(tokenizer, chunk, chunk_b, max_seq_len=max_seq_len,
                                            special_tokens=special_tokens, offsets=offsets)
        for key in out:
            out[key].extend(encoded[key])
    truncated = sum(len(ids) == max_seq_len for ids in out["input_ids"]) if max_seq_len else 0
    if truncated:
        note(f"note: {truncated} of {len(texts)} {split} {what} reach max_seq_len={max_seq_len} and are cut to it")
    unknown = getattr(tokenizer, "unknown_pieces", 0) - unknown_before
    if unknown:  # model.encoder.prune_vocab: a piece its data files did not have
        note(f"note: {unknown} pieces of the {split} {what} are outside the model's pruned vocabulary and are "
             f"read as <unk>")
    return out


def collate(features, pad_values):
    """One batch of numpy arrays from a list of features (dicts).

    Every key that all features have becomes one array: a list value (token
    ids, positions, label sequences) is right-padded to the longest with
    ``pad_values[key]`` (0 when not given) into ``[B, max_len]``; arrays whose
    first dimension differs (a teacher's ``[words, C]`` logits) are padded
    along it the same way into ``[B, max_len, ...]``; any other value (a
    number, a tuple, arrays of one shape) is stacked into ``[B, ...]``.
    Integers become int64.
    """
    keys = [key for key in features[0] if all(key in f for f in features)]
    batch = {}
    for key in keys:
        values = [f[key] for f in features]
        if isinstance(values[0], list):
            batch[key] = pad(values, pad_values.get(key, 0))
        elif isinstance(values[0], np.ndarray) and values[0].ndim and len({v.shape for v in values}) > 1:
            width = max(len(v) for v in values)
            batch[key] = np.full((len(values), width, *values[0].shape[1:]), pad_values.get(key, 0),
                                 dtype=values[0].dtype)
            for i, value in enumerate(values):
                batch[key][i, :len(value)] = value
        else:
            array = np.asarray(values)
            batch[key] = array.astype("int64") if np.issubdtype(array.dtype, np.integer) else array
    return batch


def pad(sequences, value, dtype="int64"):
    """Right-pad a list of lists to a ``[len, max_len]`` array."""
    width = max((len(s) for s in sequences), default=0)
    out = np.full((len(sequences), width), value, dtype=dtype)
    for i, seq in enumerate(sequences):
        out[i, : len(seq)] = seq
    return out
