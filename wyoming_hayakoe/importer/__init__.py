"""Style-Bert-VITS2 JP-Extra checkpoints to HayaKoe-layout ONNX voices (needs torch).

Only `wyoming-hayakoe-import` and the development tools import this package;
the server runs without torch, and import-linter keeps it that way.
"""
