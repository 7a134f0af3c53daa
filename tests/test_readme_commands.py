"""README.md's commands run as written: every ```bash block, in a fresh copy of the repository, with small budgets.

Each command line is run as a user would paste it, from a copy of the repository's files (``git ls-files``, so no
``output/`` of another run is there). What is changed, and why (the table :data:`HOW`):

* ``pip install`` and ``python -m pytest`` are not run: this test runs inside that install, in that suite;
* a command that trains gets ``--set trainer.max_steps=2`` and ``trainer.plots=false`` (the issue's "small
  budgets"; no documented file of README is a plot, and drawing them is 1.6 s of each 2-step run), and its dev and
  test files cut to every eighth example (tests/budgets.py: a 12-layer encoder's full evaluation would be most of
  the run);
* ``--do serve`` is started in the background on a free port (``--set serve.port``), and the next commands'
  ``localhost:8000`` point at it; it is stopped with SIGTERM once they ran, and must exit 0;
* ``get_data.py`` reads the shared mirror (``--mirror``) where there is one, since this machine has no network.

The test fails when a command exits non-zero, or when a file the README says a command writes is missing: the
folder's files of "One run", and each file a ``cat`` reads; and when a run of one param file did not train its two
steps and evaluate (the check tests/test_examples.py makes of every example, which leaves to this test the examples
a README command trains).
"""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from budgets import check_metrics, evaluated_on_every_eighth

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIRROR = os.path.join(os.path.dirname(ROOT), "shared", "data", "raw")
BUDGET = ["--set", "trainer.max_steps=2", "--set", "trainer.plots=false"]  # plots: 1.6 s a run
SKIPPED = {"pip": "the install is done: this test runs inside it", "pytest": "it is this suite"}



def blocks(text):
    """``[(heading, [command, ...])]`` of the ```bash blocks of ``text``; a command is a list of words (``#``
    comments and line continuations as bash reads them)."""
    found, heading = [], None
    for match in re.finditer(r"^(#+ [^\n]*)$|^```bash\n(.*?)^```", text, re.M | re.S):
        if match.group(1):
            heading = match.group(1).lstrip("# ").strip()
            continue
        body = match.group(2).replace("\\\n", " ")
        found.append((heading, [words for line in body.splitlines() if (words := shlex.split(line, comments=True))]))
    return found


def documented_run_files(text):
    """The files README's "One run" says the output folder holds (the sentence listing them in backticks)."""
    sentence = re.search(r"The folder's files \(([^)]*)\)", text)
    assert sentence, "README.md no longer lists the output folder's files"
    return re.findall(r"`([^`]+)`", sentence.group(1))


def kind(words):
    if words[0] == "pip" or words[1:3] == ["-m", "pip"]:
        return "pip"
    if words[1:3] == ["-m", "pytest"]:
        return "pytest"
    if words[0] == "curl":
        return "curl"
    if words[0] == "cat":
        return "cat"
    if "benchmarks/get_data.py" in words:
        return "get_data"
    if "run_trainer.py" in words and "--param_path" in words:
        do = words[words.index("--do") + 1].split(",") if "--do" in words else ["train"]
        return "serve" if do == ["serve"] else "train" if "train" in do or "--sweep" in words or "--search" in words \
            else "run"
    return "run"


def is_one_run(words):
    """A command that trains one param file in one folder (not a sweep, a search or a launcher of several)."""
    return kind(words) == "train" and not {"--sweep", "--search", "--trials"} & set(words) \
        and "paddle.distributed.launch" not in words


def param_path(words):
    return words[words.index("--param_path") + 1]


def trained_examples():
    """The param files of examples/ that a README command trains as one run."""
    return {param_path(w) for blocks_ in sections().values() for commands in blocks_ for w in commands
            if is_one_run(w) and param_path(w).startswith("examples/")}


def output_folder(words, root):
    """Where a one-run command writes: output/<the param file's name>, or as its --set says."""
    named = [w.split("=", 1)[1] for w in words if w.startswith("trainer.output_dir=")]
    example = os.path.splitext(os.path.basename(param_path(words)))[0]
    return root / (named[-1] if named else os.path.join("output", example))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_of_the_repository(target):
    """A copy of the repository's files (tracked, and new ones not ignored) in ``target``, as a fresh clone has
    them."""
    listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = os.path.join(ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.join(target, os.path.dirname(name)), exist_ok=True)
            shutil.copy2(source, os.path.join(target, name))
    return target


def environment():
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # `python` is this one
    env.pop("PYTHONPATH", None)
    return env


def run(words, cwd, timeout=900):
    done = subprocess.run(words, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"README: `{shlex.join(words)}` exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def wait_ready(port, server, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"the README's server did not get ready: {server.communicate(timeout=30)}")


def stop(server):
    server.send_signal(signal.SIGTERM)
    try:
        _, err = server.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        _, err = server.communicate()
    assert server.returncode == 0, f"the README's server exited {server.returncode}: {err[-2000:]}"


def readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def sections():
    """``{heading: [command, ...]}``: the commands of each section, which run in order in one fresh copy; the
    sections are independent, so each is a test of its own (xdist runs them side by side)."""
    found = {}
    for heading, commands in blocks(readme()):
        found.setdefault(heading, []).append(commands)
    return found


def runnable():
    """The sections with a command this test runs (Install and test has only pip and pytest)."""
    return [h for h, bs in sections().items() if any(kind(w) not in SKIPPED for c in bs for w in c)]


def test_the_readme_has_commands_of_every_kind():
    kinds = {kind(words) for blocks_ in sections().values() for commands in blocks_ for words in commands}
    assert {"pip", "pytest", "train", "run", "serve", "curl", "cat", "get_data"} <= kinds  # a parse finding nothing


@pytest.mark.slow
@pytest.mark.parametrize("heading", runnable())
def test_the_commands_of_a_readme_section_run_as_written(heading, tmp_path):
    text = readme()
    fresh = copy_of_the_repository(tmp_path)
    server = port = None
    try:
        for commands in sections()[heading]:
            for words in commands:
                what = kind(words)
                if what in SKIPPED:
                    continue
                if words[0] == "python":
                    words = [sys.executable, *words[1:]]
                if what == "train":
                    words = [*words, *BUDGET, *evaluated_on_every_eighth(param_path(words), tmp_path / "eighth",
                                                                         cwd=fresh)]
                elif what == "get_data":
                    if not os.path.isdir(MIRROR):
                        pytest.skip(f"{shlex.join(words)} needs the network or a mirror; no {MIRROR} here")
                    words = [*words, "--mirror", MIRROR]
                elif what == "serve":
                    port = free_port()
                    words = [*words, "--set", f"serve.port={port}"]
                    server = subprocess.Popen(words, cwd=fresh, env=environment(), stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True)
                    wait_ready(port, server)
                    continue
                elif what == "curl":
                    assert server is not None, "README: a curl with no server started before it"
                    words = [w.replace("localhost:8000", f"127.0.0.1:{port}") for w in words]
                    answer = run([*words, "--fail-with-body", "-sS"], fresh).stdout
                    assert '"predictions"' in answer or '"label"' in answer, answer[:500]
                    continue
                done = run(words, fresh)
                if what == "cat":
                    assert done.stdout.strip(), f"README: {words[1]} is empty"
                if is_one_run(words):
                    check_metrics(output_folder(words, fresh), 2)
                if heading == "One run" and what == "train":
                    folder = output_folder(words, fresh)
                    for name in documented_run_files(text):
                        assert list(folder.glob(name.rstrip("/"))), f"README's One run promises {name}; not in {folder}"
            if server is not None:  # the block that started it is done
                stop(server)
                server = None
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.communicate()


def test_the_readme_names_every_registered_loss_and_mode():
    """The Losses line of README names each registered loss by its key value, and the --do row each mode."""
    import appzoo.losses  # noqa: F401  (registers them)
    from appzoo.registry import LOSSES
    from appzoo.params.trainer import MODES

    text = readme()
    line = re.search(r"^- \*\*Losses\*\*.*?(?=^- \*\*)", text, re.M | re.S).group(0)
    assert {"ce", "asl", "infonce"} <= set(LOSSES.names())
    missing = [name for name in LOSSES.names() if f"`{name}`" not in line]
    assert not missing, f"README's Losses line leaves out {missing}"
    row = next(r for r in text.splitlines() if r.startswith("| `--do MODES`"))
    assert all(mode in row for mode in (*MODES, "serve")), row


def test_the_readme_task_table_names_every_registered_reader_with_an_example_of_it():
    """Use your own data's table: each reader registered by tasks/ in its `dataset_reader.type` column, and each
    row's param files exist and use one of that row's readers."""
    from appzoo.params.param_file import load_param_file
    from appzoo.registry import READERS

    text = readme()
    rows = [r.split(" | ") for r in text.splitlines() if r.startswith("| ") and "examples/" in r and "`_" not in r]
    rows = [r for r in rows if len(r) == 4 and "_" in r[1]]
    assert len(rows) == 3, "README's task table was not found"
    named = {name for row in rows for name in re.findall(r"`([a-z_]+)`", row[1])}
    built_in = {name for name in READERS.names() if READERS.get(name, "reader").__module__.startswith("tasks.")}
    assert named == built_in, f"README's task table names {sorted(named)}; tasks/ registers {sorted(built_in)}"
    for row in rows:
        readers = set(re.findall(r"`([a-z_]+)`", row[1]))
        for example in re.findall(r"`(examples/[^`]+)`", row[3]):
            assert load_param_file(os.path.join(ROOT, example))["dataset_reader"]["type"] in readers, (example, row[0])


def relative_links(path):
    """The targets of the Markdown links of ``path`` that point into the repository (no address, no anchor)."""
    with open(path, encoding="utf-8") as f:
        return [m.group(1) for m in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", f.read())
            if not m.group(1).startswith(("http://", "https://", "mailto:"))]


def test_every_link_of_the_docs_into_the_repository_finds_its_file():
    """A module moved into a wing leaves no link of README.md, docs/ or RESULTS.md pointing at its old place."""
    pages = ["README.md", "benchmarks/RESULTS.md",
             *(os.path.join("docs", n) for n in sorted(os.listdir(os.path.join(ROOT, "docs"))) if n.endswith(".md"))]
    broken = [f"{page}: {target}" for page in pages for target in relative_links(os.path.join(ROOT, page))
              if not os.path.exists(os.path.normpath(os.path.join(ROOT, os.path.dirname(page), target)))]
    assert broken == []
    assert "docs/architecture.md" in relative_links(os.path.join(ROOT, "README.md"))  # the finder finds links
