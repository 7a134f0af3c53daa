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
import logging


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


#: the family name of the page's own CJK font (:func:`cjk_webfont`), listed in the pages' CSS
WEBFONT = "appzoo CJK"


def cjk_webfont(text):
    """A ``<script>`` for a page's ``<head>`` that adds the font :data:`WEBFONT`: the glyphs of the CJK characters
    in ``text`` (U+2E80 and up: radicals, punctuation, ideographs, fullwidth forms), cut from the bundled Noto
    Sans CJK SC by fontTools' subsetter and inlined as WOFF, so the page shows its Chinese on a machine with no
    CJK font (a server, a container); "" when ``text`` has none. Measured: 269 characters, 43 KB, under a second.

    A script, not a CSS ``@font-face``: a ``FontFace`` made from the bytes is ready before the body is laid out,
    where Chromium drew some of a CSS web font's characters with a system font that lacks them (empty boxes in
    the first confusion matrix, seen in a screenshot) while the font was still loading."""
    import base64
    import io

    from fontTools import subset
    from fontTools.ttLib import TTFont
    from noto_cjk_sans_otc import FONT_PATH

    chars = "".join(sorted({c for c in text if ord(c) >= 0x2E80}))
    if not chars:
        return ""
    logging.getLogger("fontTools").setLevel(logging.WARNING)  # it logs each table it prunes at INFO
    font = TTFont(str(FONT_PATH), fontNumber=_SC_FACE, lazy=True)
    options = subset.Options()
    options.flavor, options.layout_features, options.name_IDs, options.hinting = "woff", [], [1, 2], False
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=chars)
    subsetter.subset(font)
    buffer = io.BytesIO()
    font.flavor = "woff"
    font.save(buffer)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    covered = ",".join(f"U+{ord(c):X}" for c in chars)
    return ('<script>(function(){var b=atob("' + data + '"),a=new Uint8Array(b.length);'
            'for(var i=0;i<b.length;i++)a[i]=b.charCodeAt(i);'
            f'document.fonts.add(new FontFace("{WEBFONT}",a.buffer,{{unicodeRange:"{covered}"}}));}}());</script>')


_SC_FACE = 2  # the collection's faces: JP, KR, SC, TC, HK, then the Mono ones; Simplified Chinese forms


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
