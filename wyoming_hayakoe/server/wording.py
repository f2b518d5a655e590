"""Counts in log lines, worded as a reader expects ("1 sentence", "2 sentences")."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, in the plural (default: noun + "s") unless `count` is 1."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
