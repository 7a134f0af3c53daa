"""The micro-batcher alone, with a fake model: when a batch runs and who gets what back."""
import contextlib
import threading
import time

import pytest

from appzoo.serve.batcher import MicroBatcher, QueueFull


class Recorder:
    """A fake ``run_batch``: records each batch, answers each payload doubled; optionally waits on a gate."""

    def __init__(self, gate=None, fail_on=None):
        self.batches, self.gate, self.fail_on = [], gate, fail_on
        self.started = threading.Event()

    def __call__(self, payloads):
        self.batches.append(list(payloads))
        self.started.set()
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail_on is not None and self.fail_on in payloads:
            raise ValueError(f"bad payload {self.fail_on}")
        return [p * 2 for p in payloads]


def test_a_batch_runs_as_soon_as_max_batch_size_inputs_wait():
    run = Recorder()
    batcher = MicroBatcher(run, max_batch_size=4, max_wait_ms=10_000, max_queue=100)
    try:
        started = time.monotonic()
        futures = [batcher.submit(i, 1) for i in range(4)]
        assert [f.result(5) for f in futures] == [0, 2, 4, 6]
        assert time.monotonic() - started < 5  # not the 10 s wait: the size flushed it
        assert run.batches == [[0, 1, 2, 3]]
    finally:
        batcher.stop(5)


def test_a_lone_request_runs_once_the_oldest_has_waited_max_wait_ms():
    run = Recorder()
    batcher = MicroBatcher(run, max_batch_size=32, max_wait_ms=200, max_queue=100)
    try:
        started = time.monotonic()
        assert batcher.submit(21, 1).result(5) == 42
        waited = time.monotonic() - started
        assert 0.19 <= waited < 2.0, waited
        assert run.batches == [[21]]
    finally:
        batcher.stop(5)


@contextlib.contextmanager
def busy(first, fail_on=None, **settings):
    """``(batcher, run, future of first)``: a batcher (max_wait_ms 0, max_queue 100 unless ``settings``
    say otherwise) whose worker runs ``first`` alone and is held there until ``run.gate`` is set."""
    run = Recorder(threading.Event(), fail_on)
    batcher = MicroBatcher(run, **{"max_wait_ms": 0, "max_queue": 100, **settings})
    try:
        future = batcher.submit(first, 1)
        assert run.started.wait(5)
        yield batcher, run, future
    finally:
        run.gate.set()
        batcher.stop(5)


def test_requests_are_taken_whole_and_oldest_first_up_to_max_batch_size():
    with busy("a", max_batch_size=5) as (batcher, run, first):
        rest = [batcher.submit(p, n) for p, n in (("b", 3), ("c", 2), ("d", 1), ("e", 9))]
        run.gate.set()
        for f in [first, *rest]:
            f.result(5)
        # b+c fill 5; d alone (e would overflow); e (larger than the limit) alone
        assert run.batches == [["a"], ["b", "c"], ["d"], ["e"]]


def test_a_request_sent_during_a_batch_lands_in_the_next_batch():
    with busy(1, max_batch_size=8) as (batcher, run, first):
        during = [batcher.submit(p, 1) for p in (2, 3)]
        assert batcher.depth == 2
        run.gate.set()
        assert first.result(5) == 2 and [f.result(5) for f in during] == [4, 6]
        assert run.batches == [[1], [2, 3]]


def test_a_bad_request_fails_alone_and_its_batch_mates_get_their_answers():
    with busy(0, fail_on=13, max_batch_size=8) as (batcher, run, hold):
        futures = [batcher.submit(p, 1) for p in (12, 13, 14)]
        run.gate.set()
        hold.result(5)
        assert futures[0].result(5) == 24 and futures[2].result(5) == 28
        with pytest.raises(ValueError, match="bad payload 13"):
            futures[1].result(5)
        assert run.batches[1] == [12, 13, 14]  # the batch failed, then each ran alone
        assert run.batches[2:] == [[12], [13], [14]]


def test_a_full_queue_refuses_and_stop_answers_what_is_queued():
    with busy(0, max_batch_size=1, max_queue=2) as (batcher, run, hold):
        queued = [batcher.submit(p, 1) for p in (1, 2)]
        with pytest.raises(QueueFull, match=r"2 requests are waiting \(max_queue 2\)"):
            batcher.submit(3, 1)
        run.gate.set()
        assert batcher.stop(5)
        assert hold.result(0) == 0 and [f.result(0) for f in queued] == [2, 4]
        with pytest.raises(RuntimeError, match="stopped"):
            batcher.submit(4, 1)
