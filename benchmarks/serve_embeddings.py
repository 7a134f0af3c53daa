"""What ``POST /v1/embeddings`` costs over ``Predictor.embed``: time per request and answer size, float
against base64, measured in one run.

    python benchmarks/serve_embeddings.py            # 20 requests a row, at most 60 s a row
    python benchmarks/serve_embeddings.py --quick    # a check of this script

The ERNIE tiny classifier of ``benchmarks/serve_load.py`` (``output/serve_bench/tiny``, trained for 20 steps
first when missing: speed does not depend on what it learned) embeds the first 32 sentences of
``data/cls/test.tsv``, and the first one alone. ``Predictor.embed`` is timed in this process first (the
median of the requests), then ``python -m appzoo.serve`` runs on 127.0.0.1 with an API key and one client
sends the same texts one request after another, ``encoding_format`` float, then base64; a request's time is
from sending to the whole answer read. Writes ``benchmarks/results/serve_embeddings.json`` and its section
of ``benchmarks/RESULTS.md`` (not with ``--quick``).
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
from benchmarks.record import PACKAGES, machine, machine_line, put_section  # noqa: E402

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


def timed(call, requests, max_seconds):
    """Median ms of ``call()`` over ``requests`` calls (fewer once ``max_seconds`` passed), after 3 warm-ups."""
    for _ in range(3):
        call()
    spent, started = [], time.monotonic()
    while len(spent) < requests and time.monotonic() - started < max_seconds:
        t = time.perf_counter()
        call()
        spent.append((time.perf_counter() - t) * 1000)
    return statistics.median(spent), len(spent)


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
    threads = available_cores()
    configure_cpu(threads)
    from appzoo.inference.predictor import Predictor  # paddle: after the CPU's threads are set
    from appzoo.registry import load_components

    load_components()
    best, sample = ensure_trained(), texts()
    predictor = Predictor(best, num_threads=threads)
    rows = []
    for name, batch in (("32 texts", sample), ("1 text", sample[:1])):
        ms, n = timed(lambda: predictor.embed(batch), requests, args.max_seconds)
        rows.append({"request": name, "how": "Predictor.embed", "ms": ms, "n": n, "bytes": None})
    process, port = serve(best, threads)
    try:
        for name, batch in (("32 texts", sample), ("1 text", sample[:1])):
            for encoding in ("float", "base64"):
                body = {"model": "tiny", "input": batch, "encoding_format": encoding}
                ms, n = timed(lambda: post(port, body), requests, args.max_seconds)
                rows.append({"request": name, "how": f"/v1/embeddings {encoding}", "ms": ms, "n": n,
                             "bytes": len(post(port, body))})
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    report(rows, code, threads, requests, args, size=predictor.embed(sample[:1]).vectors.shape[1])


def report(rows, code, threads, requests, args, size):
    direct = {r["request"]: r["ms"] for r in rows if r["how"] == "Predictor.embed"}
    lines = ["| request | how | median ms | requests | answer bytes | x Predictor.embed |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        size = "" if r["bytes"] is None else f"{r['bytes']:,}"
        lines.append(f"| {r['request']} | {r['how']} | {r['ms']:.1f} | {r['n']} | {size} | "
                     f"{r['ms'] / direct[r['request']]:.2f} |")
    info = machine(PACKAGES + ("fastapi", "uvicorn"))
    text = (f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with `python benchmarks/serve_embeddings.py "
            f"{'--quick' if args.quick else f'--requests {requests} --max-seconds {args.max_seconds:g}'}` on {machine_line(info)}; "
            f"{threads} engine thread(s), the client on the same cores; server exit code after SIGTERM: {code}.\n\n"
            f"The ERNIE tiny classifier's pooled vectors ({size} floats) of the first 32 sentences of data/cls/test.tsv, "
            f"and of the first alone; the vectors run on the Paddle model, so Predictor.embed is the floor.\n\n"
            + "\n".join(lines))
    print(text)
    if not args.quick:
        write_json(RESULTS, {"rows": rows, "exit_code": code, "threads": threads, "machine": info})
        put_section(os.path.join("benchmarks", "RESULTS.md"), SECTION, text, until="## ")


if __name__ == "__main__":
    main()
