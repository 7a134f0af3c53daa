"""The shape of the code, read from the source (ast and text), so that it cannot drift:
no import cycle, a core that never imports the tasks, one home for a trained model's files,
and a docstring that says each module's job."""
import ast
import os

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
    assert len(graph) > 50 and "appzoo.store.bundle" in graph["appzoo.run.runner"]  # the graph is really read
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


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
    assert hits == [os.path.join("appzoo", "store", "bundle.py")]


def test_every_module_says_its_job_in_its_first_line():
    missing = []
    for name, path in modules().items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        doc = ast.get_docstring(tree)
        if not doc and os.path.getsize(path) > 200:  # an __init__ of re-exports may be bare
            missing.append(name)
    assert missing == []
