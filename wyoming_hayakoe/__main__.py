"""`python -m wyoming_hayakoe`: the server, as `wyoming-hayakoe` (see cli/serve.py)."""

from .cli.serve import run

if __name__ == "__main__":
    run()
