"""Reading Home Assistant and LLM text the way a Japanese speaker would.

:class:`HomeAssistantReader` rewrites text *before* the HayaKoe-compatible
normaliser (:func:`.normalize.normalize_text`) sees it, so that

* numbers are spelled in kanji the way they are said, with their unit or
  counter: clock times (``7:30`` → 七時三十分), dates and weekdays
  (``12/24(火)`` → 十二月二十四日、火曜日), durations (``1h 30m``),
  decimals (``23.5`` → 二十三点五, ``3.14`` → 三点イチヨン), negative numbers,
  thousands separators, ranges (``20〜25``, ``20-25`` → 二十から二十五),
  percentages, temperatures (``°C ℃ °F``), the units Home Assistant reports
  (``km/h kWh W V A mm hPa ppm µg/m³ lx dB GB`` …) and currencies
  (``円 ¥ $ € £``), with the few counters OpenJTalk reads wrongly fixed
  (``9分`` キューフン, ``10分`` ジュップン, ``1箱`` ひと箱 …);
* English words and device names become katakana: a table of acronyms and
  brands read the Japanese way (``TV`` テレビ, ``Wi-Fi`` ワイファイ, ``Apple TV``
  アップルティーブイ …), then OpenJTalk's own dictionary, then the ``e2k``
  English→katakana model; acronyms it cannot pronounce are spelled with
  Japanese letter names (``MQTT`` エムキューティーティー);
* markdown (emphasis, headings, lists, tables, links, code), URLs, HTML
  tags and emoji are removed or read sensibly, and runs of punctuation are
  collapsed;
* the few Japanese words OpenJTalk misreads in this setting are respelled:
  weather forecasts (``晴れのち曇り``, ``曇り一時雨``), a lone entity state
  (``窓センサー: 開`` カイ) and the words of :data:`MISREAD_WORDS` where
  OpenJTalk splits them wrongly (``値`` アタイ, ``風量`` フウリョウ).

Text without digits, Latin letters or markdown characters (``* _ ` # | < >
[ ]``, ``~~``, rule lines) only gets that last fix, so HayaKoe conformance is
untouched for plain Japanese that OpenJTalk reads right (emoji and stray
symbols in it are dropped by the normaliser anyway).  Otherwise the text is
NFKC-normalised (as the normaliser would do first anyway) and rewritten.

For streamed text (LLM deltas), :func:`safe_to_split` tells a sentence
segmenter where a cut would break a token (``23.5``, a URL, an open code
span, a list marker, a link), and :meth:`HomeAssistantReader.stream` gives a
per-stream rewriter that remembers an open code fence across sentences.
:func:`katakana_reading` shows what will be spoken, as katakana.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache

logger = logging.getLogger(__name__)

# ==========================================================================
# Numbers
# ==========================================================================

_KANJI_DIGITS = "〇一二三四五六七八九"
_SMALL_UNITS = ((1000, "千"), (100, "百"), (10, "十"))
_LARGE_UNITS = ((10**12, "兆"), (10**8, "億"), (10**4, "万"))
#: Largest integer spelled as a number; longer digit strings are read digit by digit.
MAX_SPELLED = 10**16 - 1
#: Most digits of a number read as a number (Python refuses to convert
#: strings of more than 4,300 digits to int at all).
_MAX_NUMBER_DIGITS = len(str(MAX_SPELLED))

#: Digit names for digit-by-digit reading (phone numbers, codes): lengthened
#: ニー and ゴー as in speech.
_DIGIT_NAMES = ("ゼロ", "イチ", "ニー", "サン", "ヨン", "ゴー", "ロク", "ナナ", "ハチ", "キュー")
#: Digit names after a decimal point (三点イチヨン).
_DECIMAL_DIGIT_NAMES = ("ゼロ", "イチ", "ニ", "サン", "ヨン", "ゴ", "ロク", "ナナ", "ハチ", "キュウ")


def _spell_below_10000(n: int) -> str:
    out = []
    for value, name in _SMALL_UNITS:
        digit, n = divmod(n, value)
        if digit:
            out.append(("" if digit == 1 else _KANJI_DIGITS[digit]) + name)
    if n:
        out.append(_KANJI_DIGITS[n])
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

    One decimal digit stays a kanji numeral so OpenJTalk joins it to the
    number (``二十三点五``); longer fractions are read digit by digit in
    katakana, as OpenJTalk would otherwise read ``三点一四`` as 3 point 14.
    Integers with a leading zero (``007``) are read digit by digit.
    """
    integer = integer.replace(",", "")
    if len(integer) > 1 and integer.startswith("0") and not fraction:
        return spell_digits(integer)
    value = int(integer) if len(integer) <= _MAX_NUMBER_DIGITS else None
    if value is None or value > MAX_SPELLED:
        words = spell_digits(integer)
    elif value == 0 and fraction:
        words = "零"  # 0.5 → 零点五 (れいてんご)
    else:
        words = spell_integer(value)
    if fraction:
        if len(fraction) == 1 and fraction != "0":
            words += "点" + _KANJI_DIGITS[int(fraction)]
        else:
            words += "点" + "".join(_DECIMAL_DIGIT_NAMES[int(d)] for d in fraction)
    return words


# ==========================================================================
# English
# ==========================================================================

#: Letter names, the Japanese way.
LETTER_NAMES = {
    "A": "エー", "B": "ビー", "C": "シー", "D": "ディー", "E": "イー", "F": "エフ", "G": "ジー",
    "H": "エイチ", "I": "アイ", "J": "ジェー", "K": "ケー", "L": "エル", "M": "エム", "N": "エヌ",
    "O": "オー", "P": "ピー", "Q": "キュー", "R": "アール", "S": "エス", "T": "ティー", "U": "ユー",
    "V": "ブイ", "W": "ダブリュー", "X": "エックス", "Y": "ワイ", "Z": "ゼット",
}  # fmt: skip

#: Words and phrases read the Japanese way, matched case-insensitively
#: (longest first, on word boundaries).  Keys are written as they usually
#: appear; the reading is katakana (or Japanese).
WORD_READINGS = {
    # Acronyms and technical words.
    "AI": "エーアイ", "API": "エーピーアイ", "CPU": "シーピーユー", "GPU": "ジーピーユー",
    "LED": "エルイーディー", "LAN": "ラン", "WAN": "ワン", "NAS": "ナス", "IoT": "アイオーティー",
    "OK": "オーケー", "ON": "オン", "OFF": "オフ", "PC": "パソコン", "TV": "テレビ",
    "USB": "ユーエスビー", "Wi-Fi": "ワイファイ", "Wi-Fi 6": "ワイファイシックス", "Wi-Fi 7": "ワイファイセブン", "WiFi": "ワイファイ", "Wifi": "ワイファイ",
    "Bluetooth": "ブルートゥース", "HDMI": "エイチディーエムアイ", "SSID": "エスエスアイディー",
    "URL": "ユーアールエル", "ID": "アイディー", "GPS": "ジーピーエス", "UV": "ユーブイ",
    "LLM": "エルエルエム", "SMS": "エスエムエス", "NFC": "エヌエフシー", "QR": "キューアール",
    "PIN": "ピン", "DIY": "ディーアイワイ", "ETA": "イーティーエー", "FAQ": "エフエーキュー",
    "PDF": "ピーディーエフ", "CO2": "シーオーツー", "CO": "シーオー", "VOC": "ブイオーシー",
    "AQI": "エーキューアイ", "HVAC": "エイチバック", "IR": "アイアール", "RGB": "アールジービー",
    "RGBW": "アールジービーダブリュー", "SSD": "エスエスディー", "HDD": "エイチディーディー",
    "RAM": "ラム", "OS": "オーエス", "iOS": "アイオーエス", "app": "アプリ", "apps": "アプリ",
    "Email": "イーメール", "e-mail": "イーメール", "mail": "メール",
    "DM": "ディーエム", "SNS": "エスエヌエス", "VPN": "ブイピーエヌ", "DNS": "ディーエヌエス",
    "IP": "アイピー", "IPv4": "アイピーブイフォー", "IPv6": "アイピーブイロク", "ESP32": "イーエスピーサンニー",
    "MQTT": "エムキューティーティー", "YAML": "ヤムル", "JSON": "ジェイソン", "HTTP": "エイチティーティーピー",
    "HTTPS": "エイチティーティーピーエス", "PM2.5": "ピーエムニーテンゴ", "PM10": "ピーエムテン",
    "PM1": "ピーエムワン", "NO2": "エヌオーツー", "4K": "ヨンケー", "8K": "ハチケー",
    "5G": "ファイブジー", "4G": "フォージー", "LTE": "エルティーイー", "3D": "スリーディー",
    "2D": "ツーディー", "USB-C": "ユーエスビーシー", "Type-C": "タイプシー", "PS5": "ピーエスファイブ",
    "MP3": "エムピースリー", "vs": "ブイエス", "etc": "エトセトラ", "AM": "エーエム", "PM": "ピーエム",
    # Home automation.
    "Home Assistant": "ホームアシスタント", "ESPHome": "イーエスピーホーム", "Z-Wave": "ジーウェーブ",
    "Zigbee": "ジグビー", "Zigbee2MQTT": "ジグビーツーエムキューティーティー", "Matter": "マター",
    "Thread": "スレッド", "HomeKit": "ホームキット", "Node-RED": "ノードレッド", "Assist": "アシスト",
    "Nabu Casa": "ナブカーサ", "Hue": "ヒュー", "Philips": "フィリップス", "Xiaomi": "シャオミ",
    "Aqara": "アカラ", "SwitchBot": "スイッチボット", "Nature Remo": "ネイチャーリモ", "Remo": "リモ",
    "Tuya": "トゥヤ", "Shelly": "シェリー", "Sonoff": "ソノフ", "Tasmota": "タスモタ", "Meross": "メロス",
    "TP-Link": "ティーピーリンク", "Tapo": "タポ", "Eufy": "ユーフィ", "Ring": "リング",
    "Nest": "ネスト", "Ecobee": "エコビー", "Sonos": "ソノス", "Roomba": "ルンバ", "iRobot": "アイロボット",
    "Dyson": "ダイソン", "IKEA": "イケア", "Ikea": "イケア", "Tradfri": "トラドフリ", "Wemo": "ウィーモ",
    "Apple TV": "アップルティーブイ", "Fire TV": "ファイアティーブイ", "Android TV": "アンドロイドティーブイ",
    "Google TV": "グーグルティーブイ", "Chromecast": "クロームキャスト", "Google Home": "グーグルホーム",
    "Google Nest": "グーグルネスト", "Alexa": "アレクサ", "Echo": "エコー", "Siri": "シリ",
    "iPhone": "アイフォーン", "iPad": "アイパッド", "Mac": "マック", "MacBook": "マックブック",
    "ChatGPT": "チャットジーピーティー", "OpenAI": "オープンエーアイ", "Gemini": "ジェミニ",
    "Claude": "クロード", "Ollama": "オラマ", "YouTube": "ユーチューブ", "Netflix": "ネットフリックス",
    "Spotify": "スポティファイ", "Prime Video": "プライムビデオ", "Kindle": "キンドル",
    "Nintendo Switch": "ニンテンドースイッチ", "PlayStation": "プレイステーション", "Xbox": "エックスボックス",
    # Japanese makers, spelled in Latin letters.
    "Panasonic": "パナソニック", "Sony": "ソニー", "Sharp": "シャープ", "Toshiba": "トウシバ",
    "Hitachi": "ヒタチ", "Daikin": "ダイキン", "Mitsubishi": "ミツビシ", "Fujitsu": "フジツウ",
    "Corona": "コロナ", "Iris Ohyama": "アイリスオーヤマ", "Balmuda": "バルミューダ", "Tesla": "テスラ",
    # Words whose OpenJTalk reading is odd in this setting.
    "the": "ザ", "on": "オン", "off": "オフ", "open": "オープン", "closed": "クローズ",
    "unavailable": "アンアベイラブル", "unknown": "アンノウン", "idle": "アイドル",
    "Python": "パイソン", "Mt": "マウント", "Mr": "ミスター", "Ms": "ミズ", "Dr": "ドクター", "temperature": "テンパラチャー",
    "humidity": "ヒューミディティー", "climate": "クライメート", "toilet": "トイレ",
}  # fmt: skip

#: Weekday names and abbreviations → Japanese.
_WEEKDAYS_EN = {
    "mon": "月曜日", "monday": "月曜日", "tue": "火曜日", "tues": "火曜日", "tuesday": "火曜日",
    "wed": "水曜日", "wednesday": "水曜日", "thu": "木曜日", "thur": "木曜日", "thurs": "木曜日",
    "thursday": "木曜日", "fri": "金曜日", "friday": "金曜日", "sat": "土曜日", "saturday": "土曜日",
    "sun": "日曜日", "sunday": "日曜日",
}  # fmt: skip
_ORDINALS_EN = {1: "ファースト", 2: "セカンド", 3: "サード"}


def spell_letters(word: str) -> str:
    """``MQTT`` → エムキューティーティー."""
    return "".join(LETTER_NAMES.get(ch.upper(), "") for ch in word)


_KATAKANA_RE = re.compile(r"[\u30a1-\u30fa\u30fc]+")
#: Letters of the longest run read as a word; a longer one is no English word
#: (``hahahaha…``, ``eeee…``) and is spelled out letter by letter.
MAX_WORD_LETTERS = 40


class EnglishReader:
    """Katakana for English words: table → OpenJTalk's dictionary → e2k.

    The e2k models (about 13 MB, numpy only) are loaded on first use.
    """

    def __init__(self, extra_readings: dict[str, str] | None = None) -> None:
        table = dict(WORD_READINGS)
        table.update(extra_readings or {})
        self._exact = {k: v for k, v in table.items()}
        self._folded = {}
        for key, value in table.items():
            self._folded.setdefault(key.casefold(), value)
        self._cache: dict[str, str] = {}

    # -- public ------------------------------------------------------------

    def table(self, phrase: str) -> str | None:
        """The table reading of a word or phrase, if any."""
        found = self._exact.get(phrase)
        if found is None:
            found = self._folded.get(phrase.casefold())
        return found

    def exact(self, phrase: str) -> str | None:
        """The table reading of ``phrase`` spelled exactly as in the table."""
        return self._exact.get(phrase)

    @property
    def phrases(self) -> list[str]:
        """Table keys, longest first (for matching multi-word entries)."""
        return sorted(self._exact, key=len, reverse=True)

    def read(self, word: str) -> str:
        """Katakana for one Latin word (letters, possibly with ``-`` or ``'``)."""
        cached = self._cache.get(word)
        if cached is None:
            cached = self._read_uncached(word)
            if len(self._cache) < 20000 and len(word) <= MAX_WORD_LETTERS:
                self._cache[word] = cached
        return cached

    # -- internals -----------------------------------------------------------

    def _read_uncached(self, word: str) -> str:
        found = self.table(word)
        if found is not None:
            return found
        if "-" in word or "'" in word:
            native = _native_reading(word) if len(word) <= MAX_WORD_LETTERS else None
            if native is not None:
                return native
            parts = [p for p in re.split(r"[-']", word) if p]
            if "'" in word and len(parts) > 1 and len(parts[-1]) <= 2:
                # don't, it's, let's: read as one word without the apostrophe.
                return self._read_part(word.replace("'", ""))
            return "".join(self.read(p) for p in parts)
        parts = _CAMEL_RE.split(word)
        if len(parts) > 1 and (len(word) > MAX_WORD_LETTERS or _native_reading(word) is None):
            return "".join(self.read(p) for p in parts if p)
        return self._read_part(word)

    def _read_part(self, word: str) -> str:
        found = self.table(word)
        if found is not None:
            return found
        if len(word) == 1:
            return LETTER_NAMES[word.upper()]
        if len(word) > MAX_WORD_LETTERS:
            return spell_letters(word)
        is_caps = word.isupper()
        native = _native_reading(word)
        if is_caps and len(word) <= 4:
            return native if native is not None else spell_letters(word)
        if native is not None:
            return native
        c2k, ngram = _e2k_models()
        lower = word.lower()
        if not ngram(lower):
            return spell_letters(word)
        kana = "".join(_KATAKANA_RE.findall(c2k(lower)))
        return kana or spell_letters(word)


_E2K_LOCK = threading.Lock()
_E2K: tuple[Callable[[str], str], Callable[[str], bool]] | None = None


def _e2k_models() -> tuple[Callable[[str], str], Callable[[str], bool]]:
    """e2k's character model and its "is this a pronounceable word" check, loaded once."""
    global _E2K
    with _E2K_LOCK:
        if _E2K is None:
            from e2k import C2K, NGram

            _E2K = (C2K(), NGram())
        return _E2K


# Boundaries inside CamelCase words: SwitchBot → Switch|Bot, ESPHome → ESP|Home.
_CAMEL_RE = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


@lru_cache(maxsize=8192)
def _native_reading(word: str) -> str | None:
    """OpenJTalk's own reading of ``word`` if its dictionary has it as one word."""
    from . import openjtalk

    nodes = openjtalk.run_frontend(word)
    if len(nodes) != 1:
        return None
    node = nodes[0]
    if node["pos"] in ("記号", "フィラー") or not node["pron"]:
        return None
    reading = node["pron"].replace("’", "")
    if not _KATAKANA_RE.fullmatch(reading):
        return None
    return reading


# ==========================================================================
# Markdown, URLs, emoji, symbols
# ==========================================================================

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

#: What makes a text need rewriting: digits and Latin letters (both widths),
#: markdown characters, strikethrough and horizontal rules.  Text without any
#: of them only gets the Japanese misreading fixes.  (Emoji and symbols alone
#: need nothing: the normaliser drops them anyway.)
_TRIGGER_RE = re.compile(
    r"[0-9A-Za-z\uff10-\uff19\uff21-\uff3a\uff41-\uff5a*_`#|<>\[\]]|~~|^[ \t]*[-=]{3,}[ \t]*$",
    re.MULTILINE,
)


def needs_rewrite(text: str) -> bool:
    """True if :meth:`HomeAssistantReader.rewrite` may change ``text``."""
    return _has_markup_or_latin(text) or _sub_japanese(text) != text


def _has_markup_or_latin(text: str) -> bool:
    if _TRIGGER_RE.search(text) is not None:
        return True
    return not text.isascii() and _TRIGGER_RE.search(unicodedata.normalize("NFKC", text)) is not None


# Roman numerals (Ⅻ, ⅲ) are numbers, not Latin letters.
_ROMAN_VALUES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 50, 100, 500, 1000)
_ROMAN_RE = re.compile("[\u2160-\u216f\u2170-\u217f]")


def _roman(m: re.Match[str]) -> str:
    return str(_ROMAN_VALUES[(ord(m.group(0)) - 0x2160) % 16]) + " "


def _strip_fenced_code(text: str) -> str:
    """Drop fenced code blocks (an unclosed fence drops the rest)."""
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        if _FENCE_RE.match(line):
            inside = not inside
            continue
        if not inside:
            out.append(line)
    return "\n".join(out)


def _inline_code(m: re.Match[str]) -> str:
    # Identifiers such as light.living_room: read the words.
    content = m.group(1).strip()
    return re.sub(r"[._/]+", " ", content) if re.fullmatch(r"[\w.]+", content) else content


def strip_markdown(text: str) -> str:
    """Remove markdown markup, keeping the words it decorates."""
    text = _HTML_BREAK_RE.sub("\n", text)
    text = _HTML_TAG_RE.sub("", text)
    text = _strip_fenced_code(text)
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
    text = re.sub(r"^[ \t]*\|(.*)\|[ \t]*$", lambda m: "、".join(c.strip() for c in m.group(1).split("|") if c.strip()), text, flags=re.MULTILINE)
    for pattern in _EMPHASIS_RES:
        text = pattern.sub(r"\1", text)
    return text


def _strip_emoji(text: str) -> str:
    # Keycap digits (1️⃣) number a list: 1、
    text = _KEYCAP_RE.sub(lambda m: "、" + m.group(1) + "、", text)
    text = _ARROWS_RE.sub("、", text)
    return _EMOJI_RE.sub(lambda m: " ", text)


# ==========================================================================
# Dates, times, quantities
# ==========================================================================

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"
_WEEKDAY_JA = "月火水木金土日"


def _number_words(text: str) -> str:
    """Spell one written number (``1,234.5``)."""
    integer, _, fraction = text.partition(".")
    if len(fraction) > 1:
        fraction = fraction.rstrip("0")  # 12.50 → 十二点五, 1.00 → 一
    return spell_number(integer, fraction or None)


def _minutes(n: int) -> str:
    """``n`` minutes, with the two OpenJTalk misreadings fixed (9分 くぶ, 10分 じゅうぶん)."""
    if n == 9:
        return "キュウフン"
    if n == 10:
        return "ジュップン"
    return spell_integer(n) + "分"


def _clock(hour: int, minute: int, second: int | None = None, meridiem: str | None = None) -> str:
    prefix = ""
    if meridiem:
        prefix = "午前" if meridiem.lower().startswith("a") else "午後"
        if meridiem.lower().startswith("p") and hour > 12:
            hour -= 12
    out = prefix + ("零" if hour == 0 else spell_integer(hour)) + "時"
    if minute:
        out += spell_integer(minute) + "分" if minute not in (9, 10) else _minutes(minute)
    if second:
        out += spell_integer(second) + "秒"
    return out


def _duration(hours: int, minutes: int, seconds: int | None) -> str:
    out = ""
    if hours:
        out += spell_integer(hours) + "時間"
    if minutes:
        out += _minutes(minutes)
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
_WEEKDAY_PAREN_RE = re.compile(r"(?<=日)[ \t]*[(（][ \t]*([" + _WEEKDAY_JA + r"])(?:曜日?)?[ \t]*(?:・[ \t]*祝[ \t]*)?[)）]")
_HOLIDAY_PAREN_RE = re.compile(r"(?<=日)[ \t]*[(（][ \t]*祝日?[ \t]*[)）]")
_DURATION_CONTEXT = r"(?:残り|あと|残り時間|経過|経過時間|所要時間|期間|稼働時間|タイマー|継続時間)[ \t]*(?:は|:|：)?[ \t]*"
_DURATION_CLOCK_RE = re.compile(_DURATION_CONTEXT.join(("(", ")")) + r"(\d{1,3}):(\d{2})(?::(\d{2}))?(?![\d:])")
_CLOCK_RE = re.compile(
    r"(?<![\d:.])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])(?:[ \t]*([AaPp])\.?[Mm]\.?(?![A-Za-z]))?"
)
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
_EN_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_EN_MONTHS["sept"] = 9


def _sub_dates_and_times(text: str) -> str:
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
# before the number (時速二十キロ).  Matched case-sensitively, longest first,
# and only when no Latin letter follows.
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
_RANGE_DASH_RE = re.compile(r"(?<![\d.,-])(\d{1,5}(?:\.\d+)?)([^\d\s\-–—〜~～]{0,4}?)[ \t]*[-–—][ \t]*(?=\d{1,5}(?:\.\d+)?(?![\d-]))")
_WAVE_RANGE_RE = re.compile(r"(?<=[0-9A-Za-z%°時分秒日月年度円個回人階℃])[ \t]*[〜~～][ \t]*(?=[-−+]?\d|[¥$€£])")
_WAVE_AFTER_NUMBER_RE = re.compile(r"(?:(?<=\d)|(?<=\d[時分秒日月年度円個回人階%]))[ \t]*[〜~～](?![〜~～])")
_PHONE_RE = re.compile(r"(?<![\d.])(?:〒[ \t]*)?0\d{1,4}-\d{1,4}-\d{3,4}(?![\d-])|(?<=〒)[ \t]*\d{3}-\d{4}")
_DOTTED_RE = re.compile(r"(?<![\d.])\d+(?:\.\d+){2,}(?![\d.])")
# 5-3=2, 10÷2=5, √2: arithmetic read out.
_ARITHMETIC = {"-": "ひく", "÷": "わる", "=": "イコール", "√": "ルート"}
_ARITHMETIC_RE = re.compile(r"(?<=\d)[ \t]*([-÷])[ \t]*(?=\d+(?:\.\d+)?[ \t]*=)|(?<=\d)[ \t]*(=)[ \t]*(?=[-−]?\d)|(√)(?=\d)")
_TIMES_RE = re.compile(r"(?<=\d)[ \t]*[x×][ \t]*(?=\d)")
# 卵 x 2, 電池×4: so many pieces.
_PIECES_RE = re.compile(r"(?<=[\u3040-\u30ff\u4e00-\u9fff])[ \t]*[x×][ \t]*(\d{1,3})(?![\d.])")
_FRACTION_COUNTER_RE = re.compile(r"(\d+)分の(\d+)")
_COUNTER_FIXES = (
    # (regex on the digits and the counter, replacement builder)
    # 9分 くぶ, 10分 じゅうぶん; OpenJTalk gets 十分後 and 十分間 right.
    (re.compile(r"(?<![\d.,])(9|10)分(後|間)?"), lambda m: ("十分" if m.group(1) == "10" and m.group(2) else _minutes(int(m.group(1)))) + (m.group(2) or "")),
    # 三件 さんげん, 三千件 さんぜんげん.
    (re.compile(r"(?<![\d.,])(\d{1,16})件"), lambda m: _ken(int(m.group(1)))),
    (re.compile(r"(?<![\d.,])1箱"), lambda m: "ひと箱"),
    (re.compile(r"(?<![\d.,])20歳"), lambda m: "はたち"),
)
_ADJACENT_NUMBERS_RE = re.compile(r"(?<=\d)[ \t]+(?=\d)")


def _ken(n: int) -> str:
    words = spell_integer(n)
    if n % 10 == 3 or words.endswith(("千", "万", "億", "兆")):
        return words + "ケン"
    return words + "件"


def _quantity(m: re.Match[str]) -> str:
    number = m.group("num")
    sign = m.group("sign") or ""
    unit = m.group("unit")
    currency = m.group("currency") or m.group("cur2")
    words = _number_words(number)
    prefix = ""
    if sign in ("-", "−", "‐", "－"):
        words = "マイナス" + words
    elif sign == "+":
        words = "プラス" + words
    elif sign == "±":
        words = "プラスマイナス" + words
    integer = int(number.replace(",", "")) if "." not in number and len(number) <= _MAX_NUMBER_DIGITS else None
    if unit:
        prefix, reading = UNITS[unit]
        if prefix and prefix in m.string[max(0, m.start() - 4) : m.start()]:
            prefix = ""  # 時速40km/h: said once
        if unit in ("min", "mins", "minute", "minutes") and integer is not None:
            reading = ""
            words = _minutes(integer)
        words = words + reading
    if m.group("nth"):
        n = integer or 0
        words = _ORDINALS_EN.get(n) or (words + "番目")
    if currency:
        words += _CURRENCY_PREFIX[currency]
    return prefix + words


_NUMBER_SIGN_RE = re.compile(r"(?<![A-Za-z])(?:No|no|NO)\.[ \t]?(?=\d)|№[ \t]?(?=\d)")
_BARE_FRACTION_RE = re.compile(r"(?<![0-9A-Za-z.])\.(?=\d)")


def _sub_numbers(text: str) -> str:
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


# ==========================================================================
# English words
# ==========================================================================

_LATIN_WORD_RE = re.compile(r"[A-Za-z]+(?:[-'’][A-Za-z]+)*")


def _sub_english(text: str, english: EnglishReader) -> str:
    def word(m: re.Match[str]) -> str:
        w = m.group(0).replace("’", "'")
        weekday = _WEEKDAYS_EN.get(w.lower().rstrip("."))
        if weekday and (w[0].isupper() or len(w) > 3):
            return weekday
        return english.read(w)

    return _LATIN_WORD_RE.sub(word, text)


# ==========================================================================
# Symbols and punctuation
# ==========================================================================

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


def _sub_symbols(text: str) -> str:
    for pattern, replacement in _SYMBOL_WORDS:
        text = pattern.sub(replacement, text)
    text = _DROP_RE.sub(" ", text)
    for pattern, replacement in _REPEATS:
        text = pattern.sub(replacement, text)
    text = re.sub(r"(?:[ \t]*、){2,}", "、", text)
    text = re.sub(r"^[ \t]*、+", "", text, flags=re.MULTILINE)
    text = _SPACES_RE.sub(" ", text)
    return text


# ==========================================================================
# Japanese words OpenJTalk misreads
# ==========================================================================

# A forecast: 晴れのち曇り, 曇り一時雨, 雪後晴れ.  OpenJTalk splits the run
# (晴れのち → ハレレノチ, 一時雨 → イチジウ, のち雨。 → ノチウ, 後 → ゴ);
# a pause before the connector, as a forecaster makes, keeps every word
# whole.  (時々 is always read right and is left alone.)
_FORECAST_RE = re.compile(
    r"(晴れ|晴|曇り|曇|くもり|雨|雪)[ \t\u3000]*(のち|後|一時)[ \t\u3000]*(?=晴|曇|くもり|雨|雪|雷|にわか雨|小雨|大雨|みぞれ)"
)

#: One-character entity states OpenJTalk reads as a verb or the wrong word
#: when they stand alone (開 ヒラク, 強 ツヨ, 中 ナカ, 入 イレ).  Read this way
#: only after a colon (``窓センサー: 開``) or as a whole line; 閉 ヘイ, 弱
#: ジャク and 切 キリ are already right.
STATE_READINGS = {"開": "カイ", "強": "キョウ", "中": "チュウ", "入": "イリ"}
_STATE_RE = re.compile(
    r"(?:^|(?<=[:：]))([ \t\u3000]*)([" + "".join(STATE_READINGS) + r"])(?=[ \t\u3000]*(?:$|[、。,，.．!！?？)）」]))",
    re.MULTILINE,
)

#: Words OpenJTalk's analysis reads wrongly: a run of (surface, reading)
#: words as OpenJTalk splits them → what to write instead, and what may
#: follow when OpenJTalk is right after all.  Compounds it knows are separate
#: words and stay untouched (値段 ネダン, 設定値 セッテーチ, 言い値 イーネ,
#: 送風量 ソーフーリョー, 最大風量 サイダイフーリョー).
MISREAD_WORDS: dict[tuple[tuple[str, str], ...], tuple[str, tuple[str, ...]]] = {
    (("値", "ネ"),): ("アタイ", ("が張", "の張")),  # a value, not a price (値が張る: expensive)
    (("風", "カゼ"), ("量", "リョウ")): ("フウ量", ()),  # 風量 カゼリョウ
    (("光量", "ヒカリリョー"),): ("コウ量", ()),
}
_MISREAD_CHARS = frozenset(run[0][0][0] for run in MISREAD_WORDS)


def _sub_misread_words(line: str) -> str:
    """Rewrite the words of :data:`MISREAD_WORDS` where OpenJTalk splits ``line`` that way."""
    if not any(ch in line for ch in _MISREAD_CHARS):
        return line
    from . import openjtalk

    # OpenJTalk widens Latin letters and symbols and drops control
    # characters, but passes kanji through: the k-th 値 of its words is the
    # k-th 値 of the line (also when a long line is analysed in pieces).
    positions = {ch: [i for i, c in enumerate(line) if c == ch] for ch in _MISREAD_CHARS}
    seen = dict.fromkeys(_MISREAD_CHARS, 0)
    words = [(n["string"], n["pron"].replace("’", "")) for n in openjtalk.run_frontend(line)]
    edits: list[tuple[int, int, str]] = []
    for i, (surface, _) in enumerate(words):
        for run, (replacement, unless_followed_by) in MISREAD_WORDS.items():
            if tuple(words[i : i + len(run)]) != run:
                continue
            found = positions[surface[0]]
            start = found[seen[surface[0]]] if seen[surface[0]] < len(found) else -1
            written = "".join(s for s, _ in run)
            end = start + len(written)
            if start >= 0 and line.startswith(written, start) and not line.startswith(unless_followed_by, end):
                edits.append((start, end, replacement))
            break
        for ch in surface:
            if ch in seen:
                seen[ch] += 1
    for start, end, replacement in reversed(edits):
        line = line[:start] + replacement + line[end:]
    return line


def _sub_japanese(text: str) -> str:
    """Respell the Japanese OpenJTalk misreads: forecasts, lone states, :data:`MISREAD_WORDS`."""
    text = _STATE_RE.sub(lambda m: m.group(1) + STATE_READINGS[m.group(2)], text)
    text = _FORECAST_RE.sub(lambda m: m.group(1) + "、" + ("のち" if m.group(2) == "後" else m.group(2)), text)
    # Line by line, as the synthesiser reads them.
    return "\n".join(_sub_misread_words(line) for line in text.split("\n"))


# ==========================================================================
# The reader
# ==========================================================================

_PLACEHOLDER_BASE = 0xF0000  # supplementary private use area A


class HomeAssistantReader:
    """Rewrites Home Assistant / LLM text into plain Japanese for the normaliser.

    Args:
        keep_words: Latin surfaces that must reach OpenJTalk untouched
            (user dictionary entries), so the user's reading wins.  They are
            passed on with their spaces removed (``Living Room`` →
            ``LivingRoom``), as the dictionary stores them.
        extra_readings: more word → katakana readings for English words.
    """

    def __init__(self, keep_words: Iterable[str] = (), extra_readings: dict[str, str] | None = None) -> None:
        self.english = EnglishReader(extra_readings)
        self.keep_words = sorted(
            {unicodedata.normalize("NFKC", w).strip() for w in keep_words if w and w.strip()}, key=len, reverse=True
        )
        self._keep_re = (
            re.compile(
                r"(?<![A-Za-z])(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in self.keep_words) + r")(?![A-Za-z])"
            )
            if self.keep_words
            else None
        )
        # Multi-word and symbol-bearing table entries are matched as phrases
        # before single words (Apple TV, Wi-Fi, PM2.5).
        phrases = [p for p in self.english.phrases if not re.fullmatch(r"[A-Za-z]+", p)]
        self._phrase_re = re.compile(
            r"(?<![A-Za-z0-9])(?:" + "|".join(re.escape(p) for p in phrases) + r")(?![A-Za-z0-9])",
            re.IGNORECASE,
        )

    def rewrite(self, text: str) -> str:
        """Plain Japanese for ``text`` (unchanged if there is nothing to rewrite)."""
        if not _has_markup_or_latin(text):
            return _sub_japanese(text)
        text = unicodedata.normalize("NFKC", _ROMAN_RE.sub(_roman, text))
        text = _NUMBER_SIGN_RE.sub("ナンバー", text)
        kept: list[str] = []
        if self._keep_re is not None:

            def keep(m: re.Match[str]) -> str:
                kept.append(re.sub(r"\s+", "", m.group(0)))
                return chr(_PLACEHOLDER_BASE + len(kept) - 1)

            text = self._keep_re.sub(keep, text)
        text = _DASH_RUN_RE.sub(" ", text)
        text = _URL_RE.sub("リンク", text)
        text = _EMAIL_RE.sub("メールアドレス", text)
        text = strip_markdown(text)
        text = _ENTITY_DOT_RE.sub(" ", text)
        text = _strip_emoji(text)
        text = _STRAY_MARKERS_RE.sub(" ", text)
        text = self._phrase_re.sub(self._phrase, text)
        text = _sub_dates_and_times(text)
        text = _sub_numbers(text)
        text = _sub_english(text, self.english)
        text = _sub_japanese(text)
        text = _sub_symbols(text)
        if kept:
            text = re.sub(
                "[\U000f0000-\U000fffff]", lambda m: kept[ord(m.group(0)) - _PLACEHOLDER_BASE], text
            )
        return text.strip(" \t")

    def _phrase(self, m: re.Match[str]) -> str:
        found = m.group(0)
        if any(ch.isdigit() for ch in found):  # 5G, 4K: the case matters
            return self.english.exact(found) or found
        return self.english.table(found) or found

    def stream(self) -> "StreamRewriter":
        """A rewriter for the sentences of one streamed text (see :class:`StreamRewriter`)."""
        return StreamRewriter(self)


class StreamRewriter:
    """Rewrites the sentences of one stream in order, remembering an open code fence.

    A fenced code block longer than the segmenter's sentence cap arrives in
    several pieces; the pieces inside the fence are dropped.
    """

    def __init__(self, reader: HomeAssistantReader) -> None:
        self.reader = reader
        self.in_fence = False

    def __call__(self, sentence: str) -> str:
        lines = sentence.split("\n")
        kept: list[str] = []
        for line in lines:
            if _FENCE_RE.match(line):
                self.in_fence = not self.in_fence
                continue
            if not self.in_fence:
                kept.append(line)
        return self.reader.rewrite("\n".join(kept))


# ==========================================================================
# Streaming: where a sentence segmenter must not cut
# ==========================================================================

_URL_START_RE = re.compile(r"(?:https?://|ftp://|www\.)", re.IGNORECASE)
_URL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'*+,;=%")


def safe_to_split(buffer: str, index: int) -> bool:
    """May a sentence segmenter cut ``buffer`` into ``buffer[:index]`` and ``buffer[index:]``?

    False when the cut would break something the reader must see whole:

    * a number: ``23.5``, ``1,500``, ``7:30`` (a ``. , :`` right after a
      digit, when the next character is a digit or has not arrived yet);
    * an ordered-list marker (``1.`` at the start of a line);
    * a URL (from ``http://``/``www.`` to the next blank);
    * an open inline code span or fenced code block;
    * an open markdown link (``[text]`` not yet followed by ``(url)``).

    ``index == len(buffer)`` means "cut at the end of what arrived so far";
    when the answer depends on text still to come, it is False.
    """
    if index <= 0 or index > len(buffer):
        return index == 0
    before = buffer[:index]
    after = buffer[index:]
    prev = before[-1]
    # Numbers: 23.5, 1,500, 7:30 — and a digit ending the buffer may continue.
    if prev in ".．,:：" and len(before) >= 2 and before[-2].isdigit():
        if not after or after[0].isdigit():
            return False
        line_start = before.rfind("\n") + 1
        if prev in ".．" and re.fullmatch(r"[ \t]*\d{1,3}[.．]", before[line_start:]):
            return False  # "1." of a numbered list
    if prev.isdigit() and after[:1].isdigit():
        return False
    # A URL running up to the cut.
    for m in _URL_START_RE.finditer(before):
        tail = before[m.start() :]
        if all(ch in _URL_CHARS for ch in tail) and (not after or after[0] in _URL_CHARS):
            return False
    # Code: an odd number of fences, or of backticks on the current line.
    fences = len(re.findall(r"^[ \t]*(?:```|~~~)", before, re.MULTILINE))
    if fences % 2 == 1:
        return False
    line = before[before.rfind("\n") + 1 :]
    if line.replace("```", "").count("`") % 2 == 1:
        return False
    # An open link: [text ... or [text](url ...
    open_bracket = line.rfind("[")
    if open_bracket != -1:
        rest = line[open_bracket:]
        if "]" not in rest:
            return False
        close = rest.index("]")
        if rest[close + 1 : close + 2] == "(" and ")" not in rest[close:]:
            return False
        if close == len(rest) - 1 and not after:
            return False  # "(url)" may still come
    return True


# ==========================================================================
# Reading display
# ==========================================================================

_PUNCTUATION_READING = {"，": "、", "．": "。", "！": "！", "？": "？", "、": "、", "。": "。"}


def katakana_reading(
    text: str,
    reader: HomeAssistantReader | None = None,
    keep_words: Iterable[str] = (),
    *,
    punctuation: bool = True,
) -> str:
    """The katakana pronunciation the synthesiser will speak for ``text``.

    Runs the Home Assistant rewrite, the HayaKoe-compatible normaliser and
    OpenJTalk, sentence by sentence like the engine, and joins each word's
    pronunciation (accent marks removed).  Pauses show as ``、``, sentence
    ends as ``。`` (or ``？ ！``), unless ``punctuation`` is False.
    """
    from . import openjtalk
    from .normalize import normalize_text
    from .sentences import split_sentences

    reader = reader or HomeAssistantReader(keep_words)
    keep = [re.sub(r"\s+", "", w) for w in (list(keep_words) or reader.keep_words)]
    out: list[str] = []
    for sentence in split_sentences(reader.rewrite(text)):
        normalized = normalize_text(sentence, keep)
        if not normalized:
            continue
        if punctuation and out and out[-1] not in "、。！？":
            out.append("。")
        for node in openjtalk.run_frontend(normalized):
            if node["pos"] == "記号":
                mark = _PUNCTUATION_READING.get(node["string"], "")
                if punctuation and mark and not (out and out[-1] in "、。！？"):
                    out.append(mark)
                continue
            out.append(node["pron"].replace("’", ""))
    reading = "".join(out).lstrip("、。")
    return reading


__all__ = [
    "LETTER_NAMES",
    "MISREAD_WORDS",
    "STATE_READINGS",
    "UNITS",
    "WORD_READINGS",
    "EnglishReader",
    "HomeAssistantReader",
    "StreamRewriter",
    "katakana_reading",
    "needs_rewrite",
    "safe_to_split",
    "spell_digits",
    "spell_integer",
    "spell_number",
    "strip_markdown",
]
