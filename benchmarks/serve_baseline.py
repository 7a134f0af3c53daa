"""The baseline of ``benchmarks/serve_load.py``: a PaddleNLP-SimpleServer-style app,
one Predictor behind one lock, one POST route, no batching across requests.

    python benchmarks/serve_baseline.py output/serve_bench/tiny/best --port 8001

``POST /predict`` takes ``{"inputs": [...]}`` and answers ``{"predictions": rows}``,
as ``appzoo.serve``'s plain route does. FastAPI runs the (sync) route on its
thread pool, so requests are read and answered concurrently but predicted one
at a time, each with all of the engine's threads. The model is loaded and
warmed up before uvicorn listens: the port answering means the model is ready.
SIGTERM or Ctrl-C stops it gracefully with exit 0.
"""
import argparse
import os
import signal
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from appzoo.env import available_cores, configure_cpu, import_paddle_quietly  # noqa: E402


def create_app(best, engine, precision, threads):
    from fastapi import FastAPI

    from appzoo.inference.predictor import Predictor

    predictor = Predictor(best, engine=engine, precision=precision, batch_size=32, num_threads=threads)
    predictor.predict(["warm up"])  # the first batch pays the graph's set-up, as appzoo.serve's warm-up
    lock = threading.Lock()
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/predict")
    def predict(body: dict):
        with lock:
            return {"predictions": predictor.predict(body["inputs"])}

    return app


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("best", help="a run's best/ folder")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--engine", default="paddle_inference")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--threads", type=int, default=available_cores(), help="engine threads (default: all cores)")
    args = parser.parse_args()

    configure_cpu(args.threads)  # before paddle loads, as appzoo.serve does
    import_paddle_quietly()
    import uvicorn

    app = create_app(args.best, args.engine, args.precision, args.threads)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning",
                                           access_log=False))
    # uvicorn stops gracefully on SIGTERM, then raises the signal again under the handlers it found:
    # these, so that the process ends with exit 0 rather than being killed by its own signal
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: None)
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
