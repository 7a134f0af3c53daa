"""Serving trained models over HTTP: ``python -m appzoo.serve PATH/best`` (docs/serving.md).

:mod:`~appzoo.params.serve` the ``serve`` keys; :mod:`~appzoo.serve.batcher`
batching across requests; :mod:`~appzoo.serve.models` the models held;
:mod:`~appzoo.serve.repository` their hot reload; :mod:`~appzoo.serve.deadline`
a request's deadline;
:mod:`~appzoo.serve.app` the routes (:mod:`~appzoo.serve.failure` their refusals);
:mod:`~appzoo.serve.v2` KServe V2's codec; :mod:`~appzoo.serve.metrics` what
``/metrics`` reports; :mod:`~appzoo.serve.protocol` the HTTP layer's limits and
refusals; :mod:`~appzoo.serve.server` start, stop and exit codes.
"""
