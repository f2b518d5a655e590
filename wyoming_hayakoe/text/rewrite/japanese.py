"""Japanese words OpenJTalk misreads here: forecasts, lone entity states, :data:`MISREAD_WORDS`."""

from __future__ import annotations

import re

from .. import openjtalk

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
    (("風", "カゼ"), ("量", "リョー")): ("フウ量", ()),  # 風量 カゼリョー
    (("光量", "ヒカリリョー"),): ("コウ量", ()),
    # 去 alone is the verb 去る: 去々年 サ サ トシ; 々 itself is expanded right by the G2P.
    (("去", "サ"), ("々", "サ"), ("年", "トシ")): ("キョキョ年", ()),
    (("去", "サ"), ("々", "サ"), ("年度", "ネンド")): ("キョキョ年度", ()),
    (("去", "サ"), ("々", "サ"), ("月", "ツキ")): ("キョキョゲツ", ()),
}
_MISREAD_CHARS = frozenset(run[0][0][0] for run in MISREAD_WORDS)


def _sub_misread_words(line: str) -> str:
    """Rewrite the words of :data:`MISREAD_WORDS` where OpenJTalk splits ``line`` that way."""
    if not any(ch in line for ch in _MISREAD_CHARS):
        return line
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


def sub_japanese(text: str) -> str:
    """Respell the Japanese OpenJTalk misreads: forecasts, lone states, :data:`MISREAD_WORDS`."""
    text = _STATE_RE.sub(lambda m: m.group(1) + STATE_READINGS[m.group(2)], text)
    text = _FORECAST_RE.sub(lambda m: m.group(1) + "、" + ("のち" if m.group(2) == "後" else m.group(2)), text)
    # Line by line, as the synthesiser reads them.
    return "\n".join(_sub_misread_words(line) for line in text.split("\n"))


__all__ = ["MISREAD_WORDS", "STATE_READINGS", "sub_japanese"]
