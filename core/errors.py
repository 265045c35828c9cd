"""Errors raised by the engine. Every user-facing problem is a ValueError that names the parameter."""

from __future__ import annotations


class ParameterError(ValueError):
    """A parameter is missing, of the wrong type, or outside its allowed range."""

    def __init__(self, name: str, message: str) -> None:
        self.parameter = name
        super().__init__(f"{name}: {message}")


class Refusal(ParameterError):
    """A method refusing a mode it has no form for (causal=True on Nystrom): the message is a sentence in words, for
    a class to read as it is ("Nystrom cannot run under the causal mask: ..."); ``parameter`` still names the knob."""

    def __init__(self, name: str, sentence: str) -> None:
        self.parameter = name
        ValueError.__init__(self, sentence)


class ConfigError(ParameterError):
    """An ``ATTN_EXPLORER_*`` environment variable (``core.config``) holds a value outside its allowed range.

    ``problems``: (variable, value, allowed) for each bad variable; the message names all of them."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        if not problems:
            raise ValueError("ConfigError needs at least one problem")
        self.problems = list(problems)
        self.parameter = problems[0][0]
        lines = [f"{variable}: {raw!r} is not allowed; it must be {allowed}" for variable, raw, allowed in problems]
        ValueError.__init__(self, "\n".join(lines))  # every line names its variable, as ParameterError's message does
