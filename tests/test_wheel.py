"""The wheel is the whole toolkit: built from the sources, installed (not editable) into a new virtual environment and
used from a folder that holds no source code, it lists its components, trains a sample example, serves the try-it
page and gives ``from appzoo import Predictor``.

The new environment gets the wheel alone (``--no-deps``); the packages of requirements.txt come from this
interpreter's site-packages through a ``.pth`` line, so the test checks what the wheel carries, not the download of
paddle again. Only plain paths are added: an editable install of appzoo there is not followed.
"""
import http.client
import os
import shutil
import signal
import site
import socket
import subprocess
import sys
import sysconfig
import time
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ("appzoo", "tasks", "run_trainer.py", "pyproject.toml", "README.md")

pytestmark = pytest.mark.slow


def _copy_sources(target):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        path = os.path.join(ROOT, name)
        (shutil.copytree(path, os.path.join(target, name), ignore=ignore) if os.path.isdir(path)
         else shutil.copy2(path, target))


def _environment():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", PYTHONNOUSERSITE="1")
    return env


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(venv bin folder, a user's folder with examples/, data/ and configs/ but no code)``."""
    tmp = tmp_path_factory.mktemp("wheel")
    src, dist, venv, user = (tmp / n for n in ("src", "dist", "venv", "user"))
    src.mkdir()
    _copy_sources(src)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(dist), str(src)], capture_output=True, text=True, env=_environment())
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("appzoo-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    static = {os.path.relpath(os.path.join(base, f), ROOT).replace(os.sep, "/")
              for base, _, files in os.walk(os.path.join(ROOT, "appzoo", "serve", "static")) for f in files}
    assert static and static <= names, f"the wheel lacks {sorted(static - names)}"

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bin_dir = venv / "bin"
    purelib = subprocess.run([str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    with open(os.path.join(purelib, "requirements-from-the-test.pth"), "w") as f:
        f.write("".join(f"{p}\n" for p in sorted(ours) if os.path.isdir(p)))
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q",
                           "--no-deps", str(wheel)], capture_output=True, text=True, env=_environment())
    assert done.returncode == 0, done.stderr

    user.mkdir()
    for name in ("examples", "data", "configs"):
        shutil.copytree(os.path.join(ROOT, name), user / name)
    return bin_dir, user


def _run(installed, *argv, timeout=300):
    bin_dir, user = installed
    return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], cwd=user, capture_output=True, text=True,
                          env=_environment(), timeout=timeout)


def test_the_installed_package_is_the_wheels_and_gives_the_predictor(installed):
    done = _run(installed, "python", "-c", "import appzoo, tasks; from appzoo import Predictor; "
                                           "print(appzoo.__file__); print(tasks.__file__)")
    assert done.returncode == 0, done.stderr
    venv = os.path.dirname(str(installed[0]))
    assert all(line.startswith(venv) for line in done.stdout.split()), done.stdout  # not the checkout's


def test_the_appzoo_command_lists_trains_and_serves_the_page(installed):
    listed = _run(installed, "appzoo", "--list")
    assert listed.returncode == 0 and "focal" in listed.stdout, listed.stderr

    out = "output/wheel_cls"
    trained = _run(installed, "appzoo", "--param_path", "examples/cls_ernie_fc_with_focal.json",
                   "--set", f"trainer.output_dir={out}", "--set", "trainer.max_steps=3",
                   "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false")
    assert trained.returncode == 0, trained.stderr
    best = installed[1] / out / "best"
    assert (installed[1] / out / "metrics.json").is_file() and best.is_dir()

    port = _free_port()
    bin_dir, user = installed
    server = subprocess.Popen([str(bin_dir / "appzoo"), "serve", str(best), "--port", str(port)], cwd=user,
                              env=_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, page = time.time() + 120, None
        while page is None and time.time() < deadline and server.poll() is None:
            try:
                status, body = _get(port, "/")
                page = (status, body)
            except OSError:
                time.sleep(0.5)
        assert page is not None, server.communicate(timeout=10)
        status, body = page
        assert status == 200 and "<html" in body.lower() and "<script" in body.lower(), body[:300]
        while _get(port, "/v2/health/ready")[0] != 200 and time.time() < deadline:  # stopped once serving
            time.sleep(0.5)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.stderr_text = server.communicate(timeout=60)[1]
        except subprocess.TimeoutExpired:
            server.kill()
            server.stderr_text = server.communicate()[1]
    assert server.returncode == 0, (server.returncode, server.stderr_text[-3000:])
