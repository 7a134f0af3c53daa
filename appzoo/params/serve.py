"""The ``serve`` section of a param file (and the options of ``python -m appzoo.serve``)."""
import dataclasses
from typing import Annotated, List, Optional

from appzoo.params.keys import Key, build_section, check_fields
from appzoo.params.inference import (DEFAULT_CALIBRATION, DEFAULT_SENSITIVITY, CalibrationExamples, Engine,
                                     InferenceSpec, KeepFp32, Precision, Quantization, SensitivityExamples,
                                     embed_spec, spec_keys)
from appzoo.env import available_cores
from appzoo.errors import ConfigError


#: The serve section's keys of its :class:`~appzoo.params.inference.InferenceSpec`, by the spec's fields: the
#: field's own name, but quantize_keep_fp32. The section declares the ones it had (for their place in it, and the
#: server's own default engine); a field added to the spec comes in after them (embed_spec).
INFERENCE_KEYS = spec_keys({"keep_fp32": "quantize_keep_fp32"})


@dataclasses.dataclass
@embed_spec(INFERENCE_KEYS)
class ServeConfig:
    """Every key of the ``serve`` section: its type, limits, default and help."""

    host: Annotated[str, Key("address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface, "
                             "for a container)", nonempty=True)] = "127.0.0.1"
    port: Annotated[int, Key("TCP port to listen on (0: any free port, printed at start)", ge=0, le=65535)] = 8000
    engine: Engine = "onnxruntime"
    precision: Precision = "fp32"
    quantization: Quantization = "dynamic"
    calibration_examples: CalibrationExamples = DEFAULT_CALIBRATION
    quantize_keep_fp32: KeepFp32 = "auto"
    sensitivity_examples: SensitivityExamples = DEFAULT_SENSITIVITY
    max_batch_size: Annotated[int, Key(
        "inputs a model runs together at most. An idle model runs a request at once; while it is busy, requests "
        "gather and the next batch takes what waits, shortest first, up to this and max_batch_tokens (1: no "
        "batching across requests)", ge=1)] = 32
    max_batch_tokens: Annotated[int, Key(
        "padded tokens a batch holds at most (its longest input's tokens x its inputs: what a batch costs); a "
        "request over it runs alone", ge=1)] = 8192
    max_wait_ms: Annotated[float, Key(
        "when half a batch or more waits, how long the oldest request may wait for others to fill the batch (0: "
        "never wait; an idle model never waits)", ge=0)] = 5.0
    max_queue: Annotated[int, Key("requests waiting per model at most; one more is answered 429 with "
                                  "Retry-After", ge=1)] = 256
    max_request_timeout_s: Annotated[float, Key(
        "a request not answered within this long is answered 504 (dropped from the queue if still there); a "
        "client may ask for less with the header X-Request-Timeout (seconds)", gt=0)] = 60.0
    max_body_bytes: Annotated[int, Key("largest request body accepted (larger: 413)", ge=1)] = 1_048_576
    max_request_inputs: Annotated[int, Key(
        "inputs one request may hold (more: 422); bounds how long one request can hold a model's batches",
        ge=1)] = 1024
    max_input_chars: Annotated[int, Key(
        "characters of one text (tokens of one token list) read at most: a longer one is cut there and the "
        "answer's notes say so; bounds the work one request can cause", ge=1)] = 10_000
    threads: Annotated[Optional[int], Key(
        "CPU threads of each model's engine; models x threads must not exceed the cores this process may use "
        "(null: the cores shared out over the models)", ge=1)] = None
    drain_timeout_s: Annotated[float, Key(
        "on SIGTERM or Ctrl-C: stop accepting, then wait this long at most for the requests in flight (a second "
        "SIGTERM changes nothing; a second Ctrl-C stops at once, exit 130)", ge=0)] = 30.0
    max_connections: Annotated[int, Key(
        "open connections at most; one more is answered 503 with Retry-After and closed. Each holds a file "
        "descriptor: this plus a reserve of 256 must fit the process's limit (ulimit -n), checked at start",
        ge=1)] = 1000
    idle_timeout_s: Annotated[float, Key(
        "a connection with no request under way (new, or kept alive after an answer) is closed after this long "
        "without a byte", gt=0)] = 5.0
    read_timeout_s: Annotated[float, Key(
        "once a request's first byte arrived, its request line and headers must all arrive within this long "
        "(else 408), and its body may not pause longer (else 408 and the connection closes)", gt=0)] = 10.0
    body_timeout_s: Annotated[float, Key(
        "a request's body must all arrive within this long after its headers, however it trickles in (else 408 "
        "and the connection closes)", gt=0)] = 10.0
    max_header_bytes: Annotated[int, Key("request line and headers of one request, in bytes, at most (more: 431)",
                                         ge=1024)] = 16_384
    max_headers: Annotated[int, Key("header fields of one request at most (more: 431)", ge=1)] = 100
    reload_root: Annotated[Optional[str], Key(
        "the folder a hot reload (POST /v2/repository/models/NAME/load with parameters.best) may load a best/ "
        "from, named when the server starts (null: the run folder each served best/ is in)", nonempty=True)] = None
    allowed_hosts: Annotated[Optional[List[str]], Key(
        "the host names a request's Host header may give (DNS rebinding: a page of another site that resolves to "
        "this address); '*': any (null: the address of host, and localhost, 127.0.0.1 and ::1 for a loopback "
        "host; any for 0.0.0.0 or ::, a server behind a proxy or in a container)")] = None
    trust_pickled_weights: Annotated[bool, Key(
        "load a best/ saved before appzoo wrote safetensors, whose weights are a pickle: unpickling runs whatever "
        "code the file holds, so only for folders you made (else re-save them: run_trainer.py --resave BEST)")] = False
    api_key_file: Annotated[Optional[str], Key(
        "a file of API keys, one a line (# comments and blank lines skipped): every route but /v2/health/live and "
        "/v2/health/ready then needs 'Authorization: Bearer KEY' with one of them (also --api-key and the "
        "APPZOO_API_KEY variable; never a key itself here: a run saves this section; null: no file)",
        nonempty=True)] = None

    def __post_init__(self):
        check_fields(self, "serve")
        self.inference().check({field: f"serve.{key}" for field, key in INFERENCE_KEYS.items()})

    def inference(self, threads=None):
        """What each model runs on (:class:`~appzoo.params.inference.InferenceSpec`), checked when the section
        was built; ``threads``: its engine's (:meth:`engine_threads`), else ``serve.threads``."""
        spec = InferenceSpec.of(self, INFERENCE_KEYS)
        return spec if threads is None else dataclasses.replace(spec, threads=threads)

    @classmethod
    def from_section(cls, section):
        """The ``serve`` section of a param file (or the options of ``python -m appzoo.serve``) checked:
        unknown keys, types and ranges, each a ConfigError naming ``serve.KEY``."""
        return build_section(cls, section, "serve")

    def engine_threads(self, models, cores=None):
        """Threads of each of ``models`` engines: ``threads``, or the cores shared out; ConfigError when
        models x threads exceeds the cores (each model's batches run on a thread of their own, each with
        that many engine threads: more would only contend, as TorchServe and Triton users find)."""
        cores = available_cores() if cores is None else cores
        threads = self.threads or max(1, cores // models)
        if models * threads > cores:
            fit = cores // models
            advice = f"set serve.threads to {fit}" if fit else f"serve at most {cores} model(s) in one process"
            raise ConfigError(f"serve.threads: {models} model(s) x {threads} thread(s) = {models * threads} > "
                              f"the {cores} core(s) this process may use; {advice}")
        return threads
