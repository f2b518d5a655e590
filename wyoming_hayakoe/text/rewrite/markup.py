"""Markdown, code, URLs, e-mail addresses, emoji and symbols: removed or read sensibly."""

from __future__ import annotations

import re

from .numbers import spell_integer

_URL_RE = re.compile(r"(?:https?://|ftp://|www\.)[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*[A-Za-z0-9\-_~/#=%&]", re.IGNORECASE)
_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_FENCE_RE = re.compile(r"^[ \t]*(```|~~~)[^\n]*$", re.MULTILINE)
_INLINE_CODE_RE = re.compile(r"`+([^`\n]*)`+")
_IMAGE_RE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_LINK_RE = re.compile(r"\[([^\]\n]+)\]\([^)\n]*\)")
_REF_LINK_RE = re.compile(r"\[([^\]\n]+)\]\[[^\]\n]*\]")
_FOOTNOTE_RE = re.compile(r"\[\^[^\]\n]*\]")
_HTML_BREAK_RE = re.compile(r"<br\s*/?>", re.IGNORECASE)
_HTML_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>\n]*)?/?>")
_HEADING_RE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.*?)[ \t#]*$", re.MULTILINE)
_QUOTE_RE = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE)
_RULE_RE = re.compile(r"^[ \t]*(?:[-*_=][ \t]*){3,}$", re.MULTILINE)
_TABLE_SEPARATOR_RE = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$", re.MULTILINE)
_BULLET_RE = re.compile(r"^[ \t]*(?:[-*+•・●○◦▪■□◆◇▶►➤✓✔☐☑✅]|\[[ xX]\])[ \t]+(?:\[[ xX]\][ \t]+)?", re.MULTILINE)
_NUMBERED_RE = re.compile(r"^[ \t]*(\d{1,3})[.)][ \t]+", re.MULTILINE)
_EMPHASIS_RES = (
    re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*"),
    re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"),
    re.compile(r"__(?=\S)(.+?)(?<=\S)__"),
    re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"),
    re.compile(r"(?<![*A-Za-z0-9])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*A-Za-z0-9])"),
    re.compile(r"(?<![_A-Za-z0-9])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![_A-Za-z0-9])"),
)
_STRAY_MARKERS_RE = re.compile(r"\*+|(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])|`+")

# Emoji and pictographs (with their joiners and modifiers).
_EMOJI_RE = re.compile(
    "["
    "\U0001f000-\U0001faff"  # pictographs, emoticons, transport, flags, symbols
    "\u2600-\u27bf"  # miscellaneous symbols and dingbats (☀ ☔ ✅ ❤ …)
    "\u2b00-\u2bff"  # arrows and stars (⭐ ⬆)
    "\u2300-\u23ff"  # technical (⌚ ⏰ ⏱ ⏳)
    "\u2190-\u21ff"  # arrows
    "\u25a0-\u25ff"  # geometric shapes (■ ● ▶)
    "\u2700-\u27bf"
    "\u3030\u303d\u3297\u3299"
    "\ufe0e\ufe0f\u200d\u20e3"  # variation selectors, zero-width joiner, keycap
    "\U000e0020-\U000e007f"  # tags
    "\u2122\u00a9\u00ae"  # ™ © ®
    "]+"
)
_KEYCAP_RE = re.compile(r"(\d)\ufe0f?\u20e3[ \t]*")
_ARROWS_RE = re.compile(r"\s*[→⇒➡⟶⟹]\s*")
_DASH_RUN_RE = re.compile(r"(?<![-=_~])[-=_~]{4,}(?![-=_~])")
# The dot of an entity id (light.living_room) is not a full stop.
_ENTITY_DOT_RE = re.compile(r"(?<=[a-z_])\.(?=[a-z_])")


def drop_fenced_code(text: str, inside: bool = False) -> tuple[str, bool]:
    """``text`` without its fenced code blocks, and whether a fence is still open at its end.

    An unclosed fence drops the rest of the text; ``inside`` says one was
    opened before ``text`` (in an earlier sentence of a stream).
    """
    out: list[str] = []
    for line in text.split("\n"):
        if _FENCE_RE.match(line):
            inside = not inside
            continue
        if not inside:
            out.append(line)
    return "\n".join(out), inside


def _inline_code(m: re.Match[str]) -> str:
    # Identifiers such as light.living_room: read the words.
    content = m.group(1).strip()
    return re.sub(r"[._/]+", " ", content) if re.fullmatch(r"[\w.]+", content) else content


def strip_markdown(text: str) -> str:
    """Remove markdown markup, keeping the words it decorates."""
    text = _HTML_BREAK_RE.sub("\n", text)
    text = _HTML_TAG_RE.sub("", text)
    text, _ = drop_fenced_code(text)
    text = _INLINE_CODE_RE.sub(_inline_code, text)
    text = _IMAGE_RE.sub(r"\1", text)
    text = _LINK_RE.sub(r"\1", text)
    text = _REF_LINK_RE.sub(r"\1", text)
    text = _FOOTNOTE_RE.sub("", text)
    text = _RULE_RE.sub("", text)
    text = _TABLE_SEPARATOR_RE.sub("", text)
    text = _HEADING_RE.sub(lambda m: m.group(1) + ("" if m.group(1)[-1:] in "。！？!?:：" else "。"), text)
    text = _QUOTE_RE.sub("", text)
    text = _BULLET_RE.sub("", text)
    text = _NUMBERED_RE.sub(lambda m: spell_integer(int(m.group(1))) + "、", text)
    # Table rows: | a | b | → a、b
    text = re.sub(
        r"^[ \t]*\|(.*)\|[ \t]*$",
        lambda m: "、".join(c.strip() for c in m.group(1).split("|") if c.strip()),
        text,
        flags=re.MULTILINE,
    )
    for pattern in _EMPHASIS_RES:
        text = pattern.sub(r"\1", text)
    return text


def strip_markup(text: str) -> str:
    """Rules, URLs, e-mail addresses, markdown, entity-id dots, emoji and stray markers, in that order."""
    text = _DASH_RUN_RE.sub(" ", text)
    text = _URL_RE.sub("リンク", text)
    text = _EMAIL_RE.sub("メールアドレス", text)
    text = strip_markdown(text)
    text = _ENTITY_DOT_RE.sub(" ", text)
    text = _strip_emoji(text)
    return _STRAY_MARKERS_RE.sub(" ", text)


def _strip_emoji(text: str) -> str:
    # Keycap digits (1️⃣) number a list: 1、
    text = _KEYCAP_RE.sub(lambda m: "、" + m.group(1) + "、", text)
    text = _ARROWS_RE.sub("、", text)
    return _EMOJI_RE.sub(lambda m: " ", text)


_SYMBOL_WORDS = (
    (re.compile(r"[ \t]*[&＆][ \t]*"), "アンド"),
    (re.compile(r"(?<=\S)[ \t]*[+＋][ \t]*(?=\S)"), "プラス"),
    (re.compile(r"[ \t]*[=＝][ \t]*"), "、"),
    (re.compile(r"[ \t]*[:：;；][ \t]*"), "、"),
    (re.compile(r"[ \t]*[|｜][ \t]*"), "、"),
    (re.compile(r"[ \t]*[/／][ \t]*"), "、"),
)
_DROP_RE = re.compile(r"[#＃@＠\\^{}<>＜＞*_`※]+")
_REPEATS = (
    (re.compile(r"[!！]{2,}"), "！"),
    (re.compile(r"[?？]{2,}"), "？"),
    (re.compile(r"(?:[!！][?？]|[?？][!！])[!！?？]+"), "！？"),
    (re.compile(r"(?:[.．。]{3,}|…{2,}|‥{2,}|・{3,})"), "…"),
    (re.compile(r"[、,，]{2,}"), "、"),
    (re.compile(r"[。]{2,}"), "。"),
    (re.compile(r"[ー〜~～\-―─━]{3,}"), "ー"),
)
_SPACES_RE = re.compile(r"[ \t\u3000]{2,}")


def sub_symbols(text: str) -> str:
    """Symbols said as words (``&`` アンド) or pauses, the rest dropped; runs of punctuation collapsed."""
    for pattern, replacement in _SYMBOL_WORDS:
        text = pattern.sub(replacement, text)
    text = _DROP_RE.sub(" ", text)
    for pattern, replacement in _REPEATS:
        text = pattern.sub(replacement, text)
    text = re.sub(r"(?:[ \t]*、){2,}", "、", text)
    text = re.sub(r"^[ \t]*、+", "", text, flags=re.MULTILINE)
    text = _SPACES_RE.sub(" ", text)
    return text


__all__ = ["drop_fenced_code", "strip_markdown", "strip_markup", "sub_symbols"]
