"""Synthesis engine: shared BERT, per-voice synthesizers, sentence-by-sentence audio.

Import from the submodules (`engine.engine.Engine`, `engine.settings.SynthesisSettings`);
this package imports nothing itself, so light tools can use the settings
without loading onnxruntime and transformers.
"""
