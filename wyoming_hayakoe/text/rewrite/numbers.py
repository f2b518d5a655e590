"""Numbers in words: integers in kanji, digit by digit, decimals, Roman numerals."""

from __future__ import annotations

import re

#: The kanji of the digits 0 to 9.
KANJI_DIGITS = "〇一二三四五六七八九"
_SMALL_UNITS = ((1000, "千"), (100, "百"), (10, "十"))
_LARGE_UNITS = ((10**12, "兆"), (10**8, "億"), (10**4, "万"))
#: Largest integer spelled as a number; longer digit strings are read digit by digit.
MAX_SPELLED = 10**16 - 1
#: Most digits of a number read as a number (Python refuses to convert
#: strings of more than 4,300 digits to int at all).
MAX_NUMBER_DIGITS = len(str(MAX_SPELLED))

#: Digit names for digit-by-digit reading (phone numbers, codes): lengthened
#: ニー and ゴー as in speech.
_DIGIT_NAMES = ("ゼロ", "イチ", "ニー", "サン", "ヨン", "ゴー", "ロク", "ナナ", "ハチ", "キュー")
#: Digits after a decimal point, one by one (三点一四 サンテンイチヨン; 〇 would be マル).
_DECIMAL_DIGITS = ("ゼロ", *KANJI_DIGITS[1:])


def _spell_below_10000(n: int) -> str:
    out = []
    for value, name in _SMALL_UNITS:
        digit, n = divmod(n, value)
        if digit:
            out.append(("" if digit == 1 else KANJI_DIGITS[digit]) + name)
    if n:
        out.append(KANJI_DIGITS[n])
    return "".join(out)


def spell_integer(n: int) -> str:
    """``0`` → ゼロ, ``23`` → 二十三, ``1500`` → 千五百, ``10000`` → 一万."""
    if n < 0:
        return "マイナス" + spell_integer(-n)
    if n == 0:
        return "ゼロ"
    if n > MAX_SPELLED:
        return spell_digits(str(n))
    out = []
    for value, name in _LARGE_UNITS:
        part, n = divmod(n, value)
        if part:
            out.append(_spell_below_10000(part) + name)
    if n:
        out.append(_spell_below_10000(n))
    return "".join(out)


def spell_digits(digits: str) -> str:
    """Digit by digit, as phone numbers are read: ``090`` → ゼロキューゼロ."""
    return "".join(_DIGIT_NAMES[int(d)] for d in digits if d.isdigit())


def spell_number(integer: str, fraction: str | None = None) -> str:
    """A written number (digits, optional thousands separators and fraction) in words.

    The fraction is written digit by digit in kanji (``二十三点五``,
    ``三点一四``), which OpenJTalk reads digit by digit and as one number with
    the rest (one accent phrase, see ``text.corrections``).  Integers with a
    leading zero (``007``) are read digit by digit.
    """
    integer = integer.replace(",", "")
    if len(integer) > 1 and integer.startswith("0") and not fraction:
        return spell_digits(integer)
    value = int(integer) if len(integer) <= MAX_NUMBER_DIGITS else None
    if value is None or value > MAX_SPELLED:
        words = spell_digits(integer)
    elif value == 0 and fraction:
        words = "零"  # 0.5 → 零点五 (れいてんご)
    else:
        words = spell_integer(value)
    if fraction:
        words += "点" + "".join(_DECIMAL_DIGITS[int(d)] for d in fraction)
    return words


# Roman numerals (Ⅻ, ⅲ) are numbers, not Latin letters.
_ROMAN_VALUES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 50, 100, 500, 1000)
_ROMAN_RE = re.compile("[\u2160-\u216f\u2170-\u217f]")


def _roman(m: re.Match[str]) -> str:
    return str(_ROMAN_VALUES[(ord(m.group(0)) - 0x2160) % 16]) + " "


def roman_to_arabic(text: str) -> str:
    """``Ⅻ`` → ``12 ``: Roman numeral characters become digits (and a blank)."""
    return _ROMAN_RE.sub(_roman, text)


def number_words(text: str) -> str:
    """Spell one written number (``1,234.5``)."""
    integer, _, fraction = text.partition(".")
    if len(fraction) > 1:
        fraction = fraction.rstrip("0")  # 12.50 → 十二点五, 1.00 → 一
    return spell_number(integer, fraction or None)


__all__ = [
    "KANJI_DIGITS",
    "MAX_NUMBER_DIGITS",
    "MAX_SPELLED",
    "number_words",
    "roman_to_arabic",
    "spell_digits",
    "spell_integer",
    "spell_number",
]
