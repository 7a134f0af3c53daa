"""appzoo/params/inference.py's CAPABILITIES: what each engine needs and runs, the one table the plan-time
checks read (the engines' classes are appzoo/inference/engines.py's BY_NAME, in the same order)."""
import pytest

from appzoo.errors import ConfigError
from appzoo.params.inference import CAPABILITIES, ENGINES, PRECISIONS, check_precision


def test_every_engine_runs_fp32_and_says_why_for_each_precision_it_does_not_run():
    assert ENGINES == tuple(CAPABILITIES)
    for name, capabilities in CAPABILITIES.items():
        assert "fp32" in capabilities.precisions and set(capabilities.precisions) <= set(PRECISIONS), name
        assert set(capabilities.refusals) == set(PRECISIONS) - set(capabilities.precisions), name


@pytest.mark.parametrize("engine, precision", [(e, p) for e, c in CAPABILITIES.items() for p in c.refusals])
def test_the_check_refuses_what_the_table_refuses_with_its_reason(engine, precision):
    with pytest.raises(ConfigError) as e:
        check_precision(engine, precision, "serve.precision", flags=frozenset({"avx512_bf16"}))
    assert str(e.value) == f"serve.precision: {precision!r} {CAPABILITIES[engine].refusals[precision]}"


def test_what_the_table_runs_passes_the_check_on_a_cpu_that_has_the_kernels():
    for engine, capabilities in CAPABILITIES.items():
        for precision in capabilities.precisions:
            check_precision(engine, precision, flags=frozenset({"avx512_bf16"}))
