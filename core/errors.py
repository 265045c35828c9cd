"""Errors raised by the engine. Every user-facing problem is a ValueError that names the parameter."""

from __future__ import annotations


class ParameterError(ValueError):
    """A parameter is missing, of the wrong type, or outside its allowed range."""

    def __init__(self, name: str, message: str) -> None:
        self.parameter = name
        super().__init__(f"{name}: {message}")
