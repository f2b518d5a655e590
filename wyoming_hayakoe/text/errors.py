"""What the text layer raises for text it cannot use, under one base class.

Every error here is a ``ValueError`` (bad input, not a bug), and a
:class:`TextError`, so a caller can catch all of them or just the one it
handles (the engine catches :class:`UnpronounceableText` and skips the
sentence).  This module imports nothing, so every module of both layers can
raise these without importing each other.
"""

from __future__ import annotations


class TextError(ValueError):
    """Text (or a user dictionary) the text layer cannot use; the message says why."""


class UnpronounceableText(TextError):
    """The text cannot be turned into a phone sequence.

    Raised where the reference implementation fails (on inconsistent
    OpenJTalk analyses, malformed accent phrases, numbers too large to
    spell out, characters the BERT tokenizer drops, …).
    """


class NotKatakana(TextError):
    """A reading that is neither katakana nor punctuation."""


class UserDictionaryError(TextError):
    """A user dictionary that cannot be used; the message lists every problem."""


__all__ = ["NotKatakana", "TextError", "UnpronounceableText", "UserDictionaryError"]
