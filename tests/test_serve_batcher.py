"""The micro-batcher alone, with a fake model: when a batch runs and who gets what back."""
import contextlib
import threading
import time

import pytest

from appzoo.serve.batcher import DeadlineExceeded, MicroBatcher, QueueFull, Stopped


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


def test_an_idle_batcher_runs_a_lone_request_at_once_whatever_max_wait_ms():
    run = Recorder()
    batcher = MicroBatcher(run, max_batch_size=32, max_wait_ms=10_000, max_queue=100)
    try:
        started = time.monotonic()
        assert batcher.submit(21, 1).result(5) == 42
        assert time.monotonic() - started < 2.0  # not the 10 s max_wait_ms: nothing to wait for
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
        with pytest.raises(Stopped, match="stopped"):
            batcher.submit(4, 1)


def test_what_waits_while_the_worker_is_busy_runs_together_once_it_frees_up_without_waiting():
    with busy(0, max_batch_size=8, max_wait_ms=10_000) as (batcher, run, hold):
        during = [batcher.submit(p, 1) for p in (1, 2, 3)]  # 3 of 8: not deep, so no wait to fill
        started = time.monotonic()
        run.gate.set()
        assert [f.result(5) for f in during] == [2, 4, 6]
        assert time.monotonic() - started < 2.0
        assert run.batches == [[0], [1, 2, 3]]


def test_a_batch_holds_max_batch_tokens_padded_tokens_at_most_shortest_first_after_the_oldest():
    # (payload, inputs, tokens); budget 40 padded tokens, 8 inputs
    with busy("hold", max_batch_size=8, max_batch_tokens=40) as (batcher, run, hold):
        jobs = [("long", 1, 20), ("s1", 2, 5), ("m", 1, 10), ("s2", 1, 4), ("huge", 1, 50), ("s3", 3, 5)]
        futures = [batcher.submit(p, n, tokens) for p, n, tokens in jobs]
        run.gate.set()
        for f in futures:
            f.result(5)
    # the oldest (long: 20 tokens) first, then shortest first: s2 (2 inputs x 20 = 40), no room for more;
    # then s1 (oldest left), s3 (5 inputs x 5 = 25), m (6 x 10 = 60: over); m; huge (50 > 40) alone
    assert run.batches[1:] == [["long", "s2"], ["s1", "s3"], ["m"], ["huge"]]


def test_a_deep_queue_waits_up_to_max_wait_ms_to_fill_a_batch():
    with busy(0, max_batch_size=4, max_wait_ms=400) as (batcher, run, hold):
        first = [batcher.submit(p, 1) for p in (1, 2)]  # half of 4: deep
        run.gate.set()
        time.sleep(0.1)
        late = [batcher.submit(p, 1) for p in (3, 4)]  # arrive while the worker waits to fill the batch
        assert [f.result(5) for f in first + late] == [2, 4, 6, 8]
        assert run.batches == [[0], [1, 2, 3, 4]]


def test_a_request_past_its_deadline_is_dropped_from_the_queue_and_never_run():
    with busy(0, max_batch_size=8) as (batcher, run, hold):
        doomed = batcher.submit(1, 1, deadline=time.monotonic() + 0.05)
        kept = batcher.submit(2, 1, deadline=time.monotonic() + 60)
        time.sleep(0.15)
        run.gate.set()
        with pytest.raises(DeadlineExceeded, match=r"^waited 0\.\d+ s in the queue$"):
            doomed.result(5)
        assert kept.result(5) == 4
        assert run.batches == [[0], [2]]


def test_a_cancelled_request_is_left_out():
    with busy(0, max_batch_size=8) as (batcher, run, hold):
        gone, kept = batcher.submit(1, 1), batcher.submit(2, 1)
        assert gone.cancel()
        run.gate.set()
        assert kept.result(5) == 4
        assert run.batches == [[0], [2]]
