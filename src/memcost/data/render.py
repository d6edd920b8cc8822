"""The long-context rendering: one user's history as the long-context baseline sends it.

Sessions in order, each headed by its number and its spoken date, each turn ``Speaker: text``,
a shared photo described after the text (study §3.2). Notebook 00 counts the tokens of this
rendering (what a long-context request is billed for); notebook 03 builds its prompts from it.
"""

from __future__ import annotations

import pandas as pd

from memcost.text import spoken_datetime, with_caption

# Between two sessions of a rendered history: a blank line.
SESSION_SEPARATOR = "\n\n"


def in_order(conversation: pd.DataFrame) -> pd.DataFrame:
    """The turns in conversation order (``position``), sorted only when they are not."""
    positions = conversation["position"]
    return (
        conversation
        if positions.is_monotonic_increasing
        else conversation.sort_values("position", kind="stable")
    )


def session_header(number: int, when: str | None) -> str:
    """``[Session 3 · Monday 8 May 2023, 13:56]`` (``[Session 3]`` without a date)."""
    if not when:
        return f"[Session {number}]"
    return f"[Session {number} · {spoken_datetime(when)}]"


def render_history(conversation: pd.DataFrame, *, captions: bool = True) -> str:
    """One user's history as the long-context baseline sends it (study §3.2): sessions in
    order, each headed by its date and time, each turn ``Speaker: text``; a shared image is
    described as ``[shares a photo: <caption>]`` after the text.

    Sessions keep their own numbers (``session_index + 1``), so a window over the last turns
    still says which session they come from.
    """
    return SESSION_SEPARATOR.join(
        text for _, text in render_sessions(conversation, captions=captions)
    )


def render_sessions(conversation: pd.DataFrame, *, captions: bool = True) -> list[tuple[int, str]]:
    """:func:`render_history` one session at a time: ``[(session_index, text), ...]`` in order,
    joined by :data:`SESSION_SEPARATOR` they are the history. Long-context prompts that keep only
    some sessions (the newest ones, or the evidence) are built from these pieces, so each session
    is rendered and counted once."""
    ordered = in_order(conversation)
    out: list[tuple[int, str]] = []
    lines: list[str] = []
    current: int | None = None
    for session, when, speaker, text, caption in zip(
        ordered["session_index"].tolist(),
        ordered["session_datetime"].tolist(),
        ordered["speaker"].tolist(),
        ordered["text"].tolist(),
        ordered["image_caption"].tolist(),
        strict=True,
    ):
        if session != current:
            if current is not None:
                out.append((current, "\n".join(lines)))
            current, lines = int(session), []
            lines.append(session_header(int(session) + 1, when if isinstance(when, str) else None))
        line = f"{speaker}: {text}"
        lines.append(with_caption(line, caption) if captions else line)
    if current is not None:
        out.append((current, "\n".join(lines)))
    return out
