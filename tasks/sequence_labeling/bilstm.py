"""A bidirectional LSTM over right-padded rows that reads each row to its own length, on every engine."""
import paddle


class BiLstm(paddle.nn.Layer):
    """Stacked bidirectional LSTM, ``[B, T, input_size]`` -> ``[B, T, 2 * hidden_size]`` (forward states, then
    backward states), over right-padded rows whose real positions ``mask`` marks.

    The forward direction reaches a real position before any padding. The backward direction reads each row
    reversed within its length (its real positions first, its padding last, where it stays) and is turned back
    after, so no padding enters the state of a real position either. Outputs at padded positions are not zeros:
    the heads ignore them.

    Not ``paddle.nn.LSTM(direction="bidirect")`` with ``sequence_length``: that is right in dygraph and in
    Paddle Inference, but paddle2onnx (1.x) converts it to an ONNX LSTM without its ``sequence_lens``, so on
    ONNX Runtime the backward direction of a padded row starts in the padding (its logits differ from dygraph
    by up to 0.5 on a 4-unit test). Two one-way LSTMs per layer and a gather convert as they run.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, dropout=0.0):
        super().__init__()
        sizes = [input_size] + [2 * hidden_size] * (num_layers - 1)
        self.forward_layers = paddle.nn.LayerList([paddle.nn.LSTM(size, hidden_size) for size in sizes])
        self.backward_layers = paddle.nn.LayerList([paddle.nn.LSTM(size, hidden_size) for size in sizes])
        self.dropout = paddle.nn.Dropout(dropout)  # between layers, as paddle.nn.LSTM's dropout

    def forward(self, states, mask):
        """``states`` [B, T, H]; ``mask`` [B, T] bool, True on each row's real positions (right-padded)."""
        reverse = reversed_within_length(mask)
        for i, (ahead, behind) in enumerate(zip(self.forward_layers, self.backward_layers)):
            if i:
                states = self.dropout(states)
            forward_states, _ = ahead(states)
            backward_states, _ = behind(_gather(states, reverse))
            states = paddle.concat([forward_states, _gather(backward_states, reverse)], axis=-1)
        return states


def reversed_within_length(mask):
    """``[B, T]`` int64: for each row, the index of position t read backwards within its length
    (``length - 1 - t``), and t itself on the padding. It is its own inverse."""
    mask = mask.astype("int64")
    lengths = mask.sum(axis=1, keepdim=True)
    steps = paddle.cumsum(paddle.ones_like(mask), axis=1) - 1  # no shape query: the exported graph's T is dynamic
    return paddle.where(steps < lengths, lengths - 1 - steps, steps)


def _gather(states, index):
    return paddle.take_along_axis(states, index.unsqueeze(-1).expand([-1, -1, states.shape[-1]]), axis=1)
