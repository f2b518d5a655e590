"""Model runtimes: what the engine needs of each model (models.py), and ONNX Runtime providing it."""
