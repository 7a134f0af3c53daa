"""The cluster recipes in deploy/ checked by their contracts: the PaddleJob's
shape and container command, and the sbatch script's launcher command (from
fake SLURM_* variables, a fake scontrol and an srun that runs its command once,
here), and its restarts of a failed step. Two pods of the PaddleJob train together
in tests/test_distributed.py; the runs through both recipes on two hosts and with a killed worker are in
tests/test_cluster.py."""
import os
import stat
import subprocess
import sys

import pytest
import yaml


PARAM = "examples/cls_ernie_fc_ch.json"
PADDLEJOB = "deploy/paddlejob.yaml"
SBATCH = "deploy/slurm.sbatch"
NODES = 2  # the PaddleJob's worker replicas


def paddlejob_container():
    with open(PADDLEJOB, encoding="utf-8") as f:
        job = yaml.safe_load(f)
    return job, job["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


def paddlejob_pod(operator_env, *run_trainer_args):
    """The PaddleJob's container command with ``run_trainer_args`` appended, and the environment of its
    pod: ours, the container's env from the YAML, then ``operator_env`` (what the operator sets, and
    overrides a test needs); ``python`` is this interpreter."""
    _, container = paddlejob_container()
    env = dict(os.environ)
    env.update({v["name"]: v["value"] for v in container["env"]}, **operator_env)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    return [*container["command"], *container["args"], "pod", *run_trainer_args], env  # "pod": bash -c's $0


def fake_bin(tmp_path, hosts):
    """A folder for PATH with an scontrol that lists ``hosts`` and an srun that runs its command once, here
    (and writes its options into ``bin/srun.options``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    scripts = {
        "scontrol": "#!/bin/sh\nprintf '%s\\n' " + " ".join(hosts) + "\n",
        # every option the recipe gives srun takes a value: note them in pairs, then run the command
        # (FAKE_SRUN_EXIT=N: the step fails with N instead)
        "srun": '#!/bin/bash\nwhile [[ $1 == -* ]]; do echo "$1 $2" >> "$0.options"; shift 2; done\n'
                '[[ -n ${FAKE_SRUN_EXIT:-} ]] && exit "$FAKE_SRUN_EXIT"\nexec "$@"\n',
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    return bin_dir


def _sbatch(tmp_path, hosts, slurm_env, *args, timeout=30):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PADDLE_")) and k not in ("MASTER_PORT", "NPROC_PER_NODE")}
    path = os.pathsep.join([str(fake_bin(tmp_path, hosts)), os.path.dirname(sys.executable), env["PATH"]])
    env.update(slurm_env, PATH=path, SLURM_JOB_NODELIST="node-[a-b]")
    return subprocess.run(["bash", SBATCH, *args], env=env, capture_output=True, text=True, timeout=timeout)


# ---- Kubernetes: the PaddleJob
def test_paddlejob_declares_the_nodes_the_shared_output_folder_and_the_master_port():
    job, container = paddlejob_container()
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PaddleJob")
    worker = job["spec"]["paddleReplicaSpecs"]["Worker"]
    assert worker["replicas"] == NODES and worker["restartPolicy"] == "OnFailure"
    # the operator reads the master port from the container named "paddle", port named "master"
    assert container["name"] == "paddle"
    assert [p["containerPort"] for p in container["ports"] if p["name"] == "master"] == [37777]
    # the output folder lies on a volume that is a PersistentVolumeClaim, shared by every pod
    claims = {v["name"] for v in worker["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v}
    env = {v["name"]: v["value"] for v in container["env"]}
    assert [m for m in container["volumeMounts"] if m["name"] in claims
            and env["OUTPUT_DIR"].startswith(m["mountPath"].rstrip("/") + "/")]
    assert env["PARAM_PATH"] == PARAM


def test_paddlejob_command_is_the_launcher_given_only_the_operators_variables(tmp_path):
    """The pod's command, printed instead of run: the launcher with no --master, --nnodes or --rank (it
    reads PADDLE_MASTER, PADDLE_NNODES and PADDLE_JOB_ID), with trainer.resume=auto, so the same command
    starts the run and, in a restarted pod, continues it (tests/test_end_to_end.py runs that)."""
    out = tmp_path / "out"
    cmd, env = paddlejob_pod({"PADDLE_MASTER": "10.0.0.1:37777", "PADDLE_NNODES": str(NODES),
                              "PADDLE_JOB_ID": "appzoo-cls", "OUTPUT_DIR": str(out), "APPZOO_DRY_RUN": "1"},
                             "--do", "train")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "python", "-m", "paddle.distributed.launch", "run_trainer.py", "--param_path", PARAM,
        "--set", f"trainer.output_dir={out}", "--set", "trainer.resume=auto", "--do", "train"]


# ---- Slurm: the sbatch script
SLURM_JOB = {"SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_JOB_ID": "4242"}


def test_sbatch_launcher_command_from_slurm_variables(tmp_path):
    """One srun task on each node; on node 1 of 2: its rank, the first host's address as master, a port
    from the job id, a log folder of its own, trainer.resume=auto (a job submitted again continues)."""
    out = tmp_path / "out"
    expected = ["python", "-m", "paddle.distributed.launch", "--nnodes", "2", "--rank", "1",
                "--master", "127.0.0.1:24242", "--job_id", "slurm-4242", "--nproc_per_node", "1",
                "--log_dir", "log/slurm-4242/node-1", "run_trainer.py", "--param_path", PARAM,
                "--set", f"trainer.output_dir={out}", "--set", "trainer.resume=auto", "--do", "train"]
    dry = dict(SLURM_JOB, APPZOO_DRY_RUN="1")
    done = _sbatch(tmp_path, ["localhost", "node-b"], dry, PARAM, str(out), "--do", "train")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected
    assert (tmp_path / "bin" / "srun.options").read_text().splitlines() == ["--nodes 2", "--ntasks-per-node 1"]

    done = _sbatch(tmp_path, ["localhost", "node-b"], dict(dry, SLURM_GPUS_ON_NODE="8", MASTER_PORT="29500"),
                   PARAM, str(out), "--do", "train")
    assert done.returncode == 0, done.stderr
    changed = {"127.0.0.1:24242": "127.0.0.1:29500"}
    expected = [changed.get(word, word) for word in expected]
    expected[expected.index("--nproc_per_node") + 1] = "8"
    assert done.stdout.split() == expected


def test_sbatch_without_a_param_file_says_how_to_call_it(tmp_path):
    done = _sbatch(tmp_path, ["localhost"], SLURM_JOB)
    assert done.returncode == 2 and "usage: sbatch" in done.stderr


@pytest.mark.parametrize("code, steps", [(1, 3), (247, 3), (2, 1), (143, 1)])
def test_sbatch_starts_a_failed_step_again_unless_the_input_is_bad_or_it_was_stopped(tmp_path, code, steps):
    """MAX_RESTARTS=2: a step that fails (1; 247, a worker killed) runs 3 times in all; bad input (2) and a
    stop asked for (143: SIGTERM, as scancel sends) once. The run itself: tests/test_cluster.py."""
    env = dict(SLURM_JOB, MAX_RESTARTS="2", FAKE_SRUN_EXIT=str(code))
    done = _sbatch(tmp_path, ["localhost", "node-b"], env, PARAM, str(tmp_path / "out"))
    assert done.returncode == code
    started = (tmp_path / "bin" / "srun.options").read_text().splitlines().count("--nodes 2")
    assert started == steps
    again = [f"appzoo: the step failed (exit {code}); starting it again ({i} of 2)" for i in range(1, steps)]
    assert done.stderr.splitlines() == again
