"""The engines a trained model predicts on: the Paddle model, Paddle Inference, ONNX Runtime.

An engine is called with one collated batch (numpy arrays, and the same as
paddle tensors) and returns the model's output dict. The graph engines run
the static graph that :mod:`appzoo.inference.export` wrote; their outputs come back
under the keys of the model's own output dict, so the model's ``decode``
(softmax, sigmoid, the CRF's Viterbi) runs the same on every engine.

Precisions (:data:`appzoo.params.inference.PRECISIONS`), each where it runs, and refused in one line
naming why and what to use instead where it does not (never a silent fp32):

* ``fp32``: every engine.
* ``bf16``: Paddle Inference's oneDNN bf16 kernels, on a CPU that reports
  ``avx512_bf16`` or ``amx_bf16``.
* ``int8``: ONNX Runtime, on the graph quantized by
  ``onnxruntime.quantization``: ``dynamic`` (int8 weights, activations
  scaled per batch) or ``static`` (activation ranges calibrated on examples),
  cached next to the export, the MatMuls that int8 hurts most left in fp32 (:mod:`appzoo.inference.quantize`). Paddle 3.3.1
  has no int8 path for its PIR exports (docs/deployment.md, "Precision").

An engine may be called from several threads at once, each with its own batch.
"""
import os
import threading

import numpy as np

from appzoo.errors import UserError, first_line
from appzoo.task.inputs import forward_inputs
from appzoo.env import available_cores
from appzoo.inference.graph_files import graph_files, onnx_model, unreadable
from appzoo.inference.quantize import onnx_int8
from appzoo.params.inference import CAPABILITIES, check_precision


def create(spec, model, inference_dir=None, mkldnn=True, dev=None):
    """The engine ``spec`` names (an :class:`~appzoo.params.inference.InferenceSpec`, checked where it was
    built) over ``model`` and, for a graph engine, the graph exported into ``inference_dir``, in the spec's
    precision on its threads. ``dev``: for an int8 that reads the dev set (static calibration, the sensitivity
    pass: :meth:`~appzoo.params.inference.InferenceSpec.needs_dev`), ``(digest, batches)``: the start of the
    dev file's sha256, for the cache's name, and ``batches(n)``, collated batches of ``n`` dev examples. The
    engine's row of :data:`~appzoo.params.inference.CAPABILITIES` is read here too: a precision it does not run
    is refused with the plan's one line (a spec no section checked), and a graph engine needs its folder."""
    check_precision(spec.engine, spec.precision, key_path=f"engine {spec.engine!r}")
    if CAPABILITIES[spec.engine].graph and inference_dir is None:
        raise ValueError(f"engine {spec.engine!r} runs an exported graph: give the folder it was exported into")
    model.eval()
    return BY_NAME[spec.engine](model, inference_dir, spec, mkldnn=mkldnn, dev=dev)


def _threads(num_threads):
    if num_threads:
        return num_threads
    return int(os.environ.get("OMP_NUM_THREADS") or available_cores())


class _Dygraph:
    """The Paddle model; gets only the batch keys its ``forward`` takes (no labels)."""

    def __init__(self, model, folder=None, spec=None, **unused):
        self.model = model
        self.inputs = forward_inputs(model, labels=False)

    def __call__(self, batch, tensors):
        return self.model(**self.inputs(tensors))


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

    def __call__(self, batch, tensors):
        import paddle

        outputs = self.run([np.ascontiguousarray(batch[name]) for name in self.input_names])
        return {key: paddle.to_tensor(value) for key, value in zip(self.output_keys, outputs)}


class _PaddleInference(_Static):
    """A Paddle Inference predictor. Its input and output handles are its own and it runs one batch at a
    time, so each thread that calls gets a clone (sharing the weights, not the buffers) rather than all
    waiting on one lock: threads of a server or of a user's pool predict at once, each its own inputs."""

    def __init__(self, model, folder, spec, *, mkldnn=True, **unused):
        import paddle.inference as pi

        num_threads, precision = _threads(spec.threads), spec.precision
        graph, params = graph_files(folder)
        config = pi.Config(graph, params)
        config.disable_glog_info()
        config.disable_gpu()
        config.set_cpu_math_library_num_threads(num_threads)
        if mkldnn or precision == "bf16":  # oneDNN kernels on CPU: measured in docs/deployment.md
            config.enable_mkldnn()
        if precision == "bf16":
            config.enable_mkldnn_bfloat16()
        self.local, self.cloning = threading.local(), threading.Lock()
        try:
            self.predictor = self.local.predictor = pi.create_predictor(config)
            if precision == "bf16":  # its passes run, and may fail, on the first batch: fail here, at load
                names = self.predictor.get_input_names()
                self.input_names = names
                self.run([np.ones((1, 2), "int64") for _ in names])
        except Exception as e:  # paddle raises ValueError, RuntimeError, ... for an unreadable graph
            if precision == "bf16":  # the same graph loads in fp32: it is the bf16 passes that refuse it
                raise UserError(f"{graph}: Paddle Inference 3.3.1 cannot run this graph in bf16 ({type(e).__name__}: "
                                f"{first_line(e)}); use precision 'fp32', or engine 'onnxruntime' with precision "
                                f"'int8'") from None
            raise unreadable(params, "Paddle Inference", e) from None
        super().__init__(model, self.predictor.get_input_names())

    def _own(self):
        """The calling thread's predictor: the one made at load for the thread that made it, a clone for another."""
        predictor = getattr(self.local, "predictor", None)
        if predictor is None:
            with self.cloning:
                predictor = self.local.predictor = self.predictor.clone()
        return predictor

    def run(self, arrays):
        predictor = self._own()
        for name, array in zip(self.input_names, arrays):
            predictor.get_input_handle(name).copy_from_cpu(array)
        predictor.run()
        return [predictor.get_output_handle(name).copy_to_cpu() for name in predictor.get_output_names()]


class _OnnxRuntime(_Static):
    """An ONNX Runtime session (its ``run`` is safe to call from several threads at once) of the model file
    ``path`` (the int8 one records how it was made: :func:`appzoo.inference.quantize.made_with`)."""

    def __init__(self, model, folder, spec, *, dev=None, **unused):
        import onnxruntime as ort

        num_threads, precision = _threads(spec.threads), spec.precision
        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # paddle2onnx leaves unused initializers that ORT warns about
        self.path = path = onnx_int8(folder, spec, dev) if precision == "int8" else onnx_model(folder)
        try:
            self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        except Exception as e:  # ORT raises InvalidProtobuf, Fail, ... for a damaged file
            raise unreadable(path, "ONNX Runtime", e) from None
        super().__init__(model, [i.name for i in self.session.get_inputs()])

    def run(self, arrays):
        return self.session.run(None, dict(zip(self.input_names, arrays)))


#: Every engine by the name ``engine`` takes in a param file (their names, and the precisions each runs, are
#: checked in :mod:`appzoo.params.inference`, which a test holds to this table): an engine is a class called with
#: ``(model, inference_dir, spec, mkldnn=, dev=)`` whose instances run a collated batch.
BY_NAME = {"dygraph": _Dygraph, "paddle_inference": _PaddleInference, "onnxruntime": _OnnxRuntime}
