"""Dates, weekdays, clock times and durations in words (``7:30`` → 七時三十分)."""

from __future__ import annotations

import re

from .english import WORD_READINGS
from .numbers import spell_integer

_WEEKDAY_JA = "月火水木金土日"


#: Minute counts that are also words OpenJTalk prefers: 五分 ゴブ (half), 八分 ハチブ, 九分 クブ, 十分
#: ジューブン (enough), 十二分 ジューニブン (amply). They are written as said.
MINUTE_WORDS = {5: "ゴフン", 8: "ハップン", 9: "キュウフン", 10: "ジュップン", 12: "ジュウニフン"}


def spell_minutes(n: int) -> str:
    """``n`` minutes, the counts of :data:`MINUTE_WORDS` written as they are said."""
    return MINUTE_WORDS.get(n) or spell_integer(n) + "分"


def _clock(hour: int, minute: int, second: int | None = None, meridiem: str | None = None) -> str:
    prefix = ""
    if meridiem:
        prefix = "午前" if meridiem.lower().startswith("a") else "午後"
        if meridiem.lower().startswith("p") and hour > 12:
            hour -= 12
    out = prefix + ("零" if hour == 0 else spell_integer(hour)) + "時"
    if minute:
        out += spell_minutes(minute)
    if second:
        out += spell_integer(second) + "秒"
    return out


def _duration(hours: int, minutes: int, seconds: int | None) -> str:
    out = ""
    if hours:
        out += spell_integer(hours) + "時間"
    if minutes:
        out += spell_minutes(minutes)
    if seconds:
        out += spell_integer(seconds) + "秒"
    return out or "ゼロ秒"


def _date(year: str | None, month: int, day: int | None) -> str:
    out = ""
    if year:
        out += spell_integer(int(year)) + "年"
    out += spell_integer(month) + "月"
    if day is not None:
        out += spell_integer(day) + "日"
    return out


_ISO_DATETIME_RE = re.compile(
    r"(?<![\d.])(\d{4})([-/])(\d{1,2})\2(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\d.])"
)
_MONTH_DAY_RE = re.compile(r"(?<![\d./:,])(\d{1,2})/(\d{1,2})(?![\d/]|\.\d)")
_WEEKDAY_PAREN_RE = re.compile(
    r"(?<=日)[ \t]*[(（][ \t]*([" + _WEEKDAY_JA + r"])(?:曜日?)?[ \t]*(?:・[ \t]*祝[ \t]*)?[)）]"
)
_HOLIDAY_PAREN_RE = re.compile(r"(?<=日)[ \t]*[(（][ \t]*祝日?[ \t]*[)）]")
_DURATION_CONTEXT = (
    r"(?:残り|あと|残り時間|経過|経過時間|所要時間|期間|稼働時間|タイマー|継続時間)[ \t]*(?:は|:|：)?[ \t]*"
)
_DURATION_CLOCK_RE = re.compile(_DURATION_CONTEXT.join(("(", ")")) + r"(\d{1,3}):(\d{2})(?::(\d{2}))?(?![\d:])")
_CLOCK_RE = re.compile(r"(?<![\d:.])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])(?:[ \t]*([AaPp])\.?[Mm]\.?(?![A-Za-z]))?")
_HOUR_MERIDIEM_RE = re.compile(r"(?<![\d:.])(\d{1,2})[ \t]*([AaPp])\.?[Mm]\.?(?![A-Za-z])")
# Shelly Plus 1PM, Shelly 2PM Gen3: after a brand name (a word of the table
# and up to two more capitalised words), 1PM is a model, not a clock time.
_BRAND_BEFORE_RE = re.compile(r"(?<![A-Za-z0-9])([A-Z][A-Za-z]*)(?:[ \t]+[A-Z][A-Za-z]*){0,2}[ \t]+$")
_HMS_RE = re.compile(
    r"(?<![A-Za-z0-9.])(?:(\d{1,16})[ \t]*(?:h|hr|hrs|hours?)[ \t]*)?(?:(\d{1,16})[ \t]*(?:m|min|mins|minutes?)[ \t]*)?(?:(\d{1,16})[ \t]*(?:s|sec|secs|seconds?))?(?![A-Za-z])"
)
_EN_DATE_RE = re.compile(
    r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?[ \t]+(\d{1,2})(?:st|nd|rd|th)?(?:,?[ \t]+(\d{4}))?\b"
)
_EN_MONTHS = {
    m: i for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)
}
_EN_MONTHS["sept"] = 9


def sub_dates_and_times(text: str) -> str:
    def iso(m: re.Match[str]) -> str:
        year, month, day = m.group(1), int(m.group(3)), int(m.group(4))
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return m.group(0)
        out = _date(year, month, day)
        if m.group(5) is not None:
            out += "、" + _clock(int(m.group(5)), int(m.group(6)), int(m.group(7)) if m.group(7) else None)
        return out

    text = _ISO_DATETIME_RE.sub(iso, text)

    def en_date(m: re.Match[str]) -> str:
        day = int(m.group(2))
        if not 1 <= day <= 31:
            return m.group(0)
        return _date(m.group(3), _EN_MONTHS[m.group(1).lower()], day)

    text = _EN_DATE_RE.sub(en_date, text)

    def duration_clock(m: re.Match[str]) -> str:
        first, second = int(m.group(2)), int(m.group(3))
        if m.group(4) is not None:  # h:mm:ss
            return m.group(1) + _duration(first, second, int(m.group(4)))
        return m.group(1) + _duration(0, first, second)  # mm:ss

    text = _DURATION_CLOCK_RE.sub(duration_clock, text)

    def clock(m: re.Match[str]) -> str:
        hour, minute = int(m.group(1)), int(m.group(2))
        second = int(m.group(3)) if m.group(3) else None
        if minute > 59 or (second is not None and second > 59):
            return m.group(0)
        if hour > 24:
            return _duration(hour, minute, second)
        return _clock(hour, minute, second, m.group(4))

    text = _CLOCK_RE.sub(clock, text)

    def hour_meridiem(m: re.Match[str]) -> str:
        if int(m.group(1)) > 12:
            return m.group(0)
        if m.group(0)[len(m.group(1)) :] in ("AM", "PM"):
            brand = _BRAND_BEFORE_RE.search(m.string[max(0, m.start() - 40) : m.start()])
            if brand and brand.group(1) in WORD_READINGS:
                return m.group(0)
        return _clock(int(m.group(1)), 0, None, m.group(2))

    text = _HOUR_MERIDIEM_RE.sub(hour_meridiem, text)

    def month_day(m: re.Match[str]) -> str:
        a, b = int(m.group(1)), int(m.group(2))
        weekday_follows = m.string[m.end() : m.end() + 1] in ("(", "（")
        if 0 < a < b <= 4 and not weekday_follows:
            return spell_integer(b) + "ぶんの" + spell_integer(a)  # 1/2 → 二ぶんの一
        if 1 <= a <= 12 and 1 <= b <= 31:
            return _date(None, a, b)
        return spell_integer(b) + "ぶんの" + spell_integer(a) if b else m.group(0)

    text = _MONTH_DAY_RE.sub(month_day, text)
    text = _WEEKDAY_PAREN_RE.sub(lambda m: "、" + m.group(1) + "曜日", text)
    text = _HOLIDAY_PAREN_RE.sub("、祝日", text)

    def hms(m: re.Match[str]) -> str:
        if not any(m.group(i) for i in (1, 2, 3)):
            return m.group(0)
        if sum(1 for i in (1, 2, 3) if m.group(i)) == 1:
            return m.group(0)  # a single unit is handled with the other units
        h, mi, s = (int(m.group(i)) if m.group(i) else 0 for i in (1, 2, 3))
        return _duration(h, mi, s if m.group(3) else None) + (" " if m.group(0).endswith((" ", "\t")) else "")

    text = _HMS_RE.sub(hms, text)
    return text


# Units after a number: surface → (prefix, reading).  A prefix is said


__all__ = ["spell_minutes", "sub_dates_and_times"]
