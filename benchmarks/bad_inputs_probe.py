"""Run the bad-input table (tests/bad_input_cases.py) against a checkout and
print the verdict counts: good / poor message / traceback / silent / data loss.

    python benchmarks/bad_inputs_probe.py --repo /tmp/before --label before
    python benchmarks/bad_inputs_probe.py --repo . --label after
    python benchmarks/bad_inputs_probe.py --label after --serve   # and the server's hostile requests

With ``--serve`` the checkout's server cases run too: its tests/test_serve_bad_requests.py (the request table,
raw-socket framing, slow and silent clients, 64 MB bodies, limits), tests/test_serve_security.py (hostile
reloads, pickled weights, Host headers, simple-request POSTs) and the signal and start-up tests of
tests/test_serve.py, against live servers on 127.0.0.1 in a pytest process of their own; each test is a case,
good when it passes.

Each case runs ``run_trainer.main`` of that checkout in-process (cwd = the
checkout), with its inputs in a fresh temporary folder. The per-case results
go to benchmarks/results/bad_inputs_<label>.json of this checkout.
"""
import argparse
import collections
import contextlib
import gc
import io
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_cases():
    """This checkout's table and harness (tests/bad_input_cases.py, tests/bad_input_harness.py), whichever
    checkout is probed."""
    sys.path.insert(0, os.path.join(HERE, "tests"))
    try:
        import bad_input_cases
        import bad_input_harness
    finally:
        sys.path.pop(0)
    return bad_input_cases.CASES, bad_input_harness


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=HERE, help="the checkout to probe (default: this one)")
    parser.add_argument("--label", required=True, help="names the results file, e.g. before / after")
    parser.add_argument("-k", default="", help="only cases whose id contains this")
    parser.add_argument("--serve", action="store_true", help="also the server's hostile-request tests (minutes: "
                                                             "they train the runs the server answers with)")
    args = parser.parse_args()
    repo = os.path.abspath(args.repo)
    cases, harness = load_cases()

    os.chdir(repo)
    sys.path.insert(0, repo)
    import run_trainer  # the checkout's, since it comes first on sys.path

    assert os.path.dirname(os.path.abspath(run_trainer.__file__)) == repo, run_trainer.__file__
    import appzoo.env

    appzoo.env.import_paddle_quietly()
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())

    rows, started = [], time.time()
    with tempfile.TemporaryDirectory(prefix="bad_inputs_") as tmp:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            finished = harness.make_finished_run(os.path.join(tmp, "finished"), repo, run_trainer.main)
            encoder = harness.make_encoder_folder(os.path.join(tmp, "encoder", "enc"), repo)
        gc.freeze()  # the libraries' objects: each case's gc.collect() then scans only its own
        for n, case in enumerate(c for c in cases if args.k in c.id):
            ws = harness.Workspace(os.path.join(tmp, f"case{n:03d}"), repo, finished, encoder)
            os.makedirs(ws.root)
            err, t0 = io.StringIO(), time.time()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                outcome = harness.execute(case, ws, run_trainer.main)
            verdict, reason = harness.judge(case, outcome, err.getvalue(), ws)
            lines = [line for line in err.getvalue().splitlines() if line.strip()]
            if outcome.exception:
                lines = outcome.exception.strip().splitlines()
            rows.append({"id": case.id, "group": case.group, "verdict": verdict, "reason": reason,
                         "exit": outcome.rc, "stderr_lines": len(lines),
                         "first_line": lines[0][:400] if lines else "", "last_line": lines[-1][:400] if lines else "",
                         "wrote_files": len(outcome.wrote or []), "left_in_prior_run": (outcome.added or [])[:5], "seconds": round(time.time() - t0, 2)})
            print(f"{verdict:13} {case.id:60} {rows[-1]['seconds']:6.1f}s  {reason[:120]}", flush=True)

    counts = collections.Counter(r["verdict"] for r in rows)
    print(f"\nbad-input probe: {repo} at {commit}{' (modified)' if dirty else ''}, {len(rows)} cases, "
          f"{time.time() - started:.0f} s\n")
    print("| verdict | count |\n|---|---|")
    for verdict in harness.VERDICTS:
        print(f"| {verdict} | {counts.get(verdict, 0)} |")
    codes = {c.id: c.code for c in cases}
    wrote = [r["id"] for r in rows if r["wrote_files"] and r["verdict"] != "silent" and codes[r["id"]] == 2]
    print(f"\nfailed runs that wrote files into a fresh output folder (the plan should refuse them first): "
          f"{len(wrote)}{': ' + ', '.join(wrote) if wrote else ''}")
    left = [r["id"] for r in rows if r["left_in_prior_run"]]
    print(f"runs that left new files in a finished run's folder: {len(left)}{': ' + ', '.join(left) if left else ''}")
    served = serve_cases(repo) if args.serve else None
    if served is not None:
        bad = [c for c in served if c["verdict"] != "good"]
        print(f"\nserver cases: {len(served)}, good {len(served) - len(bad)}"
              f"{''.join(chr(10) + '  not good: ' + c['id'] + ': ' + c['reason'] for c in bad)}")
    out = os.path.join(HERE, "benchmarks", "results", f"bad_inputs_{args.label}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"repo": repo, "commit": commit, "modified": dirty, "cases": len(rows),
                   "counts": {v: counts.get(v, 0) for v in harness.VERDICTS}, "failed_runs_that_wrote_files": wrote, "left_files_in_prior_run": left,
                   "wall_s": round(time.time() - started), "results": rows, "server_cases": served}, f,
                  ensure_ascii=False, indent=1)
    print(f"\nwritten: {out}")


#: the checkout's server tests that are hostile requests, signals or bad start-up settings
SERVE_TESTS = ["tests/test_serve_bad_requests.py", "tests/test_serve_security.py",
               "tests/test_serve.py::test_two_sigterms_under_load_answer_in_flight_requests_then_exit_0",
               "tests/test_serve.py::test_a_sigterm_while_the_model_exports_exits_0_not_abort",
               "tests/test_serve.py::test_a_second_ctrl_c_stops_at_once_with_130"]


def serve_cases(repo):
    """``[{id, verdict, reason}]`` of :data:`SERVE_TESTS` of ``repo`` (those it has), run by its pytest."""
    import xml.etree.ElementTree as ET

    tests = [t for t in SERVE_TESTS if os.path.exists(os.path.join(repo, t.split("::")[0]))]
    with tempfile.TemporaryDirectory(prefix="bad_inputs_serve_") as tmp:
        report = os.path.join(tmp, "serve.xml")
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                        *tests], cwd=repo, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if not os.path.exists(report):
            return [{"id": "pytest", "verdict": "traceback", "reason": "the server tests did not run"}]
        cases = []
        for test in ET.parse(report).iter("testcase"):
            problem = next((c for c in test if c.tag in ("failure", "error", "skipped")), None)
            verdict = "good" if problem is None else "skipped" if problem.tag == "skipped" else "not good"
            cases.append({"id": test.get("name"), "verdict": verdict,
                          "reason": "" if problem is None else (problem.get("message") or "")[:200]})
        return cases


if __name__ == "__main__":
    main()
