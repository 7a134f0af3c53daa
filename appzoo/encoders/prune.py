"""A pretrained encoder cut down: ``model.encoder.prune_vocab``, its vocabulary cut to
the pieces of the run's data; ``model.encoder.layers``, its first N layers only
(:func:`keep_layers`: a faster student initialised from the teacher's lower layers).

A multilingual SentencePiece vocabulary (250,002 pieces for XLM-R and
multilingual-e5) is most of such an encoder: 96M of multilingual-e5-small's
118M parameters are its embedding rows, and a Chinese corpus uses a few
thousand of them. Pruning keeps the special tokens, every piece that the
run's training, dev and test files tokenize into (as the reader encodes them,
so a per-character NER encoding counts its own pieces) and the pieces of a
``keep_pieces`` file, in their original order; the embedding keeps those rows.

Tokenisation is unchanged: the text is cut into the full vocabulary's pieces,
then each id is mapped to the pruned model's (:meth:`UnigramTokenizer.restrict
<appzoo.data.unigram.UnigramTokenizer.restrict>`), and a piece outside the
kept ones is read as ``<unk>`` and counted. The kept ids are saved with the
model (``encoder/pruned_vocab.json``), so the Predictor, the exported graphs
and the server read text as training did. On the kept pieces the pruned model
computes exactly what the full one does.
"""
import numpy as np

from appzoo.errors import ConfigError

PRUNE = "model.encoder.prune_vocab"
KEEP = "model.encoder.keep_pieces"


def read_keep_pieces(path, tokenizer):
    """The full-vocabulary ids of a ``keep_pieces`` file: one piece per line
    (``▁`` marks a word start, as in the vocabulary); blank lines are skipped.
    A line that is no piece is a ConfigError naming the key and ``file:line``."""
    ids = []
    try:
        with open(path, encoding="utf-8-sig") as f:  # a BOM (Notepad's UTF-8) is no piece
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{KEEP}: {path}: cannot be read ({getattr(e, 'strerror', None) or e}); expected "
                          f"UTF-8 text, one piece per line") from None
    for number, line in enumerate(lines, 1):
        piece = line.rstrip("\r")
        if not piece.strip():
            continue
        found = tokenizer.piece_id(piece)
        if found is None:
            raise ConfigError(f"{KEEP}: {path}:{number}: {piece[:40]!r} is not a piece of the encoder's vocabulary "
                              f"(one piece per line, '\u2581' marking a word start)")
        ids.append(found)
    return ids


def used_ids(encoded_splits):
    """The set of full-vocabulary token ids in the features of each split
    (every key ending in ``input_ids``)."""
    used = set()
    for features in encoded_splits:
        for feature in features:
            for key, value in feature.items():
                if key.endswith("input_ids"):
                    used.update(value)
    return used


def prune(encoder, tokenizer, ids):
    """Cut ``encoder``'s word embedding and ``tokenizer`` to the sorted full ids
    ``ids`` (the special tokens are added); returns ``(kept, parameters
    before, parameters after)``."""
    import paddle

    before = sum(int(np.prod(p.shape)) for p in encoder.parameters())
    specials = tokenizer._full_special.values()
    kept = sorted(set(ids) | set(specials))
    old = encoder.get_input_embeddings()
    rows = old.weight.numpy()[np.asarray(kept, dtype="int64")]
    new = paddle.nn.Embedding(len(kept), rows.shape[1])
    new.weight.set_value(rows)
    encoder.set_input_embeddings(new)
    encoder.config.vocab_size = len(kept)
    tokenizer.restrict(kept)
    after = sum(int(np.prod(p.shape)) for p in encoder.parameters())
    return kept, before, after


def keep_layers(encoder, n):
    """Keep the first ``n`` transformer layers of ``encoder`` (a PaddleNLP BERT- or
    ERNIE-family model, whose ``encoder`` is a ``paddle.nn.TransformerEncoder`` or a
    layer list); its config says ``n``, so the saved model reloads with ``n``. Returns
    the number of layers it had. ConfigError for more layers than it has."""
    import paddle

    stack = encoder.encoder
    layers = transformer_layers(encoder)
    depth = len(layers)
    if n > depth:
        raise ConfigError(f"model.encoder.layers: {n} is more than the encoder's {depth} layers; "
                          f"give 1 to {depth}, or null for all")
    if hasattr(stack, "layers"):
        stack.layers = paddle.nn.LayerList(list(layers)[:n])
        stack.num_layers = n
    else:
        encoder.encoder = paddle.nn.LayerList(list(layers)[:n])
    encoder.config.num_hidden_layers = n
    return depth


def transformer_layers(encoder):
    """The transformer layers of a PaddleNLP BERT- or ERNIE-family ``encoder``, bottom first: its ``encoder``'s
    ``layers`` (a ``paddle.nn.TransformerEncoder``) or its ``encoder`` itself (a layer list); None for an encoder
    of another shape."""
    import paddle

    stack = getattr(encoder, "encoder", None)
    layers = stack.layers if hasattr(stack, "layers") else stack
    return layers if isinstance(layers, paddle.nn.LayerList) else None
