"""Plots with Chinese labels draw their characters (the CJK fallback font of appzoo.utils.fonts), with no glyph warning."""
import contextlib
import logging
import warnings

from appzoo.reports import report
from appzoo.sweep.plots import plot as sweep_plot


@contextlib.contextmanager
def glyph_messages(caplog):
    """Collects every warning and log record raised inside it that speaks of a missing glyph."""
    found = []
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.DEBUG):
        warnings.simplefilter("always")
        yield found
    found += [str(w.message) for w in caught if "glyph" in str(w.message).lower()]
    found += [r.getMessage() for r in caplog.records if "glyph" in r.getMessage().lower()]


def test_a_confusion_matrix_with_chinese_labels_has_no_missing_glyph(tmp_path, caplog):
    with glyph_messages(caplog) as missing:
        written = report._plots(str(tmp_path), {"test": {"confusion_matrix": [[5, 1], [2, 7]]}}, [],
                                ["体育", "财经"])
    assert written == ["confusion_test.png"]
    assert (tmp_path / "plots" / "confusion_test.png").stat().st_size > 0
    assert not missing, missing[:3]


def test_a_sweep_plot_with_chinese_setting_names_has_no_missing_glyph(tmp_path, caplog):
    runs = [{"metrics": {"macro_f1": v}} for v in (0.5, 0.6)]
    summary = {"primary_metric": "macro_f1", "param_path": "配置/分类.json",
               "settings": [{"setting": name, "verdict": "平", "runs": runs,
                             "metrics": {"macro_f1": {"mean": 0.55, "std": 0.07}}} for name in ("焦点损失", "交叉熵")]}
    with glyph_messages(caplog) as missing:
        sweep_plot(summary, str(tmp_path / "sweep.png"))
    assert (tmp_path / "sweep.png").stat().st_size > 0
    assert not missing, missing[:3]


def test_latin_text_keeps_the_default_font_and_chinese_falls_back_to_noto_cjk():
    from matplotlib import font_manager

    from appzoo.utils.fonts import cjk_family, pyplot

    plt = pyplot()
    family = plt.rcParams["font.family"]
    assert family[-1] == cjk_family() and family[0] != cjk_family()  # a fallback, not the first choice
    fonts = font_manager.fontManager._find_fonts_by_props(font_manager.FontProperties(family=family))
    assert "DejaVu" in fonts[0] and "NotoSansCJK" in fonts[-1]
    pyplot()  # calling it again does not stack the fallback twice
    assert plt.rcParams["font.family"].count(cjk_family()) == 1


def test_every_plot_gets_pyplot_through_appzoo_fonts():
    """A module importing matplotlib itself would draw Chinese labels as empty boxes again."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent
    sources = [p for folder in ("appzoo", "tasks", "benchmarks") for p in (root / folder).rglob("*.py")]
    sources.append(root / "run_trainer.py")
    direct = [str(p.relative_to(root)) for p in sources
              if "matplotlib" in p.read_text(encoding="utf-8") and p != root / "appzoo" / "utils" / "fonts.py"]
    assert not direct, f"plot through appzoo.utils.fonts.pyplot(), not matplotlib directly: {direct}"
