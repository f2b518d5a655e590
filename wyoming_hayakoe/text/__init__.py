"""Japanese text → model inputs, in two layers over one guarded OpenJTalk.

* :mod:`.hayakoe`: the HayaKoe-compatible frontend (normalisation, G2P,
  sentences); its output must stay identical to HayaKoe's.
* :mod:`.rewrite`: our own rewriting of Home Assistant and LLM text into
  plain Japanese, applied before the frontend.
* :mod:`.openjtalk` (the only way into pyopenjtalk),
  :mod:`.user_dictionary` and :mod:`.errors` are shared by both.
"""

from .errors import TextError, UnpronounceableText
from .hayakoe import Frontend, Phonemes, normalize_text, split_sentences

__all__ = [
    "Frontend",
    "Phonemes",
    "TextError",
    "UnpronounceableText",
    "normalize_text",
    "split_sentences",
]
