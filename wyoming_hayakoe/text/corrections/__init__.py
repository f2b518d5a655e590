"""Our corrections to OpenJTalk's analysis, made before anything reads it (see :func:`..openjtalk.run_frontend`).

pyopenjtalk-plus reads better than plain OpenJTalk, but a few of its
outputs do not suit these voices or are still wrong in a way a rule can
tell.  Each correction works on the analysis (the NJD features: one word
each, with its reading ``pron``, accent ``acc``, morae ``mora_size`` and
whether it joins the accent phrase before, ``chain_flag``), so the word view
and the accent labels made from it agree, and both frontends (ours and
hayakoe's, in the tests) see the same G2P.  The rules, by what they correct:

* :mod:`.readings`: morae the voices cannot say, ``！``, 風 read as the wind;
* :mod:`.numerals`: numbers and counters, read and phrased as said;
* :mod:`.verb_phrases` and :mod:`.noun_phrases`: the accent phrases
  OpenJTalk chains where speech does not, and falls it misses, each cut
  made with :func:`.phrases.start_phrase`, which gives both parts the
  accent they have alone (:mod:`.phrases`: the phrase as OpenJTalk builds
  it).

:func:`correct` applies them all, in one fixed order.
"""

from __future__ import annotations

from collections.abc import Sequence

from .noun_phrases import flat_before_no, quotative_iu, separable_prefixes, unaccented_indefinites, you_falls_on_yo
from .numerals import no_rendaku_after_durations, numerals_as_said, one_phrase_numbers
from .phrases import Feature, lexical_accents, start_phrase
from .readings import NEW_MORAE, manner_fuu, pause_marks, respell_new_morae
from .verb_phrases import (
    adjectives_in_ku,
    copula_aru,
    light_verbs_after_case_particles,
    nai_before_conjunctions,
    past_of_unaccented_verbs,
    predicates_after_particles,
    requests_after_a_fall,
    voice_suffixes_keep_the_verbs_class,
)


def correct(features: list[Feature], lexical: Sequence[int | None]) -> list[Feature]:
    """Every correction of this package, in order (``lexical``: see :func:`lexical_accents`)."""
    features = past_of_unaccented_verbs(voice_suffixes_keep_the_verbs_class(features, lexical))
    features = respell_new_morae(pause_marks(features))
    features = copula_aru(light_verbs_after_case_particles(predicates_after_particles(features)))
    features = unaccented_indefinites(nai_before_conjunctions(features))
    features = you_falls_on_yo(flat_before_no(features))
    features = separable_prefixes(quotative_iu(features))
    features = adjectives_in_ku(requests_after_a_fall(features), lexical)
    return one_phrase_numbers(manner_fuu(numerals_as_said(no_rendaku_after_durations(features))))


__all__ = [
    "NEW_MORAE",
    "Feature",
    "adjectives_in_ku",
    "copula_aru",
    "correct",
    "lexical_accents",
    "flat_before_no",
    "light_verbs_after_case_particles",
    "nai_before_conjunctions",
    "manner_fuu",
    "numerals_as_said",
    "no_rendaku_after_durations",
    "one_phrase_numbers",
    "past_of_unaccented_verbs",
    "pause_marks",
    "predicates_after_particles",
    "quotative_iu",
    "requests_after_a_fall",
    "respell_new_morae",
    "separable_prefixes",
    "start_phrase",
    "unaccented_indefinites",
    "voice_suffixes_keep_the_verbs_class",
    "you_falls_on_yo",
]
