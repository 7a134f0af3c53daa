"""The one way plotting code gets ``pyplot``: files only, with a CJK font behind the default font.

Chinese labels (a confusion matrix of 体育/财经, a sweep of Chinese setting
names) would otherwise render as empty boxes, with a "Glyph missing"
warning per character. The CJK font ships through pip (the package
``noto-cjk-sans-otc``: Noto Sans CJK, SIL Open Font License 1.1), so a fresh
install needs nothing else. It is registered with matplotlib's font manager
and appended to ``font.family``: matplotlib (>= 3.6) looks each glyph up
along that list, so Latin text keeps the default font and only characters
it lacks come from Noto Sans CJK.
"""
import functools


@functools.cache
def cjk_family():
    """Register the bundled Noto Sans CJK font with matplotlib; returns its family name.

    The file is a collection (``.ttc``); matplotlib reads its first face,
    Noto Sans CJK JP, which has every simplified and traditional Chinese
    character (a few of them in their Japanese forms)."""
    from matplotlib import font_manager
    from noto_cjk_sans_otc import FONT_PATH

    path = str(FONT_PATH)
    font_manager.fontManager.addfont(path)
    return font_manager.FontProperties(fname=path).get_name()


def pyplot():
    """``matplotlib.pyplot`` on the file-only Agg backend (no display on
    servers), with the CJK font as the last fallback of ``font.family``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    family = cjk_family()
    current = matplotlib.rcParams["font.family"]
    if family not in current:
        matplotlib.rcParams["font.family"] = [*current, family]
    return plt
