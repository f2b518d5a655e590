"""Our rewrite of Home Assistant and LLM text, the way a Japanese speaker reads it.

:class:`HomeAssistantReader` rewrites text *before* the HayaKoe-compatible
normaliser (:mod:`..hayakoe.normalize`) sees it, so that

* numbers are spelled in kanji the way they are said, with their unit or
  counter (:mod:`.numbers`, :mod:`.times`, :mod:`.quantities`): clock times
  (``7:30`` → 七時三十分), dates and weekdays (``12/24(火)`` →
  十二月二十四日、火曜日), durations (``1h 30m``), decimals (``23.5`` →
  二十三点五, ``3.14`` → 三点一四), negative numbers, thousands
  separators, ranges (``20〜25``, ``20-25`` → 二十から二十五), percentages,
  temperatures (``°C ℃ °F``), the units Home Assistant reports (``km/h kWh
  W V A mm hPa ppm µg/m³ lx dB GB`` …) and currencies (``円 ¥ $ € £``), with
  the counters OpenJTalk reads as other words fixed (``5分`` ゴフン, ``10分``
  ジュップン, ``1箱`` ひと箱 …);
* English words and device names become katakana (:mod:`.english`): a table
  of acronyms and brands read the Japanese way (``TV`` テレビ, ``Wi-Fi``
  ワイファイ, ``Apple TV`` アップルティーブイ …), then OpenJTalk's own
  dictionary, then the ``e2k`` English→katakana model; acronyms it cannot
  pronounce are spelled with Japanese letter names (``MQTT``
  エムキューティーティー);
* markdown (emphasis, headings, lists, tables, links, code), URLs, HTML tags
  and emoji are removed or read sensibly, and runs of punctuation are
  collapsed (:mod:`.markup`);
* the few Japanese words OpenJTalk misreads in this setting are respelled
  (:mod:`.japanese`): weather forecasts (``晴れのち曇り``, ``曇り一時雨``), a
  lone entity state (``窓センサー: 開`` カイ) and words OpenJTalk splits
  wrongly (``値`` アタイ, ``風量`` フウリョウ, ``去々年`` キョキョネン).

Text without digits, Latin letters or markdown characters (``* _ ` # | < >
[ ]``, ``~~``, rule lines) only gets that last fix, so HayaKoe conformance is
untouched for plain Japanese that OpenJTalk reads right (emoji and stray
symbols in it are dropped by the normaliser anyway).  Otherwise the text is
NFKC-normalised (as the normaliser would do first anyway) and rewritten.

For streamed text (LLM deltas), :mod:`.stream` has the sentence segmenter,
:func:`safe_to_split` (where a cut would break a token: ``23.5``, a URL, an
open code span, a list marker, a link) and the per-stream rewriter of
:meth:`HomeAssistantReader.stream`.  :func:`katakana_reading` shows what
will be spoken, as katakana.
"""

from .reader import HomeAssistantReader, katakana_reading, needs_rewrite
from .stream import SentenceStream, StreamRewriter, safe_to_split

__all__ = [
    "HomeAssistantReader",
    "SentenceStream",
    "StreamRewriter",
    "katakana_reading",
    "needs_rewrite",
    "safe_to_split",
]
