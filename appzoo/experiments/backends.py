"""Where the jobs of a sweep or a search run: a backend with one ``run(jobs, on_done)``.

The shape of HF's hyperparameter-search backends (``name``, ``is_available``, ``run``): the strategy makes the
jobs and judges their results, the backend only decides where they run and how many at once. ``jobs`` is
pulled a job at a time, as a slot frees, so a search asks its study for the next trial only when one can start.
:class:`Local` runs them here one after another; :class:`appzoo.experiments.ray.Ray` as Ray tasks.
"""


class Backend:
    name = None

    @staticmethod
    def is_available():
        return True

    def run(self, jobs, on_done):
        """Run every :class:`~appzoo.experiments.jobs.Job` of the iterable ``jobs``; ``on_done(job, result)``
        after each, in this process."""
        raise NotImplementedError


class Local(Backend):
    """The jobs one after another in this process: an error of one stops them (the strategy's ladder has
    already turned the outcomes it goes on after into results)."""
    name = "local"

    def run(self, jobs, on_done):
        for job in jobs:
            on_done(job, job.work(threads=None))


LOCAL = Local()
