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


def test_the_engines_read_the_table_too():
    """A spec no section checked meets the table's refusal in the engine; a graph engine needs its folder, and
    the Predictor exports first exactly for the engines the table says run a graph."""
    import dataclasses

    from appzoo.inference import engines
    from appzoo.params.inference import InferenceSpec

    assert list(engines.BY_NAME) == list(ENGINES)
    assert [name for name, c in CAPABILITIES.items() if c.graph is None] == ["dygraph"]
    unchecked = dataclasses.replace(InferenceSpec(), precision="int8")  # no .check(): the engine still refuses
    with pytest.raises(ConfigError, match=r"^engine 'dygraph': 'int8' needs a graph engine"):
        engines.create(unchecked, model=None)
    with pytest.raises(ValueError, match="runs an exported graph"):
        engines.create(InferenceSpec("onnxruntime"), model=None)


# ------------------------------------------------------- one inference key is one edit
def test_every_spec_field_is_a_trainer_key_a_serve_key_and_a_predictor_keyword():
    """The sections and the Predictor take their inference keys from InferenceSpec's fields (embed_spec,
    spec_keys): a field added there is a key of both sections and a Predictor keyword with no edit elsewhere."""
    import dataclasses
    import inspect

    from appzoo.inference import predictor
    from appzoo.params import serve, trainer
    from appzoo.params.inference import InferenceSpec

    fields = [f.name for f in dataclasses.fields(InferenceSpec)]
    for section, keys in ((trainer.TrainerConfig, trainer.INFERENCE_KEYS), (serve.ServeConfig, serve.INFERENCE_KEYS)):
        names = {f.name for f in dataclasses.fields(section)}
        assert list(keys) == fields and set(keys.values()) <= names, section.__name__
        built = section(**{keys["calibration_examples"]: 7, keys["sensitivity_examples"]: 9})
        assert (built.inference() if callable(built.inference) else built.inference).calibration_examples == 7
    assert list(predictor.KEYWORDS) == fields
    assert inspect.signature(predictor.Predictor).parameters["keys"].kind == inspect.Parameter.VAR_KEYWORD


def test_a_new_spec_field_comes_to_a_section_by_the_sections_rule():
    """What embed_spec gives a section for a field it does not declare: the spec's type, help and default,
    under the section's rule (trainer: inference_<field>)."""
    import dataclasses

    from appzoo.params.inference import InferenceSpec, embed_spec, spec_keys
    from appzoo.params.keys import check_fields

    keys = spec_keys({"threads": "num_threads"}, prefix="inference_")
    assert keys["engine"] == "inference_engine" and keys["threads"] == "num_threads"

    @dataclasses.dataclass
    @embed_spec(keys)
    class Toy:
        own: int = 1
        num_threads: int = 4  # declared by the section itself: kept as it is

    toy_fields = {f.name: f for f in dataclasses.fields(Toy)}
    assert list(toy_fields)[:2] == ["own", "num_threads"] and toy_fields["num_threads"].default == 4
    for field in dataclasses.fields(InferenceSpec):
        if field.name != "threads":
            assert toy_fields[keys[field.name]].type is field.type
            assert toy_fields[keys[field.name]].default == field.default
    with pytest.raises(ConfigError, match=r"^toy\.inference_calibration_examples: "):
        check_fields(Toy(inference_calibration_examples=0), "toy")


def test_the_predictor_refuses_an_unknown_keyword_and_a_spec_with_keywords():
    from appzoo.inference.predictor import _spec
    from appzoo.params.inference import InferenceSpec

    assert _spec(None, "onnxruntime", {"num_threads": 2}) == InferenceSpec("onnxruntime", threads=2)
    with pytest.raises(TypeError, match=r"unknown keyword 'threads'"):
        _spec(None, None, {"threads": 2})
    with pytest.raises(TypeError, match=r"give spec or its keywords \(precision\), not both"):
        _spec(InferenceSpec(), None, {"precision": "fp32"})
    with pytest.raises(ConfigError, match=r"^precision: 'fp16' is not a precision"):
        _spec(None, None, {"precision": "fp16"})
    with pytest.raises(ConfigError, match=r"^sensitivity_examples: must be >= 1, got 0$"):  # every field, by its Key
        _spec(None, None, {"sensitivity_examples": 0})
