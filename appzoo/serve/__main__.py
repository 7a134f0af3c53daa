"""Serve trained models over HTTP.

    python -m appzoo.serve output/cls/best
    python -m appzoo.serve cls=output/cls/best ner=output/ner/best --port 8080
    appzoo serve output/cls/best --engine dygraph

Each PATH is a run's ``best/`` folder, named NAME or after its run folder.
The options are the keys of a param file's ``serve`` section
(``run_trainer.py --describe serve``), and ``--api-key``; ``--param_path X.json --do serve``
serves that run's ``best/`` with the file's own ``serve`` section.
API keys: ``--api-key KEY``, the APPZOO_API_KEY variable, ``--api-key-file FILE``
(docs/serving.md#api-keys); the variable or the file keep a key out of ``ps``.
"""
import argparse
import dataclasses
import os
import signal
import sys
import typing

from appzoo.store.archive import RunFolder
from appzoo.errors import UserError
from appzoo.params.keys import key_of
from appzoo.params.serve import ServeConfig
from appzoo.env import configure_cpu, import_paddle_quietly
from appzoo.registry import load_components
from appzoo.serve.auth import ENV, load_keys
from appzoo.serve.server import serve
from appzoo.params.trainer import TrainerConfig


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m appzoo.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", metavar="[NAME=]PATH", help="a run's best/ folder")
    hints = typing.get_type_hints(ServeConfig, include_extras=True)
    for field in dataclasses.fields(ServeConfig):
        key = key_of(hints[field.name])
        kind = typing.get_args(typing.get_args(hints[field.name])[0]) or (typing.get_args(hints[field.name])[0],)
        if kind == (bool,):  # a switch: --trust-pickled-weights
            parser.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, action="store_const",
                                const=True, default=None, help=f"{key.help} (default: off)".replace("%", "%%"))
            continue
        listed = all(typing.get_origin(k) is list or k is type(None) for k in kind)  # --allowed-hosts a b
        kind = next((k for k in kind if k in (int, float, str)), str)
        parser.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, type=kind, default=None,
                            nargs="+" if listed else None, metavar=field.name.upper(),  # argparse formats help with %: "25%" would break --help
                            help=f"{key.help} (default: {field.default})".replace("%", "%%"))
    parser.add_argument("--api-key", dest="api_key", default=None, metavar="KEY",
                        help=f"a key every request but liveness and readiness must carry (Authorization: Bearer KEY); "
                             f"visible in the process list: prefer {ENV} or --api-key-file")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    settings = {k: v for k, v in vars(args).items() if k not in ("models", "api_key") and v is not None}
    try:
        return run(args.models, settings, api_key=args.api_key)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("error: interrupted (Ctrl-C) while starting; nothing was served", file=sys.stderr)
        return 130
    except _Terminated:
        print("error: stopped (SIGTERM) while starting; nothing was served", file=sys.stderr)
        return 128 + signal.SIGTERM


class _Terminated(Exception):
    """SIGTERM before the server took the signal over (serve's own handler drains)."""


def _terminated(signum, frame):
    raise _Terminated()


def run(model_specs, settings, key_path="models", api_key=None):
    """Check everything, set the CPU up, then serve until stopped; the exit code.
    A user error (a bad key, a port in use, a missing best/) raises :class:`UserError` before anything is served.
    ``api_key``: ``--api-key``'s, beside APPZOO_API_KEY and ``serve.api_key_file``
    (:func:`appzoo.serve.auth.load_keys`)."""
    config = ServeConfig.from_section(settings)
    api_keys = load_keys(api_key, config.api_key_file)
    threads = config.engine_threads(len(model_specs))
    configure_cpu(threads)  # before paddle loads: the dygraph engine's threads (no effect once loaded)
    # paddle's import puts a handler of its own on SIGTERM (a FatalError report, exit 143): a SIGTERM during the
    # import waits, blocked, for this process's own handler, which then says in one line that nothing was served
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        import_paddle_quietly()
        signal.signal(signal.SIGTERM, _terminated)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    from appzoo.serve.models import parse_models  # paddle: after import_paddle_quietly, and not for --help

    load_components()
    # the process exits once served: a SIGTERM repeated after the drain must not kill it with 143
    return serve(parse_models(model_specs, key_path), config, threads, keep_signal_handlers=True, api_keys=api_keys)


def run_param_file(config):
    """``run_trainer.py --param_path X --do serve``: serve the run's ``best/`` with the file's ``serve`` section."""
    output_dir = config.get("trainer", {}).get("output_dir", TrainerConfig.output_dir)
    name = os.path.basename(os.path.normpath(output_dir)) or "model"
    return run([f"{name}={RunFolder(output_dir).best}"], dict(config.get("serve", {})),
               key_path="trainer.output_dir")


if __name__ == "__main__":
    sys.exit(main())
