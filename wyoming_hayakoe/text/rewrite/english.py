"""English words and device names in katakana: a table, OpenJTalk's dictionary, then e2k."""

from __future__ import annotations

import re

from ..state import STATE

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
    "MQTT": "エムキューティーティー", "OLED": "オーレッド", "YAML": "ヤムル", "JSON": "ジェイソン", "HTTP": "エイチティーティーピー",
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


#: Abbreviations written with a full stop that ends no sentence (ver.2.1, vol. 3, Mr. Smith, etc.;
#: No.5 is read by quantities.sub_number_signs).
ABBREVIATIONS = {
    "ver": "バージョン", "vol": "ボリューム", "etc": "エトセトラ",
    "e.g": "例えば", "i.e": "つまり", "approx": "約", "fig": "図", "vs": "ブイエス",
    "mr": "ミスター", "mrs": "ミセス", "ms": "ミズ", "dr": "ドクター", "mt": "マウント", "st": "セント",
    "jr": "ジュニア", "inc": "インク", "ltd": "リミテッド", "co": "カンパニー",
}  # fmt: skip
#: An abbreviation of :data:`ABBREVIATIONS`, its full stop and the blanks after it.
ABBREVIATION_RE = re.compile(
    r"(?<![A-Za-z.])(" + "|".join(re.escape(a) for a in sorted(ABBREVIATIONS, key=len, reverse=True)) + r")\.[ \t]*",
    re.IGNORECASE,
)


def sub_abbreviations(text: str) -> str:
    """``ver.2.1`` → バージョン2.1, ``Mr. Smith`` → ミスターSmith: the full stop of an abbreviation is no sentence end.

    At the end of a line it ends the sentence too (``りんご、etc.``).
    """

    def read(m: re.Match[str]) -> str:
        at_line_end = m.end() == len(m.string) or m.string[m.end()] in "\r\n"
        return ABBREVIATIONS[m.group(1).lower()] + ("." if at_line_end else "")

    return ABBREVIATION_RE.sub(read, text)


def spell_letters(word: str) -> str:
    """``MQTT`` → エムキューティーティー."""
    return "".join(LETTER_NAMES.get(ch.upper(), "") for ch in word)


_KATAKANA_RE = re.compile(r"[\u30a1-\u30fa\u30fc]+")
#: Letters of the longest run read as a word; a longer one is no English word
#: (``hahahaha…``, ``eeee…``) and is spelled out letter by letter.
MAX_WORD_LETTERS = 40


class EnglishReader:
    """Katakana for English words: table → OpenJTalk's dictionary → e2k.

    The e2k models (about 13 MB, numpy only) are loaded on first use.  The
    readings cached here are dropped when a user dictionary is installed
    (they may come from OpenJTalk's dictionary; see :mod:`..state`).
    """

    def __init__(self, extra_readings: dict[str, str] | None = None) -> None:
        table = dict(WORD_READINGS)
        table.update(extra_readings or {})
        self._exact = {k: v for k, v in table.items()}
        self._folded: dict[str, str] = {}
        for key, value in table.items():
            self._folded.setdefault(key.casefold(), value)
        self._cache: dict[str, str] = {}
        self._generation = STATE.generation

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
        if self._generation != STATE.generation:
            self._generation = STATE.generation
            self._cache.clear()
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
            native = STATE.native_reading(word, whole_word=True) if len(word) <= MAX_WORD_LETTERS else None
            if native is not None:
                return native
            parts = [p for p in re.split(r"[-']", word) if p]
            if "'" in word and len(parts) > 1 and len(parts[-1]) <= 2:
                # don't, it's, let's: read as one word without the apostrophe.
                return self._read_part(word.replace("'", ""))
            return "".join(self.read(p) for p in parts)
        parts = _CAMEL_RE.split(word)
        if len(parts) > 1 and (len(word) > MAX_WORD_LETTERS or STATE.native_reading(word, whole_word=True) is None):
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
        native = STATE.native_reading(word, whole_word=True)
        if native is not None:
            return native
        if is_caps and len(word) < MIN_CAPITALS_WORD:
            return spell_letters(word)  # USB, NHK: an acronym
        c2k, ngram = STATE.e2k_models()
        lower = word.lower()
        # An English word (WARNING, SESAME), else a Japanese name in romaji (YOASOBI), else a name
        # spelled in English letters that e2k's model does not take for English but that can be said
        # (UNIQLO, ATLUS), else an acronym (HDMI, KDDI: it cannot be said).
        english = ngram(lower)
        said = "".join(_KATAKANA_RE.findall(c2k(lower))) if english or sayable(lower) else ""
        return (said if english else "") or romaji_reading(word) or said or spell_letters(word)


#: Capitals shorter than this are an acronym unless a table or OpenJTalk's dictionary has them (USB, NHK, SIM);
#: from this length on they are read as a word when they can be said (YOASOBI, NASA, SESAME).
MIN_CAPITALS_WORD = 4

_ROMAJI_ROWS = {
    "": "アイウエオ", "k": "カキクケコ", "g": "ガギグゲゴ", "s": "サシスセソ", "z": "ザジズゼゾ", "t": "タチツテト",
    "d": "ダヂヅデド", "n": "ナニヌネノ", "h": "ハヒフヘホ", "b": "バビブベボ", "p": "パピプペポ", "m": "マミムメモ",
    "r": "ラリルレロ", "y": "ヤ ユ ヨ", "w": "ワ   ヲ",
}  # fmt: skip
_ROMAJI_PALATAL = {
    "ky": "キ", "gy": "ギ", "sh": "シ", "j": "ジ", "ch": "チ", "ny": "ニ", "hy": "ヒ", "by": "ビ", "py": "ピ", "my": "ミ", "ry": "リ",
}  # fmt: skip
_SMALL_YA = {"a": "ャ", "u": "ュ", "o": "ョ", "e": "ェ"}


def _romaji_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for consonant, row in _ROMAJI_ROWS.items():
        for vowel, kana in zip("aiueo", row):
            if kana != " ":
                table[consonant + vowel] = kana
    for consonant, base in _ROMAJI_PALATAL.items():
        for vowel, small in _SMALL_YA.items():
            table[consonant + vowel] = base + small
        table[consonant + "i"] = base
    table.update({"tsu": "ツ", "fu": "フ", "wo": "ヲ"})
    return table


_ROMAJI = _romaji_table()
_ROMAJI_SYLLABLE_RE = re.compile(
    "|".join(sorted(_ROMAJI, key=len, reverse=True)) + r"|n(?![aiueoy])|([kgsztdhbpmrjcf])(?=\1)"
)


def romaji_reading(word: str) -> str | None:
    """Katakana for a word spelled in Hepburn romaji (YOASOBI ヨアソビ, Daikin ダイキン), or None if it is not."""
    lower = word.lower()
    out: list[str] = []
    position = 0
    while position < len(lower):
        found = _ROMAJI_SYLLABLE_RE.match(lower, position)
        if found is None:
            return None
        syllable = found.group(0)
        out.append("ン" if syllable == "n" else "ッ" if found.group(1) else _ROMAJI[syllable])
        position = found.end()
    reading = "".join(out)
    return reading if reading and reading[-1] != "ッ" else None


#: Consonant letters a syllable can start with (before its vowel: English's and romaji's, kyo ryo tsu)
#: and end with (after it).
_ONSETS = frozenset(
    "b c d f g h j k l m n p q r s t v w y z "
    "bl br ch cl cr dr fl fr gl gr kl kn kr ph pl pr qu sc sh sk sl sm sn sp st sw th tr tw wh wr "
    "by gy hy ky my ny py ry ts chr sch scr shr spl spr squ str thr".split()
)  # fmt: skip
_CODAS = frozenset(
    "b c d f g h k l m n p q r s t v w x y z "
    "ck ct ft gh ld lf lk ll lm lp ls lt mb mp nd ng nk ns nt ps pt rb rc rd rf rg rk rl rm rn rp rs rt "
    "sh sk sp ss st th ts tz ch xt".split()
)  # fmt: skip
_VOWEL_RUN_RE = re.compile(r"[aeiou]+|(?<=[^aeiou])y(?![aeiou])")


def sayable(lower: str) -> bool:
    """Can these letters be said as one word, syllable by syllable (uniqlo, atlus), or only spelled (hdmi, kddi, mysql)?

    Each run of consonants must be one a syllable can start with (at the
    start), end with (at the end), or, between two vowels, an ending, a start
    or both (lexus, atlus); runs of vowels are at most two letters (not ieee).
    """
    vowels = list(_VOWEL_RUN_RE.finditer(lower))
    if not vowels or any(len(v.group(0)) > 2 for v in vowels):
        return False
    first, last = lower[: vowels[0].start()], lower[vowels[-1].end() :]
    if (first and first not in _ONSETS) or (last and last not in _CODAS):
        return False
    for before, after in zip(vowels, vowels[1:]):
        run = lower[before.end() : after.start()]
        if run and not any(
            (not run[:cut] or run[:cut] in _CODAS) and (not run[cut:] or run[cut:] in _ONSETS)
            for cut in range(len(run) + 1)
        ):
            return False
    return True


# Boundaries inside CamelCase words: SwitchBot → Switch|Bot, ESPHome → ESP|Home.
_CAMEL_RE = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


_LATIN_WORD_RE = re.compile(r"[A-Za-z]+(?:[-'’][A-Za-z]+)*")


def sub_english(text: str, english: EnglishReader) -> str:
    """Latin words in katakana (English weekday names in Japanese)."""

    def word(m: re.Match[str]) -> str:
        w = m.group(0).replace("’", "'")
        weekday = _WEEKDAYS_EN.get(w.lower().rstrip("."))
        if weekday and (w[0].isupper() or len(w) > 3):
            return weekday
        return english.read(w)

    return _LATIN_WORD_RE.sub(word, text)


__all__ = [
    "LETTER_NAMES",
    "MAX_WORD_LETTERS",
    "MIN_CAPITALS_WORD",
    "WORD_READINGS",
    "EnglishReader",
    "romaji_reading",
    "spell_letters",
    "sub_english",
]
