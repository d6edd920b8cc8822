"""Every prompt the study sends, as named, versioned constants.

A prompt's ``version`` changes whenever its text changes, and every ledger record and output row
carries it, so results produced with different wordings are never mixed up. Prompts are written
for this repository, following the paper's description of each stage (study §2-§4).

Templates use ``str.format`` fields; :meth:`Prompt.messages` fills them and returns the chat
messages in the order the API receives them.
"""

from __future__ import annotations

import string
from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    """A named, versioned chat prompt: an optional system message and a user template."""

    name: str
    version: str
    system: str
    user: str

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def fields(self) -> set[str]:
        found = set()
        for text in (self.system, self.user):
            found |= {f for _, f, _, _ in string.Formatter().parse(text) if f}
        return found

    def messages(self, **values: str) -> tuple[tuple[str, str], ...]:
        """``((role, content), ...)``; a missing or unexpected field is an error naming it."""
        expected = self.fields()
        missing, extra = expected - set(values), set(values) - expected
        if missing or extra:
            raise KeyError(
                f"prompt {self.id}: missing fields {sorted(missing)}, unexpected {sorted(extra)}"
            )
        out: list[tuple[str, str]] = []
        if self.system:
            out.append(("system", self.system.format(**values)))
        out.append(("user", self.user.format(**values)))
        return tuple(out)


PROMPTS: dict[str, Prompt] = {}


def register(prompt: Prompt) -> Prompt:
    if prompt.name in PROMPTS and PROMPTS[prompt.name] != prompt:
        raise ValueError(f"prompt {prompt.name!r} is registered twice with different text")
    PROMPTS[prompt.name] = prompt
    return prompt


def get(name: str) -> Prompt:
    if name not in PROMPTS:
        raise KeyError(f"unknown prompt {name!r}; known: {', '.join(sorted(PROMPTS))}")
    return PROMPTS[name]


# --- Stage prompts are defined below, one block per stage, each registered by name. ----------
