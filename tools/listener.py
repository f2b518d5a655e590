"""A listener who plays a TTS answer in real time from its first chunk, and where playback had to wait.

Playback starts when the first chunk arrives and runs at the audio's own
rate; when it reaches audio that has not arrived yet, the listener waits
(an underrun) until the next chunk comes.

Where a wait falls is read from the audio itself, the same way for any
server: it is *at a sentence boundary* when playback stopped inside a pause,
a run of near-silence (every sample within 2 % of the answer's peak) at least
`PAUSE_SECONDS` long around that point. Both our server and hayakoe put at
least 80 ms of silence between sentences (the previous sentence's own
trailing silence counts towards it), so every boundary is such a pause.
Any other wait is *mid-sentence*: the voice stops mid-word. A long pause
inside a sentence counts as a boundary too, which is how a wait there
sounds. Waits shorter than `min_wait`, which a player's buffer absorbs,
are not counted.

Where the listener knows each sentence's own audio (our server speaks each
sentence alike alone and inside a text), the boundaries are exact instead
(`sentence_spans`): a wait counts as mid-sentence wherever it falls inside a
sentence's audio, at a quiet moment too, and as a boundary only between
two sentences. A sentence that the server speaks in parts is one span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

SILENCE_OF_PEAK = 0.02
PAUSE_SECONDS = 0.07  # the servers' shortest pause is 80 ms; a little slack for rounding
MIN_WAIT_SECONDS = 0.01


@dataclass
class Listening:
    """What the listener heard: when playback ended, and how long it waited where."""

    heard_by: float  # seconds from the request until the last sample was played
    waits_mid_sentence: list[float] = field(default_factory=list)
    waits_at_boundaries: list[float] = field(default_factory=list)
    mid_sentence_at: list[float] = field(default_factory=list)  # seconds into the audio of each mid-sentence wait


def _in_pause(quiet: np.ndarray, position: int, rate: int) -> bool:
    """Whether the run of quiet samples around the point before sample `position` lasts a pause."""
    loud_before = np.flatnonzero(~quiet[:position])
    loud_after = np.flatnonzero(~quiet[position:])
    begin = int(loud_before[-1]) + 1 if loud_before.size else 0
    end = position + int(loud_after[0]) if loud_after.size else len(quiet)
    return end - begin >= PAUSE_SECONDS * rate


def _leading_zeros(audio: np.ndarray) -> int:
    loud = np.flatnonzero(audio)
    return int(loud[0]) if loud.size else len(audio)


def sentence_spans(answer: np.ndarray, sentences: Sequence[np.ndarray]) -> list[tuple[int, int]]:
    """[start, end) of each sentence's audio in `answer`, the int16 audio of a text whose sentences, spoken
    alone, give `sentences`: between two sentences the server puts zeros only (its pause), so each sentence
    starts where the zeros after the one before end, less the zeros it starts with itself.

    Raises ValueError if a sentence's audio is not where it should be (not the same text or settings).
    """
    spans: list[tuple[int, int]] = []
    end = 0
    for sentence in sentences:
        start = end if not spans else end + _leading_zeros(answer[end:]) - _leading_zeros(sentence)
        found = answer[start : start + len(sentence)].astype(np.int32)
        if len(found) != len(sentence) or np.mean(np.abs(found - sentence.astype(np.int32)) <= 2) < 0.9:
            raise ValueError(f"sentence {len(spans) + 1} is not at samples {start}-{start + len(sentence)}")
        spans.append((start, end := start + len(sentence)))
    return spans


def _inside(spans: Sequence[tuple[int, int]], position: int) -> bool:
    return any(start < position < end for start, end in spans)


def listen(
    chunks: Sequence[tuple[float, np.ndarray]],
    rate: int,
    min_wait: float = MIN_WAIT_SECONDS,
    spans: Sequence[tuple[int, int]] | None = None,
) -> Listening:
    """Play `chunks` ((arrival seconds since the request, mono samples), in order) at `rate`; with the
    sentences' `spans` (`sentence_spans`), a wait is mid-sentence wherever it falls inside one."""
    if not chunks:
        return Listening(heard_by=0.0)
    audio = np.concatenate([np.abs(np.asarray(samples, dtype=np.float64)) for _, samples in chunks])
    quiet = audio <= SILENCE_OF_PEAK * float(audio.max(initial=0.0))
    result = Listening(heard_by=chunks[0][0])
    position = 0
    for arrival, samples in chunks:
        wait = arrival - result.heard_by
        if position and wait >= min_wait:
            at_boundary = not _inside(spans, position) if spans is not None else _in_pause(quiet, position, rate)
            (result.waits_at_boundaries if at_boundary else result.waits_mid_sentence).append(wait)
            if not at_boundary:
                result.mid_sentence_at.append(position / rate)
        result.heard_by = max(result.heard_by, arrival) + len(samples) / rate
        position += len(samples)
    return result
