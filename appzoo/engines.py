"""The engines a trained model predicts on: the Paddle model, Paddle Inference, ONNX Runtime.

An engine is called with one collated batch (numpy arrays, and the same as
paddle tensors) and returns the model's output dict. The graph engines run
the static graph that :mod:`appzoo.export` wrote; their outputs come back
under the keys of the model's own output dict, so the model's ``decode``
(softmax, sigmoid, the CRF's Viterbi) runs the same on every engine.
"""
import importlib.util
import inspect
import os

import numpy as np

from appzoo.errors import ConfigError, UserError, first_line

ENGINES = ("dygraph", "paddle_inference", "onnxruntime")


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


def create(engine, model, inference_dir=None, num_threads=None, mkldnn=True):
    """The engine named ``engine`` (one of :data:`ENGINES`) over ``model`` and, for a
    graph engine, the graph exported into ``inference_dir``."""
    model.eval()
    if engine == "dygraph":
        return _Dygraph(model)
    if engine == "paddle_inference":
        return _PaddleInference(model, inference_dir, _threads(num_threads), mkldnn)
    return _OnnxRuntime(model, inference_dir, _threads(num_threads))


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

    def __call__(self, batch, tensors):
        return self.model(**{k: tensors[k] for k in self.names if k in tensors})


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
    def __init__(self, model, folder, num_threads, mkldnn=True):
        import paddle.inference as pi

        from appzoo.export import graph_files

        graph, params = graph_files(folder)
        config = pi.Config(graph, params)
        config.disable_gpu()
        config.set_cpu_math_library_num_threads(num_threads)
        if mkldnn:  # oneDNN kernels on CPU: measured in docs/deployment.md
            config.enable_mkldnn()
        config.disable_glog_info()
        try:
            self.predictor = pi.create_predictor(config)
        except Exception as e:  # paddle raises ValueError, RuntimeError, ... for an unreadable graph
            raise UserError(f"{params}: Paddle Inference cannot load the exported graph ({type(e).__name__}: {first_line(e)}); "
                            f"the file is truncated or corrupt: export it again with --do export") from None
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
        from appzoo.export import onnx_model

        self.session = ort.InferenceSession(onnx_model(folder), options, providers=["CPUExecutionProvider"])
        super().__init__(model, [i.name for i in self.session.get_inputs()])

    def run(self, arrays):
        return self.session.run(None, dict(zip(self.input_names, arrays)))

