"""Wyoming text-to-speech server for Japanese HayaKoe voices."""

import os

# onnxruntime >= 1.29 can send usage telemetry; a voice assistant must not.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"
