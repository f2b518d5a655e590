"""hayakoe, the test oracle, on our G2P: both frontends then start from the same analysis.

hayakoe calls ``pyopenjtalk.run_frontend`` and ``pyopenjtalk.make_label``
by name.  Our G2P is pyopenjtalk-plus called one way, with our corrections
after it (wyoming_hayakoe/text/openjtalk.py, corrections/); hayakoe's
module gets exactly that in place of ``pyopenjtalk``, so the comparisons
test what they are for: that everything after the G2P is the same.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

from wyoming_hayakoe.text import openjtalk


def use_our_g2p() -> None:
    """Point hayakoe's G2P module at ours (whole texts, as hayakoe passes them: one call each)."""
    g2p = importlib.import_module("hayakoe.nlp.japanese.g2p")
    g2p.pyopenjtalk = SimpleNamespace(
        run_frontend=lambda text: openjtalk.analyse(openjtalk.clean(text)),
        make_label=lambda features: openjtalk.make_label(features),
    )
