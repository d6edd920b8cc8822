"""Offline stand-ins for the mem0 library's two chat calls (``memcost.systems.mem0_library``).

They read the request as mem0 sends it (the messages, not a payload of ours) and answer in the
format mem0 parses, so the real library code runs end to end with no key:

- fact extraction (the custom extraction prompt; mem0's user message is ``Input:`` and one
  ``user: <speaker>: <text>`` line per message, the first line the session date): the
  informative sentences of each message as facts, ``{"facts": [...]}``;
- the update phase (mem0's update prompt, with the stored memories and the new facts as JSON
  between triple backticks): the lexical rule of the memory stage
  (:func:`memcost.offline.update.lexical_decision`) per new fact against the stored ones, as
  ``{"memory": [{"id", "text", "event", "old_memory"}]}`` with mem0's events ADD, UPDATE,
  NONE.
"""

from __future__ import annotations

import ast
import json
import re

from memcost.llm import ChatRequest
from memcost.offline.extract import informative_sentence, offline_fact_text
from memcost.offline.update import lexical_decision
from memcost.text import split_sentences

NO_SESSION_DATE = "-"  # the date line of a session without a date (PersonaMem's)
_LINE = re.compile(r"^(?:user|assistant): ([^:]{1,40}): (.*)$")
_DATE = re.compile(r"^user: Session date: (\S+)$")
_FENCED = re.compile(r"```\s*(.*?)\s*```", re.DOTALL)


def _user_text(request: ChatRequest) -> str:
    return "\n".join(m["content"] for m in request.payload["messages"] if m["role"] == "user")


def offline_mem0_extract(request: ChatRequest) -> str:
    """Each informative sentence of each message, as a fact naming its speaker and date."""
    when, facts = None, []
    for line in _user_text(request).splitlines():
        line = line.strip()
        if found := _DATE.match(line):
            when = None if found.group(1) == NO_SESSION_DATE else found.group(1)
            continue
        if found := _LINE.match(line):
            speaker, text = found.groups()
            facts += [
                offline_fact_text(s, speaker, when)
                for s in split_sentences(text)
                if informative_sentence(s)
            ]
    return json.dumps({"facts": facts}, ensure_ascii=False)


def _literal(block: str) -> list:
    """A list mem0 printed into its prompt: JSON, or Python's repr of one (single quotes)."""
    try:
        return json.loads(block)
    except json.JSONDecodeError:
        return ast.literal_eval(block)


def offline_mem0_update(request: ChatRequest) -> str:
    """mem0's update phase by the lexical rule: a near-duplicate of a stored memory changes
    nothing, a fact about the same thing updates it, anything else is added."""
    blocks = [
        _literal(b) for b in _FENCED.findall(_user_text(request)) if b.strip().startswith("[")
    ]
    stored = blocks[0] if len(blocks) > 1 else []
    new = blocks[-1] if blocks else []
    names = sorted({m.split(" said")[0].split(", ")[-1] for m in new if " said" in m})
    out = [{"id": m["id"], "text": m["text"], "event": "NONE"} for m in stored]
    by_id = {m["id"]: m for m in out}
    for i, fact in enumerate(new):
        verdicts = [(lexical_decision(fact, m["text"], names=names), m) for m in stored]
        if any(v == "NOOP" for v, _ in verdicts):
            continue
        update = next((m for v, m in verdicts if v == "UPDATE"), None)
        if update is not None and by_id[update["id"]]["event"] == "NONE":
            by_id[update["id"]].update(event="UPDATE", text=fact, old_memory=update["text"])
        else:
            out.append({"id": str(len(stored) + i), "text": fact, "event": "ADD"})
    return json.dumps({"memory": out}, ensure_ascii=False)
