"""A linear-chain CRF with optional transition constraints, vectorised over the batch.

Written here rather than taken from ``paddlenlp.layers.LinearChainCrf`` so
that the constraints (a tag scheme's forbidden transitions) act the same way
in the likelihood and in Viterbi decoding, and so that a window cut out of a
longer sentence can skip the start / end constraints it does not have.
"""
import numpy as np
import paddle

#: added to the score of a forbidden transition; large enough that no allowed
#: path loses to a forbidden one, small enough that logsumexp stays finite
FORBIDDEN = -1e4


class LinearChainCrf(paddle.nn.Layer):
    """Scores ``start[y0] + sum_t emit[t, y_t] + sum_t trans[y_{t-1}, y_t] + end[y_last]``.

    Args:
        num_tags: C.
        allowed: optional ``(trans [C, C], start [C], end [C])`` boolean arrays;
            False entries get :data:`FORBIDDEN` added to their score.
    """

    def __init__(self, num_tags, allowed=None):
        super().__init__()
        init = paddle.nn.initializer.Uniform(-0.1, 0.1)
        self.transitions = self.create_parameter([num_tags, num_tags], default_initializer=init)
        self.start = self.create_parameter([num_tags], default_initializer=init)
        self.end = self.create_parameter([num_tags], default_initializer=init)
        if allowed is None:
            allowed = (np.ones((num_tags, num_tags), bool), np.ones(num_tags, bool), np.ones(num_tags, bool))
        for name, mask in zip(("trans_penalty", "start_penalty", "end_penalty"), allowed):
            penalty = np.where(np.asarray(mask, bool), 0.0, FORBIDDEN).astype("float32")
            # rebuilt from the tag scheme, so not saved with the weights
            self.register_buffer(name, paddle.to_tensor(penalty), persistable=False)

    def _scores(self, batch_size, use_start, use_end):
        """Transition, start and end scores with the penalties applied; start
        and end penalties only where ``use_start`` / ``use_end`` ([B] float)."""
        trans = self.transitions + self.trans_penalty
        start = self.start.unsqueeze(0) + use_start.unsqueeze(-1) * self.start_penalty.unsqueeze(0)
        end = self.end.unsqueeze(0) + use_end.unsqueeze(-1) * self.end_penalty.unsqueeze(0)
        return trans, start.expand([batch_size, -1]), end.expand([batch_size, -1])

    @staticmethod
    def _edges(lengths, edges):
        if edges is None:
            ones = paddle.ones([lengths.shape[0]], dtype="float32")
            return ones, ones
        edges = edges.astype("float32")
        return edges[:, 0], edges[:, 1]

    def log_likelihood(self, emissions, tags, lengths, edges=None):
        """Per-sequence ``log p(tags | emissions)`` ([B]).

        ``emissions`` [B, T, C]; ``tags`` [B, T] int64 (any value past a
        sequence's length); ``lengths`` [B] (>= 1); ``edges`` [B, 2] (1 where
        the sequence's first / last position is the real start / end of a
        sentence, so the start / end constraints apply; default all 1)."""
        batch, steps, _ = emissions.shape
        use_start, use_end = self._edges(lengths, edges)
        trans, start, end = self._scores(batch, use_start, use_end)
        lengths = lengths.astype("int64")
        tags = paddle.where(tags < 0, paddle.zeros_like(tags), tags)
        mask = (paddle.arange(steps, dtype="int64").unsqueeze(0) < lengths.unsqueeze(1)).astype(emissions.dtype)

        emit = paddle.take_along_axis(emissions, tags.unsqueeze(-1), axis=2).squeeze(-1)  # [B, T]
        gold = paddle.take_along_axis(start, tags[:, :1], axis=1).squeeze(-1) + (emit * mask).sum(axis=1)
        if steps > 1:
            pair = _pairs(trans, tags[:, :-1], tags[:, 1:])  # [B, T-1]
            gold = gold + (pair * mask[:, 1:]).sum(axis=1)
        last = paddle.take_along_axis(tags, (lengths - 1).unsqueeze(-1), axis=1).squeeze(-1)
        gold = gold + paddle.take_along_axis(end, last.unsqueeze(-1), axis=1).squeeze(-1)

        alpha = start + emissions[:, 0]  # [B, C]
        for t in range(1, steps):
            step = paddle.logsumexp(alpha.unsqueeze(2) + trans.unsqueeze(0), axis=1) + emissions[:, t]
            keep = mask[:, t].unsqueeze(-1)
            alpha = keep * step + (1 - keep) * alpha
        log_z = paddle.logsumexp(alpha + end, axis=1)
        return gold - log_z

    def viterbi(self, emissions, lengths, edges=None):
        """Best tag sequence per row ([B, T] int64; positions past a length are 0)."""
        batch, steps, num_tags = emissions.shape
        use_start, use_end = self._edges(lengths, edges)
        trans, start, end = self._scores(batch, use_start, use_end)
        lengths = lengths.astype("int64")
        score = start + emissions[:, 0]
        pointers = []
        for t in range(1, steps):
            total = score.unsqueeze(2) + trans.unsqueeze(0)  # [B, from, to]
            best, arg = total.max(axis=1), total.argmax(axis=1)
            keep = (t < lengths).astype(score.dtype).unsqueeze(-1)
            score = keep * (best + emissions[:, t]) + (1 - keep) * score
            # past the end, point each tag at itself so backtracking carries the last tag back
            stay = paddle.arange(num_tags, dtype="int64").unsqueeze(0).expand([batch, -1])
            pointers.append(paddle.where(keep.astype("bool").expand([-1, num_tags]), arg, stay))
        last = (score + end).argmax(axis=1)  # [B]
        path = [last]
        for pointer in reversed(pointers):
            last = paddle.take_along_axis(pointer, last.unsqueeze(-1), axis=1).squeeze(-1)
            path.append(last)
        tags = paddle.stack(path[::-1], axis=1)
        valid = paddle.arange(steps, dtype="int64").unsqueeze(0) < lengths.unsqueeze(1)
        return paddle.where(valid, tags, paddle.zeros_like(tags))

    def path_allowed(self, tags, lengths, edges=None):
        """[B] bool: the tag sequence uses no forbidden transition."""
        batch, steps = tags.shape
        use_start, use_end = self._edges(lengths, edges)
        tags = paddle.where(tags < 0, paddle.zeros_like(tags), tags)
        lengths = lengths.astype("int64")
        penalty = use_start * paddle.gather(self.start_penalty, tags[:, 0])
        if steps > 1:
            mask = (paddle.arange(1, steps, dtype="int64").unsqueeze(0) < lengths.unsqueeze(1)).astype("float32")
            penalty = penalty + (_pairs(self.trans_penalty, tags[:, :-1], tags[:, 1:]) * mask).sum(axis=1)
        last = paddle.take_along_axis(tags, (lengths - 1).unsqueeze(-1), axis=1).squeeze(-1)
        penalty = penalty + use_end * paddle.gather(self.end_penalty, last)
        return penalty > FORBIDDEN / 2


def _pairs(matrix, rows, cols):
    """``matrix[rows, cols]`` element-wise for index tensors of one shape."""
    flat = (rows * matrix.shape[1] + cols).flatten()
    return paddle.gather(matrix.flatten(), flat).reshape(rows.shape)
