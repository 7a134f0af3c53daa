"""Batching across requests: one queue and one worker thread per model.

A request's inputs wait in the queue; a batch runs when ``max_batch_size``
inputs wait, or when the oldest request has waited ``max_wait_ms`` (the
rule of TorchServe's batch_size/max_batch_delay and Triton's dynamic
batcher). Requests are taken whole, oldest first, while they fit in
``max_batch_size`` (one larger than that runs alone). The batch runs on the
worker thread; a request that arrives meanwhile waits for the next batch.
Each caller gets a :class:`concurrent.futures.Future` of its own result.
"""
import collections
import concurrent.futures
import threading
import time


class QueueFull(Exception):
    """``max_queue`` requests already wait."""


class Job:
    """One request: its payload, its number of inputs, and the future of its result."""

    def __init__(self, payload, size):
        self.payload, self.size = payload, size
        self.future = concurrent.futures.Future()
        self.queued_at = time.monotonic()


class MicroBatcher:
    """Runs ``run_batch(payloads) -> results`` (one result per payload, in
    order) over batches of queued jobs, on a thread of its own.

    When ``run_batch`` raises for a batch of several jobs, each job is run
    again alone, so one bad request fails only itself. ``on_batch(size)``
    is told the number of inputs of every batch run (for metrics).
    """

    def __init__(self, run_batch, *, max_batch_size, max_wait_ms, max_queue, on_batch=None, name="batcher"):
        self.run_batch, self.on_batch = run_batch, on_batch
        self.max_batch_size, self.max_wait, self.max_queue = max_batch_size, max_wait_ms / 1000.0, max_queue
        self._queue = collections.deque()
        self._changed = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    @property
    def depth(self):
        """Requests waiting (not those of the batch running)."""
        return len(self._queue)

    def submit(self, payload, size):
        """The future of ``payload``'s result; QueueFull when ``max_queue`` requests wait,
        RuntimeError once stopped."""
        job = Job(payload, size)
        with self._changed:
            if self._stopping:
                raise RuntimeError("the batcher is stopped")
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
        """The jobs of the next batch once it is due; None when stopped with nothing queued."""
        with self._changed:
            while not self._queue:
                if self._stopping:
                    return None
                self._changed.wait()
            deadline = self._queue[0].queued_at + self.max_wait
            while sum(j.size for j in self._queue) < self.max_batch_size and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            jobs = [self._queue.popleft()]
            size = jobs[0].size
            while self._queue and size + self._queue[0].size <= self.max_batch_size:
                size += self._queue[0].size
                jobs.append(self._queue.popleft())
            return jobs

    def _run(self, jobs):
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]  # a cancelled one is left out
        if not jobs:
            return
        if self.on_batch is not None:
            self.on_batch(sum(j.size for j in jobs))
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
