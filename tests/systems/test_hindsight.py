"""The Hindsight memory system's parts that run without Hindsight: its prompts told apart, the
stand-ins in its formats, sessions as items, where each memory came from, and the environment
check. (The server itself, end to end: tests/test_hindsight_library.py, marked slow.)"""

from __future__ import annotations

import json
import stat
from types import SimpleNamespace

import pandas as pd
import pytest

from memcost_systems import hindsight_library
from memcost_systems.hindsight_library import memory_positions, route, session_items
from memcost_systems.offline import offline_hindsight_consolidate, offline_hindsight_retain

RETAIN_USER = (
    "Return valid json only.\n\nExtract facts from the following chunk.\n\nChunk: 1/1\n"
    "Event Date: Monday, May 08, 2023 (2023-05-08T13:56:00+00:00)\n"
    "Context: a conversation between Caroline and Melanie\n\nContent:\n"
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.\n"
    "Melanie: Thanks! I just signed up for a pottery class with Anna."
)


def body(system: str, user: str) -> dict:
    return {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "response_format": {"type": "json_object"},
    }


def answer(request_body: dict) -> dict:
    request = SimpleNamespace(payload={"messages": request_body["messages"]})
    return json.loads(route(request_body).offline(request))


def consolidation(new: list[str], existing: list[dict]) -> dict:
    user = (
        "Return valid json only.\n\n## MISSION\n\nTrack anything notable.\n\n## INPUT\n\n"
        "### New facts\n\n"
        + "\n".join(new)
        + "\n\n### Existing observations\n\n"
        + json.dumps(existing)
    )
    return answer(body("You are a memory consolidation system. Synthesize ...", user))


def test_hindsights_calls_are_told_apart_by_their_prompts():
    retain = route(body("Extract SIGNIFICANT facts from text. Be SELECTIVE ...", "x"))
    assert (retain.stage, retain.step) == ("extract", "hindsight/retain")
    assert retain.offline is offline_hindsight_retain
    merge = route(body("You are a memory consolidation system. Synthesize ...", "x"))
    assert (merge.stage, merge.step) == ("update", "hindsight/consolidate")
    assert merge.offline is offline_hindsight_consolidate
    with pytest.raises(ValueError, match="does not know"):
        route(body("You answer questions with the memory bank.", "x"))


def dedup_body(new: str, existing: str) -> dict:
    """Consolidation's merge-or-keep request: one user message, no system prompt, opened by
    Hindsight's JSON hint and the reply's schema (Hindsight 1.1.0 sends it once a bank holds an
    observation close to a new one)."""
    text = (
        "Return valid json only.\n\n\n\nYou must respond with valid JSON matching this schema:"
        '\n{"properties": {"action": {}}}\n\n'
        "You reconcile long-term memory observations. A NEW observation is about to be stored, "
        f"and it is highly similar to an EXISTING one:\n\n[NEW] {new}\n[EXISTING] {existing}\n\n"
        "Respond with ONLY one valid JSON object ..."
    )
    return {"messages": [{"role": "user", "content": text}]}


def test_consolidations_dedup_verdict_is_routed_and_answered_offline():
    same = dedup_body(
        "Ana said: I go to yoga every Tuesday", "Ana said: I go to yoga every Tuesday."
    )
    step = route(same)
    assert (step.stage, step.step) == ("update", "hindsight/dedup")
    assert answer(same) == {
        "action": "merge",
        "text": "Ana said: I go to yoga every Tuesday.",
        "reason": "the same fact (lexical rule)",
    }
    other = answer(dedup_body("Ana said: my sister lives in Lisbon", "Ana said: I go to yoga"))
    assert (other["action"], other["text"]) == ("keep", "")


def test_the_retain_stand_in_answers_in_hindsights_fact_format():
    facts = answer(body("Extract SIGNIFICANT facts from text.", RETAIN_USER))["facts"]
    assert [f["who"] for f in facts] == ["Caroline", "Melanie"]
    first = facts[0]
    assert set(first) == {"what", "when", "where", "who", "why", "fact_type", "entities"}
    assert first["what"] == "I went to a LGBTQ support group yesterday and it was so powerful."
    assert (first["when"], first["fact_type"]) == ("2023-05-08", "world")
    assert facts[1]["entities"] == ["Melanie", "Anna"]


def test_consolidation_updates_one_speakers_observation_and_creates_the_rest():
    yoga = (
        "[11111111-1111-1111-1111-111111111111] I go to yoga three times a week now. | "
        "Involving: Ana (mentioned_at=2023-04-11)"
    )
    ben = (
        "[22222222-2222-2222-2222-222222222222] I go to yoga three times a week now. | "
        "Involving: Ben (mentioned_at=2023-04-11)"
    )
    existing = [{"id": "obs-1", "text": "Ana said: I go to yoga twice a week.", "proof_count": 1}]
    out = consolidation([yoga, ben], existing)
    assert out["deletes"] == []
    assert out["updates"] == [
        {
            "observation_id": "obs-1",
            "text": "Ana said: I go to yoga three times a week now.",
            "source_fact_ids": ["11111111-1111-1111-1111-111111111111"],
            "reason": "the same facet as the existing observation (lexical rule)",
        }
    ]
    # the same words from another speaker are another person's fact
    assert [c["text"] for c in out["creates"]] == ["Ben said: I go to yoga three times a week now."]


def turns() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "conversation_id": "u",
            "position": [0, 1, 2],
            "speaker": ["Ana", "Ben", "Ana"],
            "role": "user",
            "text": ["I go to yoga twice a week.", "Nice, I adopted a beagle.", "I moved."],
            "session_index": [0, 0, 1],
            "session_id": None,
            "session_datetime": ["2023-05-08T13:56:00", "2023-05-08T13:56:00", None],
        }
    )


def test_sessions_become_items_and_memories_find_their_turns():
    items, lines = session_items(turns())
    assert items == [
        {
            "content": "Ana: I go to yoga twice a week.\nBen: Nice, I adopted a beagle.",
            "context": "a conversation between Ana and Ben",
            "document_id": "session-0",
            "timestamp": "2023-05-08T13:56:00",
        },
        {
            "content": "Ana: I moved.",
            "context": "a conversation between Ana",
            "document_id": "session-1",
        },  # no date, no timestamp
    ]
    memories = [
        {"id": "f1", "text": "Ben adopted a beagle. | Involving: Ben", "document_id": "session-0"},
        {"id": "f2", "text": "Something else entirely | When: x", "document_id": "session-0"},
        {
            "id": "o1",
            "text": "Ben has a dog.",
            "fact_type": "observation",
            "source_memory_ids": ["f1"],
            "document_id": None,
        },
    ]
    found = memory_positions(memories, lines)
    assert found == {"f1": [1], "f2": [0, 1], "o1": [1]}  # f2 matches no line: its session


def test_a_missing_or_broken_hindsight_environment_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCOST_HINDSIGHT_PYTHON", str(tmp_path / "none" / "python"))
    with pytest.raises(ValueError, match=r"^memory system hindsight runs in its own environment"):
        hindsight_library.ENVIRONMENT.version()
    fake = tmp_path / "python"
    fake.write_text(  # Hindsight 1.1.0 beside a dateparser that breaks its temporal search
        '#!/bin/sh\ncase "$*" in *dateparser*) echo 1.5.0;; *) echo 1.1.0;; esac\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("MEMCOST_HINDSIGHT_PYTHON", str(fake))
    with pytest.raises(
        ValueError,
        match=r"^dateparser 1\.5\.0 in hindsight's environment: .* make setup-hindsight "
        r"installs dateparser<1\.5\.0$",
    ):
        hindsight_library.ENVIRONMENT.version()


STAND_IN_SERVER = """#!{python}
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])

class Handler(http.server.BaseHTTPRequestHandler):
    def _answer(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{{}}")

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def test_a_server_that_dies_is_named_with_how_it_ended_and_its_log(tmp_path):
    # a killed hindsight-api used to surface as a bare URLError that stopped notebook 01; now
    # it is a RuntimeError saying the server ended, which fails the user being built
    import signal
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "hindsight-api"
    script.write_text(STAND_IN_SERVER.format(python=sys.executable), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "hindsight.log"
    with hindsight_library.Server(bin_dir / "python", {}, log) as server:
        assert server.call("POST", "/v1/default/banks/u/memories", {"items": []}) == {}
        assert server.gone() is None
        server._process.send_signal(signal.SIGKILL)
        server._process.wait()
        with pytest.raises(RuntimeError) as info:
            server.call("POST", "/v1/default/banks/u/memories", {"items": []})
    message = str(info.value)
    assert message.startswith(f"the Hindsight server ended (killed by signal 9; its log: {log})")
    assert "POST /v1/default/banks/u/memories" in message and "\n" not in message


def test_a_killed_replays_serving_folder_is_removed_by_the_next(tmp_path):
    import os
    import subprocess
    import sys

    from memcost_systems.hindsight_library import serving_folder

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # a process that no longer runs, as a killed replay
    dead = tmp_path / f"{ended.pid}-abc"
    (dead / "pgvector" / "pgdata").mkdir(parents=True)
    running = tmp_path / f"{os.getppid()}-def"  # another replay, still running
    running.mkdir()
    new = serving_folder(tmp_path)
    assert not dead.exists() and running.exists()
    assert new.parent == tmp_path and new.name.startswith(f"{os.getpid()}-")
