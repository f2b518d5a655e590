"""Numbers with what they count: units, currencies, signs, ranges, phone numbers, counters."""

from __future__ import annotations

import re

from ..state import STATE
from .numbers import KANJI_DIGITS, MAX_NUMBER_DIGITS, number_words, spell_digits, spell_integer, spell_number
from .times import MINUTE_WORDS, spell_minutes

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"
_ORDINALS_EN = {1: "ファースト", 2: "セカンド", 3: "サード"}

UNITS: dict[str, tuple[str, str]] = {
    "°C": ("", "度"), "°F": ("華氏", "度"), "°": ("", "度"), "度C": ("", "度"), "度F": ("華氏", "度"),
    "%": ("", "パーセント"), "%RH": ("", "パーセント"), "‰": ("", "パーミル"), "pt": ("", "ポイント"),
    "km/h": ("時速", "キロ"), "kph": ("時速", "キロ"), "mph": ("時速", "マイル"), "m/s": ("秒速", "メートル"),
    "mm/h": ("毎時", "ミリ"), "mm/hr": ("毎時", "ミリ"), "in/h": ("毎時", "インチ"), "m3/h": ("毎時", "立方メートル"),
    "L/min": ("毎分", "リットル"), "l/min": ("毎分", "リットル"), "MB/s": ("毎秒", "メガバイト"),
    "kWh": ("", "キロワットアワー"), "Wh": ("", "ワットアワー"), "MWh": ("", "メガワットアワー"),
    "kW": ("", "キロワット"), "MW": ("", "メガワット"), "mW": ("", "ミリワット"), "W": ("", "ワット"),
    "kVA": ("", "キロボルトアンペア"), "VA": ("", "ボルトアンペア"),
    "kV": ("", "キロボルト"), "mV": ("", "ミリボルト"), "V": ("", "ボルト"),
    "mAh": ("", "ミリアンペアアワー"), "Ah": ("", "アンペアアワー"), "mA": ("", "ミリアンペア"), "A": ("", "アンペア"),
    "GHz": ("", "ギガヘルツ"), "MHz": ("", "メガヘルツ"), "kHz": ("", "キロヘルツ"), "Hz": ("", "ヘルツ"),
    "mm": ("", "ミリ"), "cm": ("", "センチ"), "km": ("", "キロ"), "m": ("", "メートル"),
    "m2": ("", "平方メートル"), "m²": ("", "平方メートル"), "m3": ("", "立方メートル"), "m³": ("", "立方メートル"),
    "ft": ("", "フィート"), "inch": ("", "インチ"), "inches": ("", "インチ"), "mi": ("", "マイル"),
    "mg": ("", "ミリグラム"), "kg": ("", "キロ"), "g": ("", "グラム"), "lb": ("", "ポンド"), "lbs": ("", "ポンド"),
    "oz": ("", "オンス"), "mL": ("", "ミリリットル"), "ml": ("", "ミリリットル"), "dL": ("", "デシリットル"),
    "L": ("", "リットル"), "l": ("", "リットル"),
    "hPa": ("", "ヘクトパスカル"), "kPa": ("", "キロパスカル"), "Pa": ("", "パスカル"), "mbar": ("", "ミリバール"),
    "bar": ("", "バール"), "mmHg": ("", "ミリメートルエイチジー"), "inHg": ("", "インチエイチジー"),
    "ppm": ("", "ピーピーエム"), "ppb": ("", "ピーピービー"),
    "µg/m3": ("", "マイクログラムマイリッポウメートル"), "μg/m3": ("", "マイクログラムマイリッポウメートル"),
    "ug/m3": ("", "マイクログラムマイリッポウメートル"), "mg/m3": ("", "ミリグラムマイリッポウメートル"),
    "lx": ("", "ルクス"), "lux": ("", "ルクス"), "lm": ("", "ルーメン"),
    "dB": ("", "デシベル"), "dBA": ("", "デシベル"), "dBm": ("", "デービーエム"),
    "TB": ("", "テラバイト"), "GB": ("", "ギガバイト"), "MB": ("", "メガバイト"), "KB": ("", "キロバイト"),
    "kB": ("", "キロバイト"), "Gbps": ("", "ギガビーピーエス"), "Mbps": ("", "メガビーピーエス"),
    "kbps": ("", "キロビーピーエス"),
    "ms": ("", "ミリ秒"), "s": ("", "秒"), "sec": ("", "秒"), "secs": ("", "秒"), "second": ("", "秒"),
    "seconds": ("", "秒"), "min": ("", "分"), "mins": ("", "分"), "minute": ("", "分"), "minutes": ("", "分"),
    "h": ("", "時間"), "hr": ("", "時間"), "hrs": ("", "時間"), "hour": ("", "時間"), "hours": ("", "時間"),
    "d": ("", "日"), "day": ("", "日"), "days": ("", "日間"), "week": ("", "週間"), "weeks": ("", "週間"),
    "month": ("", "か月"), "months": ("", "か月"), "year": ("", "年"), "years": ("", "年"),
    "kcal": ("", "キロカロリー"), "cal": ("", "カロリー"), "rpm": ("", "アールピーエム"), "bpm": ("", "ビーピーエム"),
    "K": ("", "ケー"), "x": ("", "倍"), "×": ("", "倍"), "F": ("", "階"), "pcs": ("", "個"),
    "USD": ("", "ドル"), "JPY": ("", "円"), "EUR": ("", "ユーロ"), "yen": ("", "円"), "dollars": ("", "ドル"),
}  # fmt: skip
_UNIT_ALTERNATION = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
# Units that need no space before them are matched after optional blanks;
# one-letter Latin units only when directly attached (5 m is fine too, but
# "5 A" in running text is rare enough).
_CURRENCY_PREFIX = {"¥": "円", "$": "ドル", "€": "ユーロ", "£": "ポンド", "₩": "ウォン"}
_SIGN = r"(?P<sign>(?<![0-9A-Za-z.,)])(?:[-−‐－]|\+|±))?"
_QUANTITY_RE = re.compile(
    r"(?P<currency>[¥$€£₩])?[ \t]?" + _SIGN + r"(?P<cur2>[¥$€£₩])?"
    r"(?P<num>(?<![\d.])" + _NUM + r"(?!\.\d))"
    r"(?:[ \t]?(?P<unit>" + _UNIT_ALTERNATION + r")(?![A-Za-z0-9]))?"
    r"(?:(?P<nth>st|nd|rd|th)(?![A-Za-z]))?"
)
_RANGE_DASH_RE = re.compile(
    r"(?<![\d.,-])(\d{1,5}(?:\.\d+)?)([^\d\s\-–—〜~～]{0,4}?)[ \t]*[-–—][ \t]*(?=\d{1,5}(?:\.\d+)?(?![\d-]))"
)
_WAVE_RANGE_RE = re.compile(r"(?<=[0-9A-Za-z%°時分秒日月年度円個回人階℃])[ \t]*[〜~～][ \t]*(?=[-−+]?\d|[¥$€£])")
_WAVE_AFTER_NUMBER_RE = re.compile(r"(?:(?<=\d)|(?<=\d[時分秒日月年度円個回人階%]))[ \t]*[〜~～](?![〜~～])")
_PHONE_RE = re.compile(r"(?<![\d.])(?:〒[ \t]*)?0\d{1,4}-\d{1,4}-\d{3,4}(?![\d-])|(?<=〒)[ \t]*\d{3}-\d{4}")
_DOTTED_RE = re.compile(r"(?<![\d.])\d+(?:\.\d+){2,}(?![\d.])")
# 5-3=2, 10÷2=5, √2: arithmetic read out.
_ARITHMETIC = {"-": "ひく", "÷": "わる", "=": "イコール", "√": "ルート"}
_ARITHMETIC_RE = re.compile(
    r"(?<=\d)[ \t]*([-÷])[ \t]*(?=\d+(?:\.\d+)?[ \t]*=)|(?<=\d)[ \t]*(=)[ \t]*(?=[-−]?\d)|(√)(?=\d)"
)
_TIMES_RE = re.compile(r"(?<=\d)[ \t]*[x×][ \t]*(?=\d)")
# 卵 x 2, 電池×4: so many pieces.
_PIECES_RE = re.compile(r"(?<=[\u3040-\u30ff\u4e00-\u9fff])[ \t]*[x×][ \t]*(\d{1,3})(?![\d.])")
_FRACTION_COUNTER_RE = re.compile(r"(\d+)分の(\d+)")
_COUNTER_FIXES = (
    # (regex on the digits and the counter, replacement builder)
    # Minute counts that are also words (times.MINUTE_WORDS: 5分 ごぶ, 9分 くぶ, 10分 じゅうぶん).
    (
        re.compile(r"(?<![\d.,])(" + "|".join(map(str, MINUTE_WORDS)) + r")分(?=後|間|$|[^\d])"),
        lambda m: spell_minutes(int(m.group(1))),
    ),
    # 三件 さんげん, 三千件 さんぜんげん, 八件 はちけん.
    (re.compile(r"(?<![\d.,])(\d{1,16})件"), lambda m: _ken(int(m.group(1)))),
    (re.compile(r"(?<![\d.,])1箱"), lambda m: "ひと箱"),
    (re.compile(r"(?<![\d.,])20歳"), lambda m: "はたち"),
)
_ADJACENT_NUMBERS_RE = re.compile(r"(?<=\d)[ \t]+(?=\d)")


def _ken(n: int) -> str:
    words = spell_integer(n)
    if words.endswith("八"):
        return words[:-1] + "ハッケン"  # 八件 ハチケン
    if n % 10 == 3 or words.endswith(("千", "万", "億", "兆")):
        return words + "ケン"
    return words + "件"


def _quantity(m: re.Match[str]) -> str:
    number = m.group("num")
    sign = m.group("sign") or ""
    unit = m.group("unit")
    currency = m.group("currency") or m.group("cur2")
    words = number_words(number)
    prefix = ""
    if sign in ("-", "−", "‐", "－"):
        words = "マイナス" + words
    elif sign == "+":
        words = "プラス" + words
    elif sign == "±":
        words = "プラスマイナス" + words
    integer = int(number.replace(",", "")) if "." not in number and len(number) <= MAX_NUMBER_DIGITS else None
    if unit:
        prefix, reading = UNITS[unit]
        if prefix and prefix in m.string[max(0, m.start() - 4) : m.start()]:
            prefix = ""  # 時速40km/h: said once
        if unit in ("min", "mins", "minute", "minutes") and integer is not None:
            reading = ""
            words = spell_minutes(integer)
        words = words + reading
    if m.group("nth"):
        n = integer or 0
        words = _ORDINALS_EN.get(n) or (words + "番目")
    if currency:
        words += _CURRENCY_PREFIX[currency]
    elif (
        integer is not None
        and not unit
        and not m.group("nth")
        and m.string[m.end() : m.end() + 1] in _WORD_STARTING_DIGITS
    ):
        # 第3四半期: in kanji the number would run into the word after it (三四 サンヨン), so it is
        # written as it is said (第サン四半期 ダイサンシハンキ).  Only a number spelled as one (at
        # most 31 characters): the analysis of a longer run of digits is not worth caching.
        words = STATE.native_reading(words) or words
    return prefix + words


#: Kanji digits that start a word of their own after a number written in figures (四半期, 一戸建て);
#: 十, 百, 千, 万 … after one multiply it (5千円) and are not among them.
_WORD_STARTING_DIGITS = frozenset(KANJI_DIGITS)


def sub_number_signs(text: str) -> str:
    """``No.5``, ``№5`` → ナンバー5."""
    return _NUMBER_SIGN_RE.sub("ナンバー", text)


_NUMBER_SIGN_RE = re.compile(r"(?<![A-Za-z])(?:No|no|NO)\.[ \t]?(?=\d)|№[ \t]?(?=\d)")
_BARE_FRACTION_RE = re.compile(r"(?<![0-9A-Za-z.])\.(?=\d)")


def sub_numbers(text: str) -> str:
    text = _BARE_FRACTION_RE.sub("0.", text)  # .5 → 0.5
    text = _PHONE_RE.sub(lambda m: "の".join(spell_digits(g) for g in re.findall(r"\d+", m.group(0))), text)
    text = _DOTTED_RE.sub(lambda m: "点".join(spell_number(g) for g in m.group(0).split(".")), text)
    text = _FRACTION_COUNTER_RE.sub(lambda m: spell_number(m.group(1)) + "ぶんの" + spell_number(m.group(2)), text)
    for pattern, build in _COUNTER_FIXES:
        text = pattern.sub(build, text)
    text = _TIMES_RE.sub("かける", text)
    text = _ARITHMETIC_RE.sub(lambda m: _ARITHMETIC[m.group(1) or m.group(2) or m.group(3)], text)
    text = _PIECES_RE.sub(lambda m: spell_integer(int(m.group(1))) + "個", text)
    text = _RANGE_DASH_RE.sub(lambda m: m.group(1) + m.group(2) + "から", text)
    text = _WAVE_RANGE_RE.sub("から", text)
    text = _WAVE_AFTER_NUMBER_RE.sub("から", text)
    text = _ADJACENT_NUMBERS_RE.sub("、", text)
    return _QUANTITY_RE.sub(_quantity, text)


__all__ = ["UNITS", "sub_number_signs", "sub_numbers"]
