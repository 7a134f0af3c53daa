"""Predict from Python with a trained model, on one of three engines.

    import tasks                     # registers the task readers and models
    from appzoo import Predictor

    p = Predictor("output/cls/best", engine="paddle_inference")
    p.predict(["a text", "another"])  # the rows predictions.jsonl would hold

The reader and the model are rebuilt from ``best/`` (its ``config.json``,
``reader_state.json``, ``encoder/``), so inputs go through the same
tokenisation, collation and decoding as ``--do predict``. Engines:

* ``dygraph``: the Paddle model itself.
* ``paddle_inference``: the static graph of ``<run>/inference/`` (exported
  first when missing or older than ``best/``), on Paddle Inference with
  oneDNN on CPU.
* ``onnxruntime``: that graph converted by paddle2onnx to
  ``inference/model.onnx``, on ONNX Runtime (an optional package).

The exported graph ends at the model's raw outputs (``logits`` or
``scores``); the model's own ``decode`` (softmax, sigmoid, the CRF's Viterbi
with its transitions) runs on the host on every engine, so the engines can
differ only by float rounding in the graph.
"""
import contextlib
import importlib.util
import inspect
import io
import os

import numpy as np

from appzoo import archive
from appzoo.errors import ConfigError, DataError, RunError, UserError
from appzoo.progress import bars

ENGINES = ("dygraph", "paddle_inference", "onnxruntime")
ONNX_FILE = "model.onnx"


def check_engine(engine, key_path="trainer.inference_engine"):
    """ConfigError for an unknown engine, or for one whose package is not installed."""
    if engine not in ENGINES:
        from appzoo.registry import did_you_mean

        raise ConfigError(f"{key_path}: {engine!r} is not an inference engine{did_you_mean(engine, ENGINES)} "
                          f"(accepted: {', '.join(ENGINES)})")
    if engine == "onnxruntime":
        for package in ("onnxruntime", "paddle2onnx"):
            if importlib.util.find_spec(package) is None:
                raise ConfigError(f"{key_path}: 'onnxruntime' needs the {package} package, which is not "
                                  f"installed (pip install {package}; it is optional, not in requirements.txt)")


# ------------------------------------------------------------------ export
def graph_files(folder):
    """``(graph, params)`` of an exported folder: ``model.json`` under Paddle
    3.x's PIR, ``model.pdmodel`` under the old IR; None when not exported."""
    for name in ("model.json", "model.pdmodel"):
        if os.path.isfile(os.path.join(folder, name)) and os.path.isfile(os.path.join(folder, "model.pdiparams")):
            return os.path.join(folder, name), os.path.join(folder, "model.pdiparams")
    return None


def export_is_current(folder, best):
    """True when ``folder`` holds a static graph saved after ``best/`` was."""
    files = graph_files(folder)
    marker = os.path.join(best, archive.MARKER)
    return files is not None and os.path.getmtime(files[1]) >= os.path.getmtime(marker)


def export(model, folder):
    """The model's ``forward`` as a static graph for ``model.input_spec()``,
    written under a temporary name and swapped into ``folder`` whole."""
    import paddle

    tmp = f"{folder}.tmp-{os.getpid()}"
    model.eval()
    static = paddle.jit.to_static(model.forward, input_spec=model.input_spec(), full_graph=True)
    paddle.jit.save(static, os.path.join(tmp, "model"))
    archive.swap_in(tmp, folder)
    return folder


def onnx_model(folder):
    """``folder/model.onnx``, converted from the static graph by paddle2onnx
    when missing or older than the graph."""
    graph, params = graph_files(folder)
    target = os.path.join(folder, ONNX_FILE)
    if os.path.isfile(target) and os.path.getmtime(target) >= os.path.getmtime(params):
        return target
    import paddle2onnx

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            data = paddle2onnx.export(graph, params, save_file=None, opset_version=11, auto_upgrade_opset=True)
    except Exception as e:  # paddle2onnx logs the cause and leaves its result unset
        raise RunError(f"{graph}: paddle2onnx could not convert the graph to ONNX ({type(e).__name__}: "
                       f"{str(e).strip()[:200]}); use engine 'paddle_inference'") from None
    tmp = f"{target}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)
    return target


# ----------------------------------------------------------------- engines
def _threads(num_threads):
    from appzoo.env import available_cores

    if num_threads:
        return num_threads
    return int(os.environ.get("OMP_NUM_THREADS") or available_cores())


class _Dygraph:
    """The Paddle model; gets only the batch keys its ``forward`` takes (no labels)."""

    def __init__(self, model):
        self.model = model
        self.names = [n for n in inspect.signature(model.forward).parameters if n != "labels"]

    def __call__(self, batch):
        import paddle

        return self.model(**{k: paddle.to_tensor(batch[k]) for k in self.names if k in batch})


class _Static:
    """A graph engine: feeds the batch keys named like the graph's inputs and
    returns its outputs under the keys of the model's output dict."""

    def __init__(self, model, input_names):
        import paddle
        from paddle.utils import flatten

        self.input_names = input_names
        dummy = {name: paddle.ones([1, 2], "int64") for name in input_names}
        with paddle.no_grad():
            out = model(**dummy)
        self.output_keys = flatten({key: key for key in out})  # jit.save flattens a dict in this order

    def __call__(self, batch):
        import paddle

        outputs = self.run([np.ascontiguousarray(batch[name]) for name in self.input_names])
        return {key: paddle.to_tensor(value) for key, value in zip(self.output_keys, outputs)}


class _PaddleInference(_Static):
    def __init__(self, model, folder, num_threads, mkldnn=True):
        import paddle.inference as pi

        graph, params = graph_files(folder)
        config = pi.Config(graph, params)
        config.disable_gpu()
        config.set_cpu_math_library_num_threads(num_threads)
        if mkldnn:  # oneDNN kernels on CPU: measured in docs/deployment.md
            config.enable_mkldnn()
        config.disable_glog_info()
        self.predictor = pi.create_predictor(config)
        super().__init__(model, self.predictor.get_input_names())

    def run(self, arrays):
        for name, array in zip(self.input_names, arrays):
            self.predictor.get_input_handle(name).copy_from_cpu(array)
        self.predictor.run()
        return [self.predictor.get_output_handle(name).copy_to_cpu() for name in self.predictor.get_output_names()]


class _OnnxRuntime(_Static):
    def __init__(self, model, folder, num_threads):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # paddle2onnx leaves unused initializers that ORT warns about
        self.session = ort.InferenceSession(onnx_model(folder), options, providers=["CPUExecutionProvider"])
        super().__init__(model, [i.name for i in self.session.get_inputs()])

    def run(self, arrays):
        return self.session.run(None, dict(zip(self.input_names, arrays)))


# --------------------------------------------------------------- predictor
class Predictor:
    """A trained model that takes raw inputs: texts (classification), token
    lists or texts (sequence labeling: a text with spaces is split on them,
    one without into characters), or ``(text_a, text_b)`` pairs (matching).

    ``predict`` returns one dict per input, as in ``predictions.jsonl``: the
    label and the probability of each label (multi-label: the labels above
    ``dataset_reader.threshold``), the tokens, tags and entity spans, or the
    match score, the label it gives at the saved threshold
    (:attr:`reader_state`) and, for pointwise models, the probabilities.
    ``progress_bar``: show the tokenising bars of ``predict`` (off: a call
    from a service prints nothing).
    """

    def __init__(self, best, engine="dygraph", *, batch_size=64, num_threads=None, inference_dir=None,
                 mkldnn=True, progress_bar=False):
        from appzoo.encoders import load_encoder
        from appzoo.plan import DatasetConfig
        from appzoo.registry import MODELS, READERS

        check_engine(engine, "engine")
        archive.check_best(best, "Predictor")
        saved = archive.read_best(best)
        source = os.path.join(best, "config.json")
        model_section = dict(saved.config.get("model", {}))
        data_section = dict(saved.config.get("dataset_reader", {}))
        if not len(MODELS.names()):
            raise UserError("no model is registered: import the packages that register them first "
                            "(import tasks, for the built-in tasks)")
        try:
            model_class = MODELS.get(model_section.pop("type", None), "model.type")
            reader_class = READERS.get(data_section.pop("type", None) or model_class.READERS[0],
                                       "dataset_reader.type")
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None
        model_section.pop("encoder", None)
        shared = {k: data_section.pop(k) for k in list(data_section) if k in DatasetConfig.__dataclass_fields__}
        max_seq_len = shared.get("max_seq_len", DatasetConfig.max_seq_len)
        reader = reader_class(**data_section)
        reader.load_state(saved.reader_state)
        encoder, tokenizer = load_encoder(os.path.join(best, "encoder"))
        model = model_class(encoder=encoder, **saved.model_args, **model_section)
        model.set_state_dict(archive.load_weights(os.path.join(best, archive.MODEL_FILE)))
        model.eval()
        if inference_dir is None:
            inference_dir = os.path.join(os.path.dirname(os.path.abspath(best)), "inference")
        if engine != "dygraph" and not export_is_current(inference_dir, best):
            export(model, inference_dir)
        self._set_up(model, reader, tokenizer, saved.labels, max_seq_len, engine, inference_dir, batch_size,
                     num_threads, mkldnn)
        self.reader_state = saved.reader_state
        self.progress_bar = progress_bar

    @classmethod
    def from_parts(cls, model, reader, tokenizer, labels, max_seq_len, *, engine, inference_dir,
                   batch_size=64, num_threads=None, mkldnn=True):
        """A Predictor over objects a run already holds (the runner's eval and predict)."""
        self = cls.__new__(cls)
        self._set_up(model, reader, tokenizer, labels, max_seq_len, engine, inference_dir, batch_size,
                     num_threads, mkldnn)
        self.reader_state = reader.state()
        self.progress_bar = True  # as the run says (trainer.progress_bar)
        return self

    def _set_up(self, model, reader, tokenizer, labels, max_seq_len, engine, inference_dir, batch_size,
                num_threads, mkldnn):
        self.model, self.reader, self.tokenizer, self.labels = model, reader, tokenizer, labels
        self.max_seq_len, self.batch_size, self.engine_name = max_seq_len, batch_size, engine
        model.eval()
        if engine == "dygraph":
            self.engine = _Dygraph(model)
        elif engine == "paddle_inference":
            self.engine = _PaddleInference(model, inference_dir, _threads(num_threads), mkldnn)
        else:
            self.engine = _OnnxRuntime(model, inference_dir, _threads(num_threads))

    # ---- raw inputs ------------------------------------------------------
    def predict(self, inputs):
        """One dict per input (see the class docstring)."""
        if isinstance(inputs, (str, bytes)):
            raise DataError(f"inputs: expected a list of inputs, got one {type(inputs).__name__}; for one input, "
                            f"pass [input]")
        inputs = list(inputs)
        if not inputs:
            return []
        examples = self.reader.read_inputs(inputs)
        with bars(self.progress_bar):
            features = self.reader.encode(examples, self.tokenizer, self.labels, self.max_seq_len, "predict")
            predictions, _ = self.predict_features(examples, features)
        return self.reader.prediction_rows(examples, predictions, self.labels)

    # ---- examples and features (the runner's eval and predict) -----------
    def predict_features(self, examples, features):
        """``(predictions, None)`` as ``Trainer.predict`` gives them (no loss:
        the graphs take no labels). Batches hold features of similar length,
        and the outputs are put back in input order before decoding."""
        import paddle

        if not examples:  # an empty predict file
            return [], None
        order = np.argsort([_length(f) for f in features], kind="stable")
        rows = [None] * len(features)
        pad_id = self.tokenizer.pad_token_id
        with paddle.no_grad():
            for start in range(0, len(order), self.batch_size):
                indices = order[start:start + self.batch_size]
                batch = self.reader.collate([features[i] for i in indices], pad_id)
                outputs = self.engine(batch)
                tensors = {k: paddle.to_tensor(v) for k, v in batch.items()}
                decoded = {k: v.numpy() for k, v in self.model.decode(outputs, tensors).items()}
                for j, i in enumerate(indices):
                    rows[i] = {k: v[j] for k, v in decoded.items()}
        outputs = {key: [row[key] for row in rows] for key in rows[0]}
        return self.reader.decode(examples, features, outputs, self.labels), None

    def evaluate(self, examples, features, split=None):
        """The reader's metrics of one labelled split."""
        predictions, _ = self.predict_features(examples, features)
        return self.reader.evaluate(examples, predictions, self.labels)


def _length(feature):
    """Tokens in a feature: its longest token-id list."""
    return max((len(v) for k, v in feature.items() if k.endswith("input_ids") and isinstance(v, list)), default=0)
