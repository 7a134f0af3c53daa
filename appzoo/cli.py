"""The command line, in one module: train, evaluate, predict and export from a param file, or serve, reproduce,
sweep and search (:data:`COMMANDS`); ``run_trainer.py`` and the ``appzoo`` script call :func:`main`.

    python run_trainer.py --param_path examples/cls_ernie_fc_with_focal.json
    python run_trainer.py --param_path examples/cls_ernie_fc_ch.json --set trainer.epochs=1
    python run_trainer.py --list
    python run_trainer.py --param_path examples/cls_ernie_fc_ch.json --sweep model.loss.name=ce,focal --seeds 3
    python run_trainer.py --param_path examples/cls_ernie_fc_ch.json --search 'trainer.learning_rate=log_uniform(1e-5,1e-3)' --trials 20
"""
import argparse
import dataclasses
import os
import shlex
import signal
import sys
from typing import Callable, Optional

from appzoo.env import configure_cpu, import_paddle_quietly
from appzoo.errors import ConfigError, UserError
from appzoo.params.trainer import MODES
from appzoo.registry import LOSSES, METRICS, MODELS, READERS, load_components
from appzoo.store.run_files import BY_KEY
from appzoo.utils.progress import note

# A command loads what it runs inside its function: paddle reads the CPU defaults (configure_cpu) as it loads,
# so nothing that loads paddle may be imported before main has set them.


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--param_path", help="param file (.json, .yaml or .yml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override a key (repeatable); VALUE is parsed as JSON when it parses, else a string")
    parser.add_argument("--do", help="comma-separated modes: train,eval,predict,export,audit "
                                     "(default: train, then eval on dev/test, then predict when a predict file is "
                                     "set); or serve alone: the run's best/ over HTTP (docs/serving.md); or reproduce alone: "
                                     "re-run the finished run in trainer.output_dir from its run_record.json into "
                                     "<output_dir>/reproduce/N/ and compare the metrics (docs/reports.md)")
    parser.add_argument("--list", action="store_true", help="print the registered models, readers, losses and metrics")
    parser.add_argument("--sweep", action="append", default=[], metavar="KEY.PATH=V1,V2",
                        help="one axis of a sweep (repeatable: the grid of all axes); V1,V2 split on commas, or a "
                             "JSON list; K1,K2=[[a1,a2],[b1,b2]] sets several keys together; runs go to <output_dir>/sweep/<setting>/seed-<seed>/ (see appzoo/sweep/)")
    parser.add_argument("--seeds", type=int, metavar="N",
                        help="run every sweep setting with trainer.seed + 0..N-1 (default 1)")
    parser.add_argument("--search", action="append", nargs="?", const="", metavar="KEY.PATH=RANGE",
                        help="search hyperparameters with Optuna (repeatable): RANGE is log_uniform(LOW,HIGH), "
                             "uniform(LOW,HIGH), int(LOW,HIGH) or choice(V1,V2,...); --search alone uses the "
                             "param file's search section; trials go to <output_dir>/search/ (see appzoo/search/)")
    parser.add_argument("--trials", type=int, metavar="N", help="--search: trials of the study (search.trials)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="--search: start no trial after this many seconds (search.timeout_s)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="where --search trials and --sweep runs run: this process (default), or Ray "
                             "tasks (pip install 'appzoo[ray]'; see appzoo/experiments/ray.py)")
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="--backend ray: join this Ray cluster (default: start one on this machine)")
    parser.add_argument("--cpus-per-trial", type=float, metavar="N",
                        help="--backend ray: CPUs (and paddle threads) of each trial or run (default 1)")
    parser.add_argument("--gpus-per-trial", type=float, metavar="N",
                        help="--backend ray: GPUs of each trial or run (default 0)")
    parser.add_argument("--resave", metavar="BEST",
                        help="write the weights of a best/ saved before appzoo wrote safetensors (a pickle, so only "
                             "a folder you trust) as model.safetensors, and remove the pickle")
    parser.add_argument("--describe", metavar="TARGET",
                        help="print the keys of trainer, dataset_reader, encoder, serve, search, model.NAME, reader.NAME or "
                             "loss.NAME: type, default, range and help (all: docs/params.md, as markdown)")
    args = parser.parse_args(argv)
    if not args.list and not args.describe and not args.resave and not args.param_path:
        parser.error("--param_path is required (or --list, --describe, --resave)")
    return args


def _import_libraries():
    """Load paddle and register the losses, metrics, readers and models.

    A Ctrl-C that lands while a C extension initialises comes out as another
    exception (paddle's ``ImportError: initialization failed``); a handler that
    notes the signal lets it be reported as the Ctrl-C it was."""
    pressed = []

    def on_sigint(signum, frame):
        pressed.append(signum)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: signals go elsewhere anyway
        previous = None
    try:
        import_paddle_quietly()
        load_components()
    except Exception:
        if pressed:
            raise KeyboardInterrupt from None
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def main(argv=None):
    """Run the command ``argv`` asks for (:data:`COMMANDS`); returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:  # appzoo serve PATH/best ...
        from appzoo.serve.__main__ import main as serve_main  # it sets the CPU defaults itself

        return serve_main(argv[1:])
    args = parse_args(argv)
    try:  # from here on: a Ctrl-C while the libraries load (seconds) is one line too
        configure_cpu()  # process-wide CPU defaults: set here, by the command line, before paddle loads
        _import_libraries()
        call = Call(args, argv)
        if not (args.list or args.describe or args.resave):
            from appzoo.params.param_file import apply_overrides, load_param_file  # after configure_cpu, as all

            config = load_param_file(args.param_path)
            apply_overrides(config, args.set)
            _the_run_beside(args.param_path, config, args.set)
            call = Call(args, argv, config, parse_do(args.do))
        return chosen(call).run(call)
    except UserError as e:
        print(error_line(e, args.param_path, args.set), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:  # before the run's own handlers were installed
        print("error: interrupted (Ctrl-C); nothing was written", file=sys.stderr)
        return 130


@dataclasses.dataclass(frozen=True)
class Call:
    """What one invocation gives a command: the parsed arguments as typed, and the param file read (with its
    ``--set`` overrides) and ``--do`` parsed, for the commands that take one."""

    args: argparse.Namespace
    argv: list
    config: Optional[dict] = None
    do: Optional[list] = None

    @property
    def command_line(self):
        """How the results of a sweep or search say they were made."""
        return shlex.join(["python", "run_trainer.py", *self.argv])


@dataclasses.dataclass(frozen=True)
class Command:
    """One thing the command line does: ``given(call)`` says the arguments ask for it, ``run(call)`` does it and
    returns the exit code."""

    name: str
    given: Callable[[Call], bool]
    run: Callable[[Call], int]


def _the_run_beside(param_path, config, overrides):
    """A run folder's own config.json names the folder the run was made in; a copy (cp -a) or a moved folder is
    acted on where it is, not where its config.json points (with a note), unless --set names the folder."""
    from appzoo.store.archive import RunFolder  # after configure_cpu (see the imports)

    folder = os.path.dirname(os.path.abspath(param_path))
    named = config.get("trainer", {}).get("output_dir") if isinstance(config.get("trainer"), dict) else None
    named_by_set = any(item.partition("=")[0].strip() == "trainer.output_dir" for item in overrides)
    if (os.path.basename(param_path) != BY_KEY["config"].name or not isinstance(named, str) or named_by_set
            or not RunFolder(folder).is_a_run() or os.path.realpath(named) == os.path.realpath(folder)):
        return
    note(f"note: {param_path} is the config.json of the run in {folder}, made in {named}: acting on {folder} "
         f"(--set trainer.output_dir=... to name another folder)")
    config["trainer"]["output_dir"] = folder


def _list(call):
    for title, registry in (("models", MODELS), ("readers", READERS), ("losses", LOSSES), ("metrics", METRICS)):
        print(f"{title}: {', '.join(registry.names())}")
    return 0


def _describe(call):
    from appzoo.run.describe import describe, markdown  # after configure_cpu (see the imports)

    print(markdown() if call.args.describe == "all" else describe(call.args.describe), end="")
    return 0


def _resave(call):
    from appzoo.store.bundle import resave  # after configure_cpu (see the imports)

    print(f"wrote {resave(call.args.resave)}; the pickle is removed")
    return 0


def _alone(call, mode):
    """``--do serve`` and ``--do reproduce`` act on a finished run: a sweep's or search's flags have no room."""
    given = [flag for flag, value in (("--sweep", call.args.sweep), ("--seeds", call.args.seeds),
                                      ("--search", call.args.search)) if value not in (None, [])]
    if given:
        raise UserError(f"--do {mode} runs alone ({ALONE[mode]}); {given[0]} has no place in it: leave it out")


def _serve(call):
    _alone(call, "serve")
    from appzoo.serve.__main__ import run_param_file  # after configure_cpu (see the imports)

    return run_param_file(call.config)


def _reproduce(call):
    _alone(call, "reproduce")
    from appzoo.run.reproduce import reproduce  # after configure_cpu (see the imports)

    return reproduce(call.config, call.args.param_path, call.argv, call.args.set)


def _search(call):
    from appzoo.search.study import run_search  # after configure_cpu (see the imports)

    search = plan_search_of(call.args, call.config, call.do, call.command_line)
    run_search(search, backend=_backend(call.args))
    print(f"search results in {search.root}/search.md")
    return 0


def _sweep(call):
    from appzoo.sweep.runs import plan_sweep, run_sweep  # after configure_cpu (see the imports)

    args = call.args
    _no_search_flags(args)
    sweep = plan_sweep(call.config, args.param_path, args.sweep, 1 if args.seeds is None else args.seeds,
                       do=call.do, command=call.command_line)
    run_sweep(sweep, backend=_backend(args))
    print(f"sweep results in {sweep.root}/sweep.md")
    return 0


def _run(call):
    """The param file's modes, once (``--do`` or ``trainer.do``); prints each split's metrics."""
    from appzoo.run.plan import validate  # after configure_cpu (see the imports)
    from appzoo.run.runner import run  # after configure_cpu
    from appzoo.store.run_result import RunResult  # after configure_cpu

    _no_search_flags(call.args)
    plan = validate(call.config, call.args.param_path, do=call.do)
    plan.command = {"argv": list(call.argv), "overrides": list(call.args.set)}  # for run_record.json and the card
    result = run(plan)
    for split, split_metrics in RunResult.from_json(result).splits().items():
        scalars = {k: round(v, 4) for k, v in split_metrics.items() if isinstance(v, float)}
        print(f"{split}: {scalars}")
    print(f"outputs in {plan.trainer.output_dir}")
    return 0


def _no_search_flags(args):
    if args.trials is not None or args.timeout is not None:
        raise UserError("--trials and --timeout belong to --search")


#: The commands, in the order they are asked for: the first one the arguments give runs (a run of the param
#: file's modes when none of the others is given).
COMMANDS = (
    Command("list", lambda call: call.args.list, _list),
    Command("describe", lambda call: bool(call.args.describe), _describe),
    Command("resave", lambda call: bool(call.args.resave), _resave),
    Command("serve", lambda call: call.do == ["serve"], _serve),
    Command("reproduce", lambda call: call.do == ["reproduce"], _reproduce),
    Command("search", lambda call: call.args.search is not None, _search),
    Command("sweep", lambda call: bool(call.args.sweep) or call.args.seeds is not None, _sweep),
    Command("run", lambda call: True, _run),
)


def chosen(call):
    """The command ``call`` asks for (:data:`COMMANDS`)."""
    return next(command for command in COMMANDS if command.given(call))


def plan_search_of(args, config, do, command=None):
    """The search that ``--search`` (with ``--trials``, ``--timeout``) asks of ``config``, planned: its ranges,
    its study folder (nothing written; tests/bad_input_harness.py plans a case's search with it)."""
    if args.sweep or args.seeds is not None:
        raise UserError("--search and --sweep are two ways to choose settings; give one of them")
    from appzoo.search.study import plan_search  # after configure_cpu (see the imports)

    return plan_search(config, args.param_path, [s for s in args.search if s], trials=args.trials,
                       timeout=args.timeout, do=do, command=command)


def _backend(args):
    """Where the trials or runs run: this process, or the Ray backend of ``--backend ray`` (checked, not yet
    connected)."""
    from appzoo.experiments.backends import LOCAL  # after configure_cpu (see the imports)
    from appzoo.experiments.ray import Ray  # after configure_cpu

    if args.backend == "local":
        given = [flag for flag, value in (("--address", args.address), ("--cpus-per-trial", args.cpus_per_trial),
                                          ("--gpus-per-trial", args.gpus_per_trial)) if value is not None]
        if given:
            raise UserError(f"{given[0]} belongs to --backend ray (trials and runs as Ray tasks); add "
                            f"--backend ray, or leave it out")
        return LOCAL
    cpus, gpus = args.cpus_per_trial, args.gpus_per_trial
    return Ray(address=args.address, cpus=1 if cpus is None else cpus, gpus=0 if gpus is None else gpus)


#: the modes that run alone, with why: they act on a finished run, not on a param file's modes
ALONE = {"serve": "it answers requests until stopped",
         "reproduce": "it re-runs the finished run in trainer.output_dir into a new folder"}


def parse_do(text):
    """The modes of ``--do`` (None when not given: trainer.do decides); UserError for an unknown or no mode."""
    if text is None:
        return None
    do = [m.strip() for m in text.split(",") if m.strip()]
    for alone, why in ALONE.items():
        if alone in do and len(do) > 1:
            raise UserError(f"--do {text!r}: {alone} runs alone ({why}); run the other modes first, then "
                            f"--do {alone}")
        if do == [alone]:
            return do
    bad = [m for m in do if m not in MODES]
    if bad:
        raise UserError(f"--do {text!r}: unknown mode {bad[0]!r} (accepted: {', '.join(MODES)})")
    if not do:  # else an empty list would mean "the default modes"
        raise UserError(f"--do {text!r}: no mode given (accepted: {', '.join(MODES)}, comma-separated)")
    return do


def error_line(error, param_path, overrides=()):
    """The one line printed for a :class:`UserError`: ``error: ...``, a key path prefixed with where its value
    came from: ``--set`` when one of ``overrides`` gave it (``error: --set trainer.epochs: must be >= 1, got 0``),
    else the param file."""
    message = str(error)
    key_path = message.split(":", 1)[0].split("[", 1)[0]
    given = [item for item in overrides if item.partition("=")[0].strip() in _enclosing(key_path)]
    if isinstance(error, ConfigError) and given and not message.startswith("--set"):
        message = f"--set {message}"  # the command line's value (--set KEY.PATH=...), not the param file's
    elif isinstance(error, ConfigError) and param_path and not message.startswith((param_path, "--set")):
        message = f"{param_path}: {message}"  # a key path: say which param file it is in
    return f"error: {message}"


def _enclosing(key_path):
    """``a.b.c`` -> ``{a.b.c, a.b, a}``: the keys a --set of which gives ``key_path`` its value."""
    parts = key_path.split(".")
    return {".".join(parts[:n]) for n in range(1, len(parts) + 1)}


def exit_with(code):
    """Exit with ``code``. A data-parallel worker skips the interpreter's teardown: its files are written
    and closed by now, and tearing down paddle's gloo and TCP store at exit can abort the process (SIGABRT
    after "outputs in ...", seen in CI), which the launcher then reports as a failed run."""
    if int(os.environ.get("PADDLE_TRAINERS_NUM", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)

