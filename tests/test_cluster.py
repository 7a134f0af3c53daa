"""The recipes in deploy/ where a cluster is not one machine: two PaddleJob pods on two hosts of a network of
their own (network namespaces joined by a veth pair), and an sbatch job whose worker is killed mid-run and
whose step, started again, continues its run. Each must give one_launcher's run (tests/conftest.py) to the
bit."""
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import paddle
import pytest

from appzoo.store.archive import LOCK_INFO, RunFolder
from appzoo.store.bundle_files import MARKER, PICKLED_MODEL_FILE
from conftest import LAUNCH_ENV, LAUNCH_SETTINGS, check_launch, read_json, read_jsonl
from test_deploy import PARAM, SBATCH, fake_bin, paddlejob_container, paddlejob_pod

# launches data-parallel runs; one worker of pytest -n runs them with one_launcher (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("one_launcher")]

TIMING = {"metrics.json": "wall_time_s", "train_log.jsonl": "elapsed_s"}  # seconds: the one thing two runs differ in
DEADLINE_S = 300  # for a launch of the few steps, ~15 s on an idle machine of 2 cores
Host = collections.namedtuple("Host", "namespace address")


# ---- helpers
def _parent(pid):
    """The parent of ``pid`` and whether ``pid`` is still running (False: gone, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            state, parent = f.read().rsplit(")", 1)[1].split()[:2]  # the name in brackets may hold spaces
    except (OSError, ValueError):
        return None, False
    return int(parent), state not in "ZX"


def _children(pid):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == (pid, True)]


@pytest.fixture
def launch(tmp_path):
    """``launch(cmd, env, name)``: a launcher started with its output in ``tmp_path/name.out``. At the end,
    also after a failure, every launcher still running is killed with its workers (which paddle starts in
    sessions of their own, so they would outlive it)."""
    started = []

    def start(cmd, env, name):
        with open(tmp_path / f"{name}.out", "w", encoding="utf-8") as out:
            launcher = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        launcher.output = tmp_path / f"{name}.out"
        started.append(launcher)
        return launcher

    yield start
    for launcher in started:
        if launcher.poll() is not None:
            continue
        workers = _children(launcher.pid)
        launcher.kill()
        launcher.wait()
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _finish(launcher, log_dir, deadline):
    """Wait for ``launcher`` until ``deadline`` (time.monotonic()); fail with its output and its workers'
    logs unless it exited 0."""
    try:
        launcher.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass  # check_launch fails on the missing exit code; the launch fixture kills it
    output = launcher.output.read_text(errors="replace")
    check_launch(subprocess.CompletedProcess(launcher.args, launcher.returncode, output, ""), log_dir)


def _assert_same_run(out, reference):
    """Every metric, log row and prediction of the run in ``out`` and its last checkpoint's weights are
    those of ``reference``: equal, not close (the TIMING fields aside)."""
    def record(folder):
        metrics = read_json(folder / "metrics.json")
        metrics.pop(TIMING["metrics.json"])
        rows = read_jsonl(folder / "train_log.jsonl")
        for row in rows:
            row.pop(TIMING["train_log.jsonl"], None)
        return metrics, rows, (folder / "predictions.jsonl").read_bytes()

    assert record(out) == record(reference)
    last = [RunFolder(str(folder)).latest_checkpoint() for folder in (out, reference)]
    assert [os.path.basename(folder) for folder in last] == ["step-4", "step-4"]
    weights, expected = (paddle.load(os.path.join(folder, PICKLED_MODEL_FILE)) for folder in last)
    assert sorted(weights) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(weights[name].numpy(), value.numpy(), err_msg=name)


def _operator_names():
    """The PaddleJob's name, its master port and worker 0's service name, as the Kubeflow operator
    derives them (pkg/controller.v1/paddlepaddle/envvar.go of kubeflow/training-operator)."""
    job, container = paddlejob_container()
    name = job["metadata"]["name"]
    port = next(p["containerPort"] for p in container["ports"] if p["name"] == "master")
    return name, port, f"{name}-worker-0"


# ---- two hosts
@pytest.fixture
def two_hosts():
    """Two hosts, network namespaces ``appzoo<pid>a`` (10.213.0.1) and ``appzoo<pid>b`` (10.213.0.2) joined
    by a veth pair. In each this machine's host name resolves to the namespace's own address, as a pod's name
    does to its IP, and worker 0's service name to host a: ``ip netns exec`` mounts ``/etc/netns/NAME/hosts``
    over /etc/hosts. The names carry this process's id, so runs side by side do not collide; the namespaces
    (the veth pair goes with them) and their files are deleted at the end, also after a failure."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces (ip netns add) need root")
    if shutil.which("ip") is None:
        pytest.skip("no ip command (iproute2) to make network namespaces with")
    hosts = [Host(f"appzoo{os.getpid()}{side}", f"10.213.0.{n}") for n, side in ((1, "a"), (2, "b"))]
    *_, worker0 = _operator_names()

    def ip(*args):
        return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)

    def remove():
        for host in hosts:
            ip("netns", "del", host.namespace)
            shutil.rmtree(f"/etc/netns/{host.namespace}", ignore_errors=True)
        try:
            os.rmdir("/etc/netns")  # only when nothing else is in it
        except OSError:
            pass

    remove()  # what a crashed run of a process with this id left
    try:
        for host in hosts:
            made = ip("netns", "add", host.namespace)
            if made.returncode:
                pytest.skip(f"cannot make a network namespace here: ip netns add: {made.stderr.strip()}")
        (a, b) = hosts
        made = ip("link", "add", a.namespace, "netns", a.namespace, "type", "veth",
                  "peer", "name", b.namespace, "netns", b.namespace)
        if made.returncode:
            pytest.skip(f"cannot join network namespaces by a veth pair here: ip link add: {made.stderr.strip()}")
        for host in hosts:
            for args in (["addr", "add", f"{host.address}/24", "dev", host.namespace],
                         ["link", "set", host.namespace, "up"], ["link", "set", "lo", "up"]):
                done = ip("-n", host.namespace, *args)
                assert done.returncode == 0, f"ip -n {host.namespace} {' '.join(args)}: {done.stderr}"
            os.makedirs(f"/etc/netns/{host.namespace}")
            with open(f"/etc/netns/{host.namespace}/hosts", "w", encoding="utf-8") as f:
                f.write(f"127.0.0.1 localhost\n{host.address} {socket.gethostname()}\n{a.address} {worker0}\n")
        yield hosts
    finally:
        remove()


def test_two_hosts_given_the_operators_variables_match_one_launcher_of_two(two_hosts, one_launcher, launch,
                                                                           tmp_path):
    """Two pods of deploy/paddlejob.yaml on two hosts, one process each, with the variables the operator
    sets: worker 0 gets its own address as PADDLE_MASTER, worker 1 worker 0's service name, both the port
    named master. Worker 0's launcher starts the rendezvous server (its own address is the master's) and
    is rank 0; the ranks meet over the veth pair, on no address of 127.0.0.1."""
    job, port, worker0 = _operator_names()
    out = tmp_path / "out"
    pods = []
    for pod, host in enumerate(two_hosts):
        master = f"{host.address}:{port}" if pod == 0 else f"{worker0}:{port}"
        cmd, env = paddlejob_pod({"PADDLE_MASTER": master, "PADDLE_NNODES": "2", "PADDLE_JOB_ID": job,
                                  "OUTPUT_DIR": str(out), "PADDLE_LOG_DIR": str(tmp_path / f"log{pod}"),
                                  **LAUNCH_ENV}, *LAUNCH_SETTINGS)
        pods.append(launch(["ip", "netns", "exec", host.namespace, *cmd], env, f"pod{pod}"))
    deadline = time.monotonic() + DEADLINE_S
    for pod, launcher in enumerate(pods):
        _finish(launcher, tmp_path / f"log{pod}", deadline)

    for pod, host in enumerate(two_hosts):
        (envlog,) = (tmp_path / f"log{pod}").glob("envlog.*")
        worker = dict(line.split("=", 1) for line in envlog.read_text().splitlines())
        assert worker["PADDLE_TRAINER_ID"] == str(pod)
        assert [e.rpartition(":")[0] for e in worker["PADDLE_TRAINER_ENDPOINTS"].split(",")] == \
            [h.address for h in two_hosts]
    _assert_same_run(out, one_launcher)


# ---- a restart
def _main_worker_after_first_checkpoint(process, out):
    """Wait (polling every 10 ms) for checkpoint step 2 of the run in ``out`` that ``process`` started; the
    pid of the worker that holds the run folder (rank 0)."""
    checkpoint = out / "checkpoints" / "step-2" / MARKER
    deadline = time.monotonic() + DEADLINE_S
    while not checkpoint.exists():
        assert process.poll() is None, "the run ended before its first checkpoint:\n" + process.output.read_text()
        assert time.monotonic() < deadline, f"no {checkpoint} after {DEADLINE_S} s"
        time.sleep(0.01)
    return read_json(out / LOCK_INFO)["pid"]


def _descendants(pid):
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


def test_sbatch_starts_a_failed_step_again_and_it_continues_the_run(one_launcher, launch, tmp_path):
    """deploy/slurm.sbatch on one node of 2 processes (a fake srun runs the step here): the main worker is
    killed with SIGKILL after checkpoint step 2 of 4. Paddle's launcher does not restart it, PADDLE_MAX_RESTART
    notwithstanding: given an HTTP master (not etcd://) it runs its workers once (Controller.run in
    paddle/distributed/launch/controllers/controller.py; only CollectiveElasticController loops over
    max_restart), stops the other worker and exits. The script starts the step again (MAX_RESTARTS=1), as a
    PaddleJob's restartPolicy starts its pod's command again, and trainer.resume=auto continues the run to
    one_launcher's, bit for bit."""
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PADDLE_")) and k not in ("MASTER_PORT", "NPROC_PER_NODE")}
    env.update(LAUNCH_ENV, SLURM_NNODES="1", SLURM_NODEID="0", SLURM_JOB_ID="7", SLURM_JOB_NODELIST="node-a",
               NPROC_PER_NODE="2", MAX_RESTARTS="1", PADDLE_MAX_RESTART="1", PADDLE_LOG_DIR=str(tmp_path / "log"),
               TMPDIR=str(tmp_path / "tmp"),  # where the killed run leaves its vocabulary
               PATH=os.pathsep.join([str(fake_bin(tmp_path, ["localhost"])), os.path.dirname(sys.executable),
                                     os.environ["PATH"]]))
    (tmp_path / "tmp").mkdir()
    job = launch(["bash", SBATCH, PARAM, str(out), *LAUNCH_SETTINGS], env, "job")
    try:
        main = _main_worker_after_first_checkpoint(job, out)
        assert main in _descendants(job.pid)
        config, logged = (out / "config.json").stat(), (out / "train_log.jsonl").read_bytes()
        os.kill(main, signal.SIGKILL)
        _finish(job, tmp_path / "log", time.monotonic() + DEADLINE_S)
    finally:
        for pid in _descendants(job.pid) if job.poll() is None else ():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    said = job.output.read_text(errors="replace")
    assert "Exit code -9" in said, said[-3000:]  # the launcher passes on its killed worker's end
    assert "appzoo: the step failed (exit 247); starting it again (1 of 1)" in said, said[-3000:]
    after = (out / "config.json").stat()  # continued, not started over (see the test above)
    assert (after.st_ino, after.st_mtime_ns) == (config.st_ino, config.st_mtime_ns)
    assert (out / "train_log.jsonl").read_bytes().startswith(logged)
    _assert_same_run(out, one_launcher)
