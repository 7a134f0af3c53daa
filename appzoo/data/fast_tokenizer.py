"""paddlenlp's token ids, computed by a Rust twin of its tokenizer (HF
``tokenizers``) wherever the twin is checked to give the same ids, else by
paddlenlp itself.

The twin is built from the paddlenlp tokenizer's own vocabulary and settings,
with every character class taken from paddlenlp's definitions (its
``_is_control``, ``_is_whitespace``, ``_is_punctuation``, ``_is_symbol``
and Chinese-character ranges, over Python's Unicode tables), because HF's
own BertNormalizer and BertPreTokenizer differ from paddlenlp's in places
(symbols and emoji are split off by paddlenlp only, one CJK range differs).
Texts are cut as paddlenlp cuts them: its ``longest_first`` takes one token
at a time from the longer text of a pair, which leaves the extra token of an
odd budget to the first text, where HF's gives it to the longer one. Before a twin is used it must
give paddlenlp's ids on :data:`SPECIAL_CASES`; ``APPZOO_TOKENIZER=python``
turns it off.
"""
import functools
import itertools
import os
import re
import threading
import unicodedata
import warnings
import weakref

from appzoo.errors import UserError
from appzoo.utils.progress import note

ENV = "APPZOO_TOKENIZER"
CHOICES = ("rust", "python")  # rust: the twin where it exists and passes its check (the default)

#: texts on which a twin must give paddlenlp's ids before it is used: each
#: ``(what, texts, texts_b, max_seq_len, special_tokens)``
SPECIAL_CASES = [
    ("plain words", ["Hello world, this is a test.", "hello", "HELLO World"], None, None, True),
    ("accents", ["Café naïve résumé Ångström façade", "ÉCOLE Über straße İstanbul ΣΊΣΥΦΟΣ ὈΔΥΣΣΕΎΣ"],
     None, None, True),
    ("combining marks", ["e\u0301te\u0301 a\u0308\u0323b n\u0303o\u0327", "\u0301\u0302 alone"],
     None, None, True),
    ("Chinese", ["今天天气很好，我们去公园散步吧！", "北京大学生物系", "中文English混合mixed文本"],
     None, None, True),
    ("Japanese and Korean", ["東京は日本の首都です。カタカナ ひらがな", "한국어 텍스트입니다 안녕하세요"],
     None, None, True),
    ("CJK edge ranges", ["\u3400\u4dbf\U00020000\U0002a6df\U0002a700\U0002b81f\U0002b820\U0002b91f"
                         "\U0002b920\U0002ceaf\uf900\ufaff\U0002f800\U0002fa1f\u2f00\u3007"], None, None, True),
    ("fullwidth and compatibility forms", ["ＡＢＣ１２３（全角）ｶﾀｶﾅ ① Ⅻ ㍿ ﬁ ㎏"], None, None, True),
    ("control and zero-width characters",
     ["a\x00b\x01c\x7fd\x85e\u200bf\u200cg\u200dh\u2060i\ufeffj", "tab\there\nnew\rline\x0bvt\x0cff\x1cfs",
      "\ue000private\U000f0000use \ufffd\ufffd replacement", "unassigned\u0378\U000e0080 bidi\u202e\u2066x"],
     None, None, True),
    ("unusual spaces", ["a\u00a0b\u1680c\u2000d\u2003e\u2028f\u2029g\u202fh\u205fi\u3000j\u180ek"],
     None, None, True),
    ("emoji and symbols", ["I ❤️ NLP 😀👍🏽 👨‍👩‍👧 €5 $10 £3 ¥9 ©® ™ ±×÷ °C µm ¹²³ ºª",
                           "x^2+y~z`w|v<u>t=s"], None, None, True),
    ("punctuation runs", ["Wait...what?!?! --- ((nested)) [[x]] {{y}} \"quoted\" 'single' «guillemets» "
                          "¿qué? ¡sí! ——……、。「」『』【】", "!!!???...,,,;;;:::"], None, None, True),
    ("special tokens in the text", ["[CLS] a [SEP] b [PAD] c [MASK] d [UNK] e", "x[SEP]y [sep] [Cls]",
                                    "[SE\u200bP] [ MASK ]"], None, None, True),
    ("a word longer than max_input_chars_per_word",
     ["a" * 99 + " " + "b" * 100 + " " + "c" * 101 + " " + "d" * 250, "中" * 150, "é" * 101], None, None, True),
    ("words split into many pieces", ["antidisestablishmentarianism supercalifragilisticexpialidocious "
                                      "pneumonoultramicroscopicsilicovolcanoconiosis xqzjvkw qwertyuiopasdfgh"],
     None, None, True),
    ("texts empty after cleaning", ["", " ", "\x00\x01\u200b", "\t\n\r ", "\ufffd", "\ue000\U000e0001"], None,
     None, True),
    ("numbers", ["3.14159 1,000,000 2024-01-01 12:30pm 50% #1 @user v2.0.1 1e-5 0x1F"], None, None, True),
    ("word pieces alone", ["unaffable", "东京", "", "\u200b", "[SEP]", "Ünïcödé", "a" * 120, "don't", "😀"], None,
     None, False),
    ("truncation at a small max length", ["one two three four five six seven", "短", "", "a b c d e f"],
     None, 5, True),
    ("truncation at the special tokens' length", ["one two three", ""], None, 3, True),
    ("a max length the special tokens fill", ["one two three", ""], None, 2, True),
    ("truncation of word pieces alone", ["one two three four five six seven", "x"], None, 4, False),
    ("pairs", ["How old are you?", "今天天气", "", "Ünïcödé text"],
     ["What is your age?", "很好", "second only", ""], None, True),
    ("pairs over the limit, odd budget", ["a b c d e f g h", "a b", "a b c d e f g h", "a b c d", "a b c"],
     ["1 2 3 4 5 6 7 8 9 10", "1 2 3 4 5 6 7 8 9 10", "1 2", "1 2 3 4", "1 2 3 4 5 6"], 8, True),
    ("pairs over the limit, even budget", ["a b c d e f g h", "a b", "a b c d e f g h", "a b c d", "a b c"],
     ["1 2 3 4 5 6 7 8 9 10", "1 2 3 4 5 6 7 8 9 10", "1 2", "1 2 3 4", "1 2 3 4 5 6"], 9, True),
    ("pairs of word pieces alone, cut", ["a b c d e f", "a"], ["1 2 3", "1 2 3 4 5 6 7"], 5, False),
]

_SURROGATE = re.compile("[\ud800-\udfff]")
_CACHE = weakref.WeakKeyDictionary()  # paddlenlp tokenizer -> (twin or None, pairs checked)
_LOCK = threading.Lock()


def choice():
    """Which tokenizer ``APPZOO_TOKENIZER`` asks for: ``rust`` (the default) or ``python``."""
    value = os.environ.get(ENV, "").strip().lower() or "rust"
    if value not in CHOICES:
        raise UserError(f"environment variable {ENV}={os.environ[ENV]!r}: accepted: {', '.join(CHOICES)} "
                        f"(rust, the default, uses the Rust tokenizer where it gives paddlenlp's ids)")
    return value


def encode(tokenizer, texts, texts_b=None, *, max_seq_len=None, special_tokens=True, offsets=False):
    """``{"input_ids": [...], "token_type_ids": [...]}`` exactly as paddlenlp's
    ``tokenizer`` gives them (``longest_first`` truncation to ``max_seq_len``),
    by the Rust twin when there is one for it, else by paddlenlp.
    ``offsets`` adds each id's character span (by paddlenlp)."""
    if offsets:
        return paddle_encode(tokenizer, texts, texts_b, max_seq_len=max_seq_len, special_tokens=special_tokens,
                             offsets=True)
    fast, pairs_ok = _twin(tokenizer) if choice() == "rust" else (None, False)
    if fast is None or (texts_b is not None and not pairs_ok) or _has_surrogate(texts, texts_b):
        return paddle_encode(tokenizer, texts, texts_b, max_seq_len=max_seq_len, special_tokens=special_tokens)
    return _fast_encode(fast, tokenizer, texts, texts_b, max_seq_len, special_tokens)


def _has_surrogate(texts, texts_b):
    """Whether a text holds a lone surrogate (a JSON ``\\ud800``): paddlenlp
    drops it, and no Rust string can hold it."""
    return any(isinstance(t, str) and _SURROGATE.search(t)
               for t in itertools.chain(texts, texts_b if texts_b is not None else ()))


def paddle_encode(tokenizer, texts, texts_b=None, *, max_seq_len=None, special_tokens=True, offsets=False):
    """The ids of paddlenlp's own (Python) tokenizer: the reference."""
    cut = dict(max_length=max_seq_len, truncation=True) if max_seq_len else {}
    pair = {"text_pair": list(texts_b)} if texts_b is not None else {}
    extra = {"return_offsets_mapping": True} if offsets else {}
    encoded = tokenizer(list(texts), **pair, **cut, add_special_tokens=special_tokens,
                        return_overflowing_tokens=False, **extra)
    out = {"input_ids": encoded["input_ids"], "token_type_ids": encoded["token_type_ids"]}
    if offsets:
        out["offsets"] = [[tuple(span) for span in spans] for spans in encoded["offset_mapping"]]
    return out


def fast_tokenizer(tokenizer):
    """The Rust twin (a ``tokenizers.Tokenizer``) of a paddlenlp BertTokenizer or
    ErnieTokenizer, checked on :data:`SPECIAL_CASES`; None, with a note saying
    why, where it cannot be built or gives other ids than paddlenlp.
    Built and checked once per tokenizer object."""
    return _twin(tokenizer)[0]


def _twin(tokenizer):
    """``(twin or None, whether pairs give paddlenlp's ids)``, cached per tokenizer."""
    try:
        return _CACHE[tokenizer]
    except KeyError:
        pass
    except TypeError:  # an object that takes no weak reference: not a paddlenlp tokenizer
        return None, False
    with _LOCK:
        if tokenizer in _CACHE:
            return _CACHE[tokenizer]
        try:
            fast = build(tokenizer)
        except Unsupported as e:
            note(f"note: the Rust tokenizer is not used for {type(tokenizer).__name__} ({e}); "
                 f"paddlenlp's tokenizer is")
            result = (None, False)
        else:
            result = _check(tokenizer, fast)
        _CACHE[tokenizer] = result
        return result


class Unsupported(Exception):
    """A tokenizer whose twin cannot be built: why."""


def build(tokenizer):
    """The twin of ``tokenizer`` (unchecked); raises :class:`Unsupported`."""
    from paddlenlp.transformers import BertTokenizer, ErnieTokenizer

    if type(tokenizer) not in (BertTokenizer, ErnieTokenizer):
        raise Unsupported("only paddlenlp's BertTokenizer and ErnieTokenizer have one")
    try:
        import tokenizers
        from tokenizers import normalizers, pre_tokenizers, processors
        from tokenizers.models import WordPiece
    except ImportError as e:
        raise Unsupported(f"the tokenizers package cannot be imported: {e}") from None
    basic, pieces = getattr(tokenizer, "basic_tokenizer", None), tokenizer.wordpiece_tokenizer
    if basic is None or not getattr(tokenizer, "do_basic_tokenize", True):
        raise Unsupported("it splits no words before the word pieces (do_basic_tokenize=False)")
    if basic.never_split:
        raise Unsupported(f"its never_split words {sorted(basic.never_split)[:3]} are not split by paddlenlp")
    if bool(getattr(tokenizer, "do_lower_case", False)) != bool(basic.do_lower_case):
        raise Unsupported("its do_lower_case differs from its basic tokenizer's")
    if tokenizer.added_tokens_encoder:
        raise Unsupported("it has added tokens")
    vocab = dict(getattr(pieces.vocab, "token_to_idx", None) or {})
    if not vocab:
        raise Unsupported("its vocabulary cannot be read")
    no_split = list(tokenizer.unique_no_split_tokens)  # what paddlenlp cuts out of a text first
    missing = [t for t in [pieces.unk_token, tokenizer.cls_token, tokenizer.sep_token, *no_split]
               if t not in vocab]
    if missing:
        raise Unsupported(f"its vocabulary has no {missing[0]}")

    fast = tokenizers.Tokenizer(WordPiece(vocab, unk_token=pieces.unk_token,
                                          max_input_chars_per_word=pieces.max_input_chars_per_word))
    classes = _char_classes()
    steps = [normalizers.Replace(tokenizers.Regex(classes["removed"]), ""),
             normalizers.Replace(tokenizers.Regex(classes["space"]), " ")]
    if basic.do_lower_case:
        steps.append(normalizers.Lowercase())
    if basic.strip_accents or (basic.do_lower_case and basic.strip_accents is None):
        # characters whose decomposition HF's (older) Unicode tables do not have yet
        steps += [normalizers.Replace(c, d) for c, d in _nfd_fixes()]
        steps += [normalizers.NFD(), normalizers.Replace(tokenizers.Regex(classes["nonspacing_mark"]), "")]
    fast.normalizer = normalizers.Sequence(steps)
    split = classes["punctuation"]
    if basic.tokenize_chinese_chars:
        split = classes["punctuation_or_chinese"]
    fast.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                  pre_tokenizers.Split(tokenizers.Regex(split), "isolated")])
    cls, sep = tokenizer.cls_token, tokenizer.sep_token  # the twin alone gives paddlenlp's ids and offsets
    fast.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
    fast.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True) for t in no_split])
    return fast


@functools.lru_cache(maxsize=1)
def _char_classes():
    """Regex character classes of paddlenlp's character tests, over Python's
    Unicode tables: ``removed`` (``_clean_text`` drops it), ``space`` (a word
    separator), ``nonspacing_mark`` (accent stripping drops it after NFD),
    ``punctuation`` (``_is_punctuation`` or ``_is_symbol``: a word of its
    own) and ``punctuation_or_chinese`` (that, or a Chinese character)."""
    categories = [unicodedata.category(chr(cp)) for cp in range(0x110000)]
    cjk = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
           (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # BasicTokenizer._is_chinese_char
    symbols = (0x00AD, 0x00B2, 0x00BA, 0x3007, 0x00B5, 0x00D8, 0x014B, 0x01B1)  # paddlenlp's _is_symbol
    ascii_punctuation = [cp for cp in range(128) if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96
                         or 123 <= cp <= 126]

    removed = bytearray(c[0] == "C" for c in categories)  # _is_control, and \t \n \r are spaces
    for cp in (0x0, 0xFFFD, *range(0xD800, 0xE000)):  # surrogates: no Rust string holds one
        removed[cp] = 1
    for cp in (0x9, 0xA, 0xD):
        removed[cp] = 0
    # _is_whitespace, and what str.split() splits on (U+2028, U+2029)
    space = bytearray((c == "Zs" or chr(cp).isspace()) and not removed[cp] for cp, c in enumerate(categories))
    mark = bytearray(c == "Mn" for c in categories)
    punctuation = bytearray(c[0] in "PS" for c in categories)
    for cp in (*symbols, *ascii_punctuation):
        punctuation[cp] = 1
    chinese = bytearray(punctuation)
    for low, high in cjk:
        chinese[low:high + 1] = b"\x01" * (high - low + 1)
    for flags in (mark, punctuation, chinese):
        flags[0xD800:0xE000] = b"\x00" * 0x800
    return {name: _regex_class(flags) for name, flags in
            [("removed", removed), ("space", space), ("nonspacing_mark", mark), ("punctuation", punctuation),
             ("punctuation_or_chinese", chinese)]}


@functools.lru_cache(maxsize=1)
def _nfd_fixes():
    """``[(character, Python's NFD of it)]`` where HF's NFD differs from Python's."""
    from tokenizers.normalizers import NFD

    nfd = NFD()
    decomposed = (chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000
                  and not unicodedata.is_normalized("NFD", chr(cp)))
    return [(c, unicodedata.normalize("NFD", c)) for c in decomposed
            if nfd.normalize_str(c) != unicodedata.normalize("NFD", c)]


def _regex_class(flags):
    """An Oniguruma character class of the code points whose flag is set."""
    parts = []
    for run in re.finditer(b"\x01+", bytes(flags)):
        low, high = run.start(), run.end() - 1
        parts.append(f"\\x{{{low:X}}}" if low == high else f"\\x{{{low:X}}}-\\x{{{high:X}}}")
    return "[" + "".join(parts) + "]"


def _fast_encode(fast, tokenizer, texts, texts_b, max_seq_len, special_tokens):
    """paddlenlp's ids by the twin: the word pieces of each text, cut by
    :func:`truncate` as paddlenlp cuts them, then put together with its
    special tokens and type ids (``[CLS] a [SEP]``, ``[CLS] a [SEP] b [SEP]``)."""
    first = [e.ids for e in fast.encode_batch_fast(list(texts), add_special_tokens=False)]
    second = ([e.ids for e in fast.encode_batch_fast(list(texts_b), add_special_tokens=False)]
              if texts_b is not None else [None] * len(first))
    cls, sep = ([tokenizer.cls_token_id], [tokenizer.sep_token_id]) if special_tokens else ([], [])
    out = {"input_ids": [], "token_type_ids": []}
    for a, b in zip(first, second):
        if max_seq_len:
            added = (2 if b is None else 3) if special_tokens else 0
            a, b = truncate(a, b, len(a) + len(b or ()) + added - max_seq_len)
        head = cls + a + sep
        tail = b + sep if b is not None else []
        out["input_ids"].append(head + tail)
        out["token_type_ids"].append([0] * len(head) + [1 if special_tokens else 0] * len(tail))
    return out


def truncate(a, b, remove):
    """paddlenlp's ``longest_first`` truncation (right side) of ids ``a`` and
    ``b`` (None for a single text) by ``remove`` tokens: one token at a time
    from the longer, from ``b`` on a tie. A single text shorter than
    ``remove`` is left whole, as paddlenlp leaves it (with an error in its log)."""
    if remove <= 0:
        return a, b
    if b is None:
        return (a[:-remove], b) if len(a) > remove else (a, b)
    keep_a, keep_b = len(a), len(b)
    if keep_a > keep_b:  # down to b's length first
        step = min(remove, keep_a - keep_b)
        keep_a, remove = keep_a - step, remove - step
    else:
        step = min(remove, keep_b - keep_a)
        keep_b, remove = keep_b - step, remove - step
    # equal lengths now: b loses the first of the remaining tokens, then they alternate
    keep_b -= (remove + 1) // 2
    keep_a -= remove // 2
    return a[:max(keep_a, 0)], b[:max(keep_b, 0)]


def _check(tokenizer, fast):
    """``(fast, pairs_ok)`` when the twin gives paddlenlp's ids on every single-text
    case, ``(None, False)`` otherwise; a note names the first case that differs."""
    pairs_ok = True
    for what, texts, texts_b, max_seq_len, special_tokens in SPECIAL_CASES:
        with warnings.catch_warnings():  # paddlenlp warns that a cut pair returns no overflowing tokens
            warnings.simplefilter("ignore")
            want = paddle_encode(tokenizer, texts, texts_b, max_seq_len=max_seq_len,
                                 special_tokens=special_tokens)
        got = _fast_encode(fast, tokenizer, texts, texts_b, max_seq_len, special_tokens)
        if got == want:
            continue
        i = next(i for i in range(len(texts)) if got["input_ids"][i] != want["input_ids"][i]
                 or got["token_type_ids"][i] != want["token_type_ids"][i])
        shown = repr(texts[i]) if texts_b is None else f"({texts[i]!r}, {texts_b[i]!r})"
        if texts_b is None:
            note(f"note: the Rust tokenizer is not used for {type(tokenizer).__name__}: on {what}, "
                 f"{shown[:80]} gives {got['input_ids'][i][:12]} where paddlenlp gives "
                 f"{want['input_ids'][i][:12]}; paddlenlp's tokenizer is")
            return None, False
        if pairs_ok:
            note(f"note: pairs go through paddlenlp's tokenizer ({type(tokenizer).__name__}): on {what}, "
                 f"the Rust tokenizer gives {got['input_ids'][i][:12]} for {shown[:80]} where paddlenlp gives "
                 f"{want['input_ids'][i][:12]}")
        pairs_ok = False
    return fast, pairs_ok
