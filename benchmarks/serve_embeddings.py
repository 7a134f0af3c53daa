"""What ``POST /v1/embeddings`` costs over ``Predictor.embed``: time per request and answer size, float
against base64, measured in one run.

    python benchmarks/serve_embeddings.py            # 20 requests a row, at most 60 s a row
    python benchmarks/serve_embeddings.py --quick    # a check of this script

The ERNIE tiny classifier of ``benchmarks/serve_load.py`` (``output/serve_bench/tiny``, trained for 20 steps
first when missing: speed does not depend on what it learned) embeds the first 32 sentences of
``data/cls/test.tsv``, and the first one alone: ``Predictor.embed`` in this process (the median of the
requests), and ``python -m appzoo.serve`` on 127.0.0.1 with an API key, to which one client sends
the same texts, ``encoding_format`` float and base64; the three are called in turn, round after round, so that
the machine's other load slows each alike. A request's time is from sending to the whole answer read.
Writes ``benchmarks/results/serve_embeddings.json`` and its section of ``benchmarks/RESULTS.md`` (not with
``--quick``).
"""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.chdir(ROOT)

from appzoo.env import available_cores, configure_cpu  # noqa: E402
from appzoo.store.bundle import MARKER  # noqa: E402  (light: no paddle)
from appzoo.utils.files import write_json  # noqa: E402  (atomic)
from benchmarks.record import PACKAGES, keep_section, machine, machine_line  # noqa: E402

RUN = os.path.join("output", "serve_bench", "tiny")  # serve_load.py's tiny model
TRAIN = ["run_trainer.py", "--param_path", "examples/cls_ernie_fc_ch.json", "--set", f"trainer.output_dir={RUN}",
         "--set", "trainer.max_steps=20", "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false"]
KEY = "bench-key-0123456789"  # the server checks a key on every request, as a deployed one would
RESULTS = os.path.join("benchmarks", "results", "serve_embeddings.json")
SECTION = "## Serving: /v1/embeddings against Predictor.embed"


def ensure_trained():
    best = os.path.join(RUN, "best")
    if not os.path.isfile(os.path.join(best, MARKER)):
        print(f"training: {' '.join(TRAIN)}", flush=True)
        if subprocess.run([sys.executable, *TRAIN], capture_output=True).returncode != 0:
            raise SystemExit("training the tiny model failed")
    return best


def texts():
    with open("data/cls/test.tsv", encoding="utf-8") as f:
        return [line.split("\t")[0] for line in f if line.strip()][:32]


def timed(calls, requests, max_seconds):
    """``{name: (median ms, calls timed)}`` of each of ``calls`` (``{name: call}``), called in turn, round after
    round, so that what else runs on the machine slows each alike; ``requests`` rounds (fewer once
    ``max_seconds`` passed), after 3 warm-up rounds."""
    for _ in range(3):
        for call in calls.values():
            call()
    spent, started = {name: [] for name in calls}, time.monotonic()
    while len(spent[next(iter(calls))]) < requests and time.monotonic() - started < max_seconds:
        for name, call in calls.items():
            t = time.perf_counter()
            call()
            spent[name].append((time.perf_counter() - t) * 1000)
    return {name: (statistics.median(times), len(times)) for name, times in spent.items()}


def post(port, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/v1/embeddings", json.dumps(body).encode("utf-8"),
                     {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
        response = conn.getresponse()
        raw = response.read()
    finally:
        conn.close()
    if response.status != 200:
        raise SystemExit(f"/v1/embeddings answered {response.status}: {raw[:200]!r}")
    return raw


def serve(best, threads):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "appzoo.serve", f"tiny={best}", "--port", str(port),
                                "--threads", str(threads)], env={**os.environ, "APPZOO_API_KEY": KEY},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/v2/health/ready")
            if conn.getresponse().status == 200:
                return process, port
        except OSError:
            pass
        if process.poll() is not None:
            raise SystemExit(f"the server exited {process.returncode} while starting")
        time.sleep(0.25)
    process.kill()
    raise SystemExit("the server was not ready within 300 s")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--max-seconds", type=float, default=60)
    parser.add_argument("--quick", action="store_true", help="5 requests a row, nothing written")
    args = parser.parse_args()
    requests = 5 if args.quick else args.requests
    load = os.getloadavg()  # the machine's other work, which the interleaving spreads over every row
    threads = available_cores()
    configure_cpu(threads)
    from appzoo.inference.predictor import Predictor  # paddle: after the CPU's threads are set
    from appzoo.registry import load_components

    load_components()
    best, sample = ensure_trained(), texts()
    process, port = serve(best, threads)
    rows = []
    try:
        predictor = Predictor(best, num_threads=threads)
        for name, batch in (("32 texts", sample), ("1 text", sample[:1])):
            bodies = {e: {"model": "tiny", "input": batch, "encoding_format": e} for e in ("float", "base64")}
            calls = {"Predictor.embed": lambda batch=batch: predictor.embed(batch),
                     **{f"/v1/embeddings {e}": lambda body=body: post(port, body) for e, body in bodies.items()}}
            for how, (ms, n) in timed(calls, requests, args.max_seconds).items():
                body = bodies.get(how.rsplit(" ", 1)[-1])
                rows.append({"request": name, "how": how, "ms": ms, "n": n,
                             "bytes": None if body is None else len(post(port, body))})
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    dimensions = predictor.embed(sample[:1]).vectors.shape[1]
    report(rows, code, threads, requests, args, dimensions=dimensions, load=load)


def report(rows, code, threads, requests, args, dimensions, load):
    direct = {r["request"]: r["ms"] for r in rows if r["how"] == "Predictor.embed"}
    lines = ["| request | how | median ms | requests | answer bytes | x Predictor.embed |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        size = "" if r["bytes"] is None else f"{r['bytes']:,}"
        lines.append(f"| {r['request']} | {r['how']} | {r['ms']:.1f} | {r['n']} | {size} | "
                     f"{r['ms'] / direct[r['request']]:.2f} |")
    info = machine(PACKAGES + ("fastapi", "uvicorn"))
    command = "--quick" if args.quick else f"--requests {requests} --max-seconds {args.max_seconds:g}"
    when = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    text = (f"Measured {when} with `python benchmarks/serve_embeddings.py {command}` on {machine_line(info)}; "
            f"{threads} engine thread(s), the client on the same cores; server exit code after SIGTERM: {code}; "
            f"load average before the run {' '.join(f'{x:.2f}' for x in load)} on {os.cpu_count()} cores.\n\n"
            f"The ERNIE tiny classifier's pooled vectors ({dimensions} floats) of the first 32 sentences of "
            f"data/cls/test.tsv, "
            f"and of the first alone, each way called in turn, round after round (the machine's other load slows each "
            f"alike); the vectors run on the Paddle model, so Predictor.embed is the floor.\n\n"
            + "\n".join(lines))
    print(text)
    if not args.quick:
        write_json(RESULTS, {"rows": rows, "exit_code": code, "threads": threads, "load_average": load,
                             "machine": info})
        keep_section(os.path.join("benchmarks", "RESULTS.md"), "serve_embeddings", f"{SECTION}\n\n{text}")


if __name__ == "__main__":
    main()
