"""Plots with Chinese labels draw their characters (the CJK fallback font of appzoo.utils.fonts), with no glyph warning."""
import contextlib
import logging
import os
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


def test_the_training_curves_legend_is_below_the_axes_where_it_covers_no_point(tmp_path, monkeypatch):
    """Issue 42, item 22: inside the axes the legend covered a one-epoch run's only dev point (at the right)."""
    from appzoo.reports import report

    figures = []
    monkeypatch.setattr(report, "_save", lambda fig, path: figures.append(fig))
    history = [{"step": s, "loss": 1.0 / s} for s in range(1, 5)] + [{"step": 4, "dev_loss": 0.3, "dev_macro_f1": 0.5}]
    metrics = {"best": {"step": 4, "metric": "macro_f1", "value": 0.5}, "dev": {"macro_f1": 0.5}}
    report._plots(str(tmp_path), metrics, history, ["a", "b"])
    fig = figures[0]
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["train loss", "dev loss", "dev macro_f1"]
    assert legend.get_window_extent().y1 <= ax.get_window_extent().y0  # wholly below the plotting area
    assert all(other.get_legend() is None for other in fig.axes[1:])


def test_a_bar_into_a_file_is_a_plain_line_not_redraws(monkeypatch):
    """Issue 42, item 24: into a redirected log, a bar writes whole lines (no carriage returns), at its start, at
    most once per LOG_INTERVAL, and at its end."""
    import io

    from appzoo.utils import progress

    monkeypatch.setattr(progress, "ENABLED", True)  # a run earlier in this process may have turned bars off
    log = io.StringIO()
    for _ in progress.progress(range(1000), desc="steps", file=log):
        pass
    text = log.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) <= 3 and lines[-1].startswith("steps: 100%") and "1000/1000" in lines[-1]


def test_paddles_own_warnings_are_off_unless_the_environment_says(monkeypatch):
    from appzoo import env

    monkeypatch.delenv("GLOG_minloglevel", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))  # put back after the test
    env.configure_cpu()
    assert os.environ["GLOG_minloglevel"] == "2"
    monkeypatch.setenv("GLOG_minloglevel", "0")
    env.configure_cpu()
    assert os.environ["GLOG_minloglevel"] == "0"
