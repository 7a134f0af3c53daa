"""Sentences longer than ``max_seq_len`` as overlapping windows of word pieces,
and the windows' predictions merged back into one tag per token.

Every input token gets exactly one predicted tag: tokens are tokenised one
by one (a token the tokenizer drops, such as a space, becomes ``[UNK]``), the
first piece of each token carries its tag, and each token takes the tag of the
window where it has the most context.
"""
import numpy as np

from appzoo.data.encoding import encode_texts
from appzoo.metrics.sequence_labeling import entity_spans
from appzoo.utils.progress import note, progress


def window_features(examples, tokenizer, labels, max_seq_len, overlap, split):
    """One feature per window: ``input_ids`` (``[CLS]`` pieces ``[SEP]``), the
    ``positions`` of each token's first piece, the window's token ``span`` in
    its sentence (``example``), and the tags' indices in ``labels``."""
    budget = max_seq_len - 2  # [CLS] and [SEP]
    index = {name: i for i, name in enumerate(labels)}
    pieces_of, cut = token_pieces(tokenizer, (t for e in examples for t in e["tokens"]), budget, split)
    features, windowed = [], 0
    for number, example in enumerate(progress(examples, desc=f"align {split}", unit="sent", leave=False,
                                              mininterval=2)):
        pieces = [pieces_of[token] for token in example["tokens"]]
        spans = windows([len(p) for p in pieces], budget, overlap)
        windowed += len(spans) > 1
        tags = [index[t] for t in example["tags"]] if example["tags"] is not None else None
        for start, end in spans:
            ids, positions = [tokenizer.cls_token_id], []
            for piece_ids in pieces[start:end]:
                positions.append(len(ids))
                ids.extend(piece_ids)
            ids.append(tokenizer.sep_token_id)
            feature = {"input_ids": ids, "positions": positions, "lengths": len(positions), "example": number,
                       "span": (start, end), "sentence_edges": (int(start == 0), int(end == len(pieces)))}
            if tags is not None:
                feature["labels"] = tags[start:end]
            features.append(feature)
    if windowed:
        note(f"note: {windowed} of {len(examples)} {split} sentences are longer than "
             f"max_seq_len={max_seq_len} and are split into overlapping windows "
             f"(window_overlap={overlap} tokens)")
    if cut:
        note(f"note: {cut} distinct {split} token(s) have more than {budget} word pieces; "
             f"only their first {budget} pieces are used")
    return features


def merge_windows(examples, features, rows):
    """Each sentence's tag indices from its windows' ``rows``: each token takes
    the tag of the window in which it is farthest from a cut edge. A row may hold
    an array per token (a window's ``[words, C]`` logits): the sentence's rows are
    then ``[tokens, C]``."""
    first = np.asarray(rows[0]) if len(rows) else np.zeros(0, "int64")
    tags = [np.full((len(e["tokens"]), *first.shape[1:]), -1, dtype=first.dtype) for e in examples]
    context = [np.full(len(e["tokens"]), -1, dtype="int64") for e in examples]
    for feature, row in zip(features, rows):
        number, (start, end) = feature["example"], feature["span"]
        position = np.arange(start, end)
        far = np.full_like(position, len(tags[number]))  # a real sentence edge is not a cut
        left = far if feature["sentence_edges"][0] else position - start
        right = far if feature["sentence_edges"][1] else end - 1 - position
        score = np.minimum(left, right)
        better = score > context[number][start:end]
        tags[number][start:end][better] = np.asarray(row[:end - start])[better]
        context[number][start:end][better] = score[better]
    for example, seen in zip(examples, context):
        if (seen < 0).any():  # an encode/decode bug, never the user's data
            raise RuntimeError(f"{example['path']}:{example['line']}: a token got no prediction")
    return tags


def split_entities(examples, features, scheme):
    """``(cut, broken)``: the sentences cut into several windows, and the gold
    entities ``(sentence, type, start, end)`` that no single window holds whole."""
    spans = {}
    for feature in features:
        spans.setdefault(feature["example"], []).append(feature["span"])
    cut = [n for n, s in spans.items() if len(s) > 1]
    broken = [(n, kind, start, end) for n in cut
              for kind, start, end in entity_spans(examples[n]["tags"], scheme)
              if not any(a <= start and end <= b for a, b in spans[n])]
    return cut, broken


def token_pieces(tokenizer, tokens, budget, split):
    """``({token: word-piece ids}, cut)`` for each distinct input token, at
    most ``budget`` pieces each (``cut``: how many had more). A token the
    tokenizer drops entirely (a space, a control character) becomes
    ``[UNK]``, so that it keeps its position and its tag. Each token is read
    as a part of its sentence (``word_start=False``): with a SentencePiece
    tokenizer a Chinese character is then one piece, not ``▁`` and itself."""
    distinct = list(dict.fromkeys(tokens))
    encoded = encode_texts(tokenizer, distinct, split=split, special_tokens=False, word_start=False)["input_ids"]
    pieces = {token: (ids or [tokenizer.unk_token_id])[:budget] for token, ids in zip(distinct, encoded)}
    return pieces, sum(len(ids) > budget for ids in encoded)


def windows(piece_counts, budget, overlap):
    """``[(start, end)]`` token ranges, each fitting ``budget`` pieces; the next
    window starts ``overlap`` tokens before the previous one ended (and at
    least one token later than it started). One window when all fit."""
    spans, start, total = [], 0, len(piece_counts)
    while True:
        end, used = start, 0
        while end < total and used + piece_counts[end] <= budget:
            used += piece_counts[end]
            end += 1
        spans.append((start, end))
        if end >= total:
            return spans
        start = max(start + 1, end - overlap)

