"""Batching across requests: one queue and one worker thread per model.

The worker never waits for company that may not come: when it is idle, a
request runs at once. While it runs a batch, requests gather in the queue;
when it frees up it takes what is waiting (the oldest request first, then
the others shortest first) while the batch stays within ``max_batch_size``
inputs and ``max_batch_tokens`` padded tokens (the longest input's length x
the inputs: what a batch costs), the way text-embeddings-inference budgets
its batches. A request larger than either limit runs alone.
``max_wait_ms`` only bounds a wait to fill a batch when the queue is deep
(half a batch or more waits, by inputs or by tokens): the worker then waits
for the rest of a batch until the oldest request has waited that long.

A request past its deadline is dropped from the queue, never run, and its
future raises :class:`DeadlineExceeded`; a cancelled one is left out.
Each caller gets a :class:`concurrent.futures.Future` of its own result.
"""
import collections
import concurrent.futures
import threading
import time


class QueueFull(Exception):
    """``max_queue`` requests already wait."""


class DeadlineExceeded(Exception):
    """A request's deadline passed while it waited in the queue; it was not run."""


class Stopped(RuntimeError):
    """The batcher is stopped (the server drains, or its model was replaced by a reload)."""


class Job:
    """One request: its payload, its number of inputs, the token length of its longest input, its deadline
    (``time.monotonic()`` seconds, or None) and the future of its result."""

    def __init__(self, payload, size, tokens=1, deadline=None):
        self.payload, self.size, self.tokens, self.deadline = payload, size, max(1, tokens), deadline
        self.future = concurrent.futures.Future()
        self.queued_at = time.monotonic()


def padded_tokens(jobs):
    """What a batch of ``jobs`` costs the engine: its longest input's length x its inputs."""
    return max(j.tokens for j in jobs) * sum(j.size for j in jobs)


class MicroBatcher:
    """Runs ``run_batch(payloads) -> results`` (one result per payload, in
    order) over batches of queued jobs, on a thread of its own.

    When ``run_batch`` raises for a batch of several jobs, each job is run
    again alone, so one bad request fails only itself. ``on_batch(size, tokens)``
    is told the inputs and the padded tokens of every batch run (for metrics).
    ``max_batch_tokens`` None: no token budget.
    """

    def __init__(self, run_batch, *, max_batch_size, max_wait_ms, max_queue, max_batch_tokens=None, on_batch=None,
                 name="batcher"):
        self.run_batch, self.on_batch = run_batch, on_batch
        self.max_batch_size, self.max_wait, self.max_queue = max_batch_size, max_wait_ms / 1000.0, max_queue
        self.max_batch_tokens = max_batch_tokens if max_batch_tokens is not None else float("inf")
        self._queue = collections.deque()
        self._changed = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    @property
    def depth(self):
        """Requests waiting (not those of the batch running)."""
        return len(self._queue)

    def submit(self, payload, size, tokens=1, deadline=None):
        """The future of ``payload``'s result (``size`` inputs, the longest ``tokens`` long, dropped unless run
        by ``deadline``); QueueFull when ``max_queue`` requests wait, Stopped once stopped."""
        job = Job(payload, size, tokens, deadline)
        with self._changed:
            if self._stopping:
                raise Stopped("the batcher is stopped")
            if len(self._queue) >= self.max_queue:
                raise QueueFull(f"{len(self._queue)} requests are waiting (max_queue {self.max_queue})")
            self._queue.append(job)
            self._changed.notify()
        return job.future

    def stop(self, timeout=None):
        """Run what is queued, then end the thread; True when it ended within ``timeout``."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ---- the worker thread -------------------------------------------------
    def _work(self):
        while True:
            jobs = self._next_batch()
            if jobs is None:
                return
            self._run(jobs)

    def _next_batch(self):
        """The jobs of the next batch: what waits, at once, unless the queue is deep and the batch not full
        (then until the oldest has waited ``max_wait_ms``); None when stopped with nothing queued."""
        with self._changed:
            while not self._drop_expired():
                if self._stopping:
                    return None
                self._changed.wait()
            if self._deep():
                until = self._queue[0].queued_at + self.max_wait
                while not self._stopping and self._drop_expired() and not self._full():
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
                if not self._queue:  # all expired while waiting
                    return []
            return self._take()

    def _drop_expired(self):
        """Answer the queued jobs past their deadline (DeadlineExceeded) and drop them and the cancelled ones;
        the number left waiting."""
        now, kept = time.monotonic(), collections.deque()
        for job in self._queue:
            if job.future.cancelled():
                continue
            if job.deadline is not None and job.deadline <= now:
                if job.future.set_running_or_notify_cancel():
                    job.future.set_exception(DeadlineExceeded(f"waited {now - job.queued_at:.3f} s in the queue"))
                continue
            kept.append(job)
        self._queue = kept
        return len(kept)

    def _deep(self):
        """Half a batch or more waits (by inputs or by padded tokens): the traffic that a wait can fill."""
        return self.max_wait > 0 and (sum(j.size for j in self._queue) * 2 >= self.max_batch_size
                                      or padded_tokens(self._queue) * 2 >= self.max_batch_tokens)

    def _full(self):
        return (sum(j.size for j in self._queue) >= self.max_batch_size
                or padded_tokens(self._queue) >= self.max_batch_tokens)

    def _take(self):
        """The oldest job, then the others shortest first (arrival order among equals) while the batch stays
        within both limits; the rest stay queued in their order."""
        first = self._queue.popleft()
        jobs, size, longest = [first], first.size, first.tokens
        for job in sorted(self._queue, key=lambda j: j.tokens):
            grown, length = size + job.size, max(longest, job.tokens)
            if grown <= self.max_batch_size and grown * length <= self.max_batch_tokens:
                jobs.append(job)
                size, longest = grown, length
        taken = {id(j) for j in jobs}
        self._queue = collections.deque(j for j in self._queue if id(j) not in taken)
        return jobs

    def _run(self, jobs):
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]  # a cancelled one is left out
        if not jobs:
            return
        if self.on_batch is not None:
            self.on_batch(sum(j.size for j in jobs), padded_tokens(jobs))
        try:
            results = self.run_batch([j.payload for j in jobs])
        except Exception as error:  # noqa: BLE001 - handed to the callers, never lost
            if len(jobs) == 1:
                jobs[0].future.set_exception(error)
                return
            for job in jobs:  # find the culprit: each request alone
                try:
                    job.future.set_result(self.run_batch([job.payload])[0])
                except Exception as alone:  # noqa: BLE001
                    job.future.set_exception(alone)
            return
        for job, result in zip(jobs, results):
            job.future.set_result(result)
