"""Memory building: segmentation, offline extraction, the update phase, resuming, and the JSON
path through the real client against the local OpenAI-compatible server."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fake_api.openai_server import CHAT_PATH, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client

from memcost import offline
from memcost.calls import read_calls
from memcost.llm import CallResult, ChatRequest, Usage, make_client
from memcost.memory import open_system
from memcost.memory.facts import FACT_SCHEMA, read_facts, read_updates, user_stats
from memcost.memory.mem0_style import MemoryBuilder, MemoryConfig
from memcost.memory.reader import answer_with_system
from memcost.memory.segments import (
    Candidate,
    Segment,
    candidates_from,
    extraction_request,
    parse_extraction,
    segment_conversation,
    split_text,
)
from memcost.memory.update import UserMemory, apply_decisions, parse_update, resolve_decisions

# --- Hand-made conversations --------------------------------------------------------------------


def make_turns(
    conversation_id: str, sessions: list[tuple[str | None, list[tuple]]]
) -> pd.DataFrame:
    """Rows of ``conversations.parquet``: ``sessions`` = [(iso date, [(speaker, role, text,
    extra...)])]; extra is an optional dict (dia_id, has_answer, image_caption, session_id)."""
    rows = []
    position = 0
    for s, (when, turns) in enumerate(sessions):
        for t, turn in enumerate(turns):
            speaker, role, text = turn[:3]
            extra = turn[3] if len(turn) > 3 else {}
            rows.append(
                {
                    "conversation_id": conversation_id,
                    "session_index": s,
                    "session_id": extra.get("session_id", f"session_{s + 1}"),
                    "session_datetime": when,
                    "turn_index": t,
                    "position": position,
                    "speaker": speaker,
                    "role": role,
                    "text": text,
                    "dia_id": extra.get("dia_id"),
                    "has_answer": extra.get("has_answer"),
                    "image_caption": extra.get("image_caption"),
                }
            )
            position += 1
    return pd.DataFrame(rows)


def yoga_conversation(conversation_id: str = "pair-1") -> pd.DataFrame:
    """Two people; Ana's yoga goes from twice to three times a week between the sessions."""
    return make_turns(
        conversation_id,
        [
            (
                "2023-03-01T10:00:00",
                [
                    ("Ben", "user", "Hi Ana! How have you been?", {"dia_id": "D1:1"}),
                    (
                        "Ana",
                        "user",
                        "Good! I started going to yoga twice a week at a studio near my office.",
                        {"dia_id": "D1:2"},
                    ),
                    (
                        "Ben",
                        "user",
                        "Nice! I adopted a beagle called Pretzel in January.",
                        {"dia_id": "D1:3"},
                    ),
                    ("Ana", "user", "Talk soon, take care!", {"dia_id": "D1:4"}),
                ],
            ),
            (
                "2023-04-11T18:30:00",
                [
                    (
                        "Ana",
                        "user",
                        "Quick news: I now go to yoga three times a week, I added a "
                        "Saturday class.",
                        {"dia_id": "D2:1"},
                    ),
                    ("Ben", "user", "Look at you!", {"dia_id": "D2:2"}),
                    (
                        "Ben",
                        "user",
                        "Pretzel ate a sock last week and the vet cost me 240 euros.",
                        {"dia_id": "D2:3"},
                    ),
                ],
            ),
        ],
    )


def offline_client(run):
    return make_client(run, progress=False)


def build(run, turns: pd.DataFrame, users: list[str] | None = None, client=None, **config):
    ds = run.dataset("locomo").ensure()
    client = client or offline_client(run)
    builder = MemoryBuilder(client, ds, MemoryConfig(dataset="locomo", **config))
    users = users or list(dict.fromkeys(turns["conversation_id"]))
    return ds, builder, builder.run(turns, users)


def answer_from_memory(client, ds, questions, turns, *, dataset="locomo", **settings):
    """Notebook 02's answers of the paper's memory: its system, through the common reader."""
    reading = {k: settings.pop(k) for k in ("reader_model", "mode") if k in settings}
    system = open_system("mem0_style", ds, dataset=dataset, settings=settings)
    try:
        return answer_with_system(client, system, questions, turns, **reading)
    finally:
        system.close()


# --- Segmentation -------------------------------------------------------------------------------


def test_segments_respect_both_limits_and_record_splits():
    long_sentences = "".join(f"Sentence number {k} is about the garden. " for k in range(500))
    no_spaces = "x" * 9_000
    turns = make_turns(
        "c1",
        [
            (
                "2023-01-01T09:00:00",
                [("system", "system", "You are helping a persona.")]
                + [("user", "user", f"Message {k}.") for k in range(23)],
            ),
            (
                "2023-01-02T09:00:00",
                [
                    ("user", "user", long_sentences),
                    ("assistant", "assistant", no_spaces),
                    ("user", "user", "Here it is.", {"image_caption": "a red bicycle"}),
                ],
            ),
        ],
    )
    segments, splits = segment_conversation(turns, batch_size=10, max_chars=8_000)

    first_session = [s for s in segments if s.session_index == 0]
    assert [len(s.messages) for s in first_session] == [10, 10, 3]  # system message left out
    assert all(m.role != "system" for s in segments for m in s.messages)
    assert all(len(s.messages) <= 10 and s.chars <= 8_000 for s in segments)
    session_of = dict(zip(turns["position"], turns["session_index"], strict=True))
    assert all({session_of[m.position] for m in s.messages} == {s.session_index} for s in segments)
    # Split messages: recorded, and their parts put back together give the message exactly.
    assert [(sp.position, sp.parts) for sp in splits] == [(24, 3), (25, 2)]
    assert splits[0].chars == len(long_sentences)
    parts = [m for s in segments for m in s.messages if m.position == 24]
    assert "".join(m.text for m in parts) == long_sentences
    assert [m.part for m in parts] == [0, 1, 2] and all(m.parts == 3 for m in parts)
    assert all(p.text.endswith(". ") for p in parts[:-1])  # cut after a sentence
    hard = [m.text for s in segments for m in s.messages if m.position == 25]
    assert hard == ["x" * 8_000, "x" * 1_000]
    caption = [m for s in segments for m in s.messages if m.position == 26][0]
    assert caption.text == "Here it is. [shares a photo: a red bicycle]"
    # Segments never span sessions, and carry the session's own date.
    assert {s.session_datetime for s in segments} == {"2023-01-01T09:00:00", "2023-01-02T09:00:00"}
    assert [s.index for s in segments] == list(range(len(segments)))


def test_split_text_is_lossless_and_bounded():
    text = "word " * 3_000 + "end"
    parts = split_text(text, 1_000)
    assert "".join(parts) == text
    assert all(len(p) <= 1_000 for p in parts) and len(parts) == 16
    assert split_text("short", 1_000) == ["short"]


# --- Offline extraction -------------------------------------------------------------------------


def extract_offline(segment: Segment) -> list[dict[str, Any]]:
    request = extraction_request(segment, dataset="test")
    return parse_extraction(offline.offline_extract(request))


def test_offline_extraction_keeps_the_persons_informative_sentences():
    segments, _ = segment_conversation(yoga_conversation())
    facts = extract_offline(segments[0])
    assert [f["text"] for f in facts] == [
        "On 1 March 2023, Ana said: I started going to yoga twice a week at a studio near my "
        "office.",
        "On 1 March 2023, Ben said: I adopted a beagle called Pretzel in January.",
    ]
    assert [(f["speaker"], f["turns"]) for f in facts] == [("Ana", [2]), ("Ben", [3])]
    candidates = candidates_from(segments[0], facts, backend="offline", prompt_version="v")
    assert [(c.positions, c.dia_ids) for c in candidates] == [((1,), ("D1:2",)), ((2,), ("D1:3",))]
    assert candidates[0].session_datetime == "2023-03-01T10:00:00"  # the session's, not today


def test_offline_extraction_uses_only_the_user_and_skips_the_persona_message():
    turns = make_turns(
        "lme-1",
        [
            (
                "2023-03-07T21:17:00",
                [
                    (
                        "user",
                        "user",
                        "I'm organising a surprise party for my sister Hannah's 30th. "
                        "How many balloons do I need?",
                        {"has_answer": True},
                    ),
                    (
                        "assistant",
                        "assistant",
                        "For a party of twelve I would suggest thirty balloons "
                        "in two colours, which looks festive without crowding the room.",
                    ),
                    ("user", "user", "Can you recommend a vet for my beagle Pretzel in Leeds?"),
                ],
            ),
        ],
    )
    facts = extract_offline(segment_conversation(turns)[0][0])
    assert [f["text"] for f in facts] == [
        "On 7 March 2023, the user said: I'm organising a surprise party for my sister "
        "Hannah's 30th.",
        "On 7 March 2023, the user said: Can you recommend a vet for my beagle Pretzel in Leeds?",
    ]
    persona = make_turns(
        "pm-1",
        [
            (
                None,
                [
                    (
                        "system",
                        "system",
                        "You are an AI assistant helping a user who loves climbing.",
                    ),
                    ("user", "user", "I go bouldering on Commercial Drive three evenings a week."),
                ],
            )
        ],
    )
    segment = segment_conversation(persona)[0][0]
    assert [m.role for m in segment.messages] == ["user"]
    assert [f["text"] for f in extract_offline(segment)] == [
        "The user said: I go bouldering on Commercial Drive three evenings a week."
    ]
    request = extraction_request(segment, dataset="personamem_v2")
    assert "Session date: unknown" in request.messages[-1][1]


# --- Update phase -------------------------------------------------------------------------------


def test_update_phase_turns_twice_then_three_times_a_week_into_one_current_fact(run_paths):
    ds, _, report = build(run_paths, yoga_conversation())
    facts = read_facts(ds)
    yoga = facts.loc[facts["text"].str.contains("yoga")]
    assert yoga["status"].tolist() == ["superseded", "active"]
    old, new = yoga.iloc[0], yoga.iloc[1]
    assert "three times a week" in new["text"] and "twice a week" in old["text"]
    assert old["superseded_by"] == new["fact_id"] and new["replaces"] == old["fact_id"]
    assert new["created_by"] == "UPDATE" and list(new["source_dia_ids"]) == ["D2:1"]
    updates = read_updates(ds)
    update = updates.loc[updates["decision"] == "UPDATE"].iloc[0]
    assert update["target_fact_id"] == old["fact_id"] and update["fact_id"] == new["fact_id"]
    assert old["fact_id"] in update["compared_fact_ids"]
    # Only active facts are in the index.
    table = pd.read_parquet(ds.memory / "index" / "pair-1.parquet")
    assert old["fact_id"] not in set(table["fact_id"]) and new["fact_id"] in set(table["fact_id"])
    assert len(table) == int((facts["status"] == "active").sum()) == 3
    assert report.update_calls == 1 and report.extraction_calls == 2


def test_update_phase_off_keeps_the_stale_fact(run_paths):
    ds, _, _ = build(run_paths, yoga_conversation(), update_phase=False)
    facts = read_facts(ds)
    assert facts.loc[facts["text"].str.contains("yoga"), "status"].tolist() == ["active", "active"]
    assert set(read_updates(ds)["decision"]) == {"ADD"}


@pytest.mark.parametrize(
    ("candidate", "stored", "expected"),
    [
        ("Ana goes to yoga three times a week.", "Ana goes to yoga twice a week.", "UPDATE"),
        ("Ana goes to yoga twice a week.", "Ana goes to yoga twice a week at a studio.", "NOOP"),
        ("Ana has three cats now.", "Ana has two cats.", "UPDATE"),
        ("Ana no longer plays the cello.", "Ana plays the cello in an orchestra.", "UPDATE"),
        ("Ana goes running twice a week.", "Ana goes to the gym three evenings a week.", None),
        ("Ana bought a camera for 300 euros.", "Ana uses the camera twice a week.", None),
    ],
)
def test_lexical_update_rule(candidate, stored, expected):
    assert offline.lexical_decision(candidate, stored, names=["Ana"]) == expected


def _candidate(text: str, n: int) -> Candidate:
    return Candidate(
        "u",
        1,
        n,
        text,
        "Ana",
        1,
        "s2",
        "2023-04-11T18:30:00",
        (10 + n,),
        (),
        None,
        "openai",
        "memory_extract@v1",
        vector=np.eye(8, dtype=np.float32)[n],
    )


def test_model_decisions_are_checked_before_they_are_applied():
    store = UserMemory("u")
    stored = [
        Candidate(
            "u",
            0,
            i,
            t,
            "Ana",
            0,
            "s1",
            "2023-03-01T10:00:00",
            (i,),
            (),
            None,
            "openai",
            "memory_extract@v1",
            vector=np.eye(8, dtype=np.float32)[i],
        )
        for i, t in enumerate(["Ana lives in Porto.", "Ana has a cat named Miso."])
    ]
    for c in stored:
        store.add(c, c.vector)
    candidates = [
        _candidate(t, i)
        for i, t in enumerate(
            [
                "Ana moved to Lisbon.",
                "Ana lives in Lisbon near the river.",
                "Ana's cat Miso died.",
                "Ana likes figs.",
                "Ana has a dog.",
            ]
        )
    ]
    reply = {
        "decisions": [
            {"fact": 1, "event": "UPDATE", "memory_id": "m1", "text": "Ana lives in Lisbon."},
            {"fact": 2, "event": "update", "memory_id": "m1", "text": "Ana lives in Lisbon."},
            {"fact": 3, "event": "DELETE", "memory_id": "m2", "text": None},
            {"fact": 4, "event": "UPDATE", "memory_id": "m9", "text": "nonsense"},
        ]
    }
    request = ChatRequest(
        "gpt-5-nano-2025-08-07",
        (("user", "x"),),
        "update",
        "memory_update@v1",
        reasoning_effort="low",
    )
    text = json.dumps(reply)
    result = CallResult(request, "h", "openai", "host", Usage(), False, 0.1, 1, text=text)
    result.parsed = parse_update(text)
    ids = {"m1": "u:f0", "m2": "u:f1"}
    decisions = resolve_decisions(candidates, [["u:f0", "u:f1"]] * 5, result, ids)
    records = apply_decisions(store, decisions, {0: np.ones(8, np.float32) / 2})
    assert [r["decision"] for r in records] == ["UPDATE", "UPDATE", "DELETE", "ADD", "ADD"]
    # The second UPDATE of the same memory follows it to the fact the first one wrote.
    assert [r["target_fact_id"] for r in records[:3]] == ["u:f0", "u:f2", "u:f1"]
    assert records[3]["note"] == "UPDATE named unknown memory 'm9': added"
    assert records[4]["note"] == "no decision returned: added"
    statuses = {f["fact_id"]: f["status"] for f in store.facts}
    assert statuses == {
        "u:f0": "superseded",
        "u:f1": "deleted",
        "u:f2": "superseded",
        "u:f3": "active",
        "u:f4": "active",
        "u:f5": "active",
    }
    assert store.current("u:f0") == "u:f3"
    merged = store.get("u:f2")
    assert merged["source_positions"] == [0, 10] and merged["created_by"] == "UPDATE"
    assert np.allclose(store.vector("u:f2"), 0.5)  # the merged text's own embedding


# --- Resuming -----------------------------------------------------------------------------------


def test_a_rerun_skips_finished_users_and_records_no_call_twice(run_paths):
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])
    ds, builder, first = build(run_paths, turns)
    calls = run_paths.calls.read_text().splitlines()
    facts = read_facts(ds)
    assert first.built == ["pair-1", "pair-2"] and first.resumed == []

    again = builder.run(turns, ["pair-1", "pair-2"])
    assert again.resumed == ["pair-1", "pair-2"] and again.built == []
    assert again.extraction_calls == 0
    assert run_paths.calls.read_text().splitlines() == calls

    # A user killed before its marker is redone, alone; its calls are not recorded again.
    (builder.user_dir("pair-2") / "done.json").unlink()
    redo = MemoryBuilder(offline_client(run_paths), ds, builder.config).run(
        turns, ["pair-1", "pair-2"]
    )
    assert redo.built == ["pair-2"] and redo.resumed == ["pair-1"]
    assert len(run_paths.calls.read_text().splitlines()) == len(calls)
    pd.testing.assert_frame_equal(read_facts(ds), facts)

    # Other settings: the finished users are built again.
    changed = MemoryBuilder(
        offline_client(run_paths), ds, MemoryConfig(dataset="locomo", update_top_k=3)
    )
    assert changed.run(turns, ["pair-1", "pair-2"]).built == ["pair-1", "pair-2"]


def test_a_user_without_turns_gets_an_empty_memory(run_paths):
    ds, builder, report = build(run_paths, yoga_conversation(), users=["pair-1", "ghost"])
    assert report.built == ["ghost", "pair-1"]
    stats = user_stats(ds, ["pair-1", "ghost"])
    assert stats.set_index("conversation_id").loc["ghost", "active_facts"] == 0
    assert len(pd.read_parquet(ds.memory / "index" / "ghost.parquet")) == 0


# --- The JSON path through the real client ------------------------------------------------------


def api_responder(body: dict[str, Any]) -> str:
    """Answers like a model would: extraction JSON citing turns, update decisions; a segment
    that mentions BROKEN always gets prose instead of JSON."""
    system = body["messages"][0]["content"]
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if system.startswith("You keep the long-term memory"):
        if "BROKEN" in user:
            return "Sorry, I would rather describe the facts in prose."
        if "three times" in user:
            return json.dumps(
                {
                    "facts": [
                        {
                            "text": "Ana goes to yoga three times a week.",
                            "speaker": "Ana",
                            "turns": [1],
                        }
                    ]
                }
            )
        return json.dumps(
            {
                "facts": [
                    {"text": "Ana goes to yoga twice a week.", "speaker": "Ana", "turns": [2]},
                    {"text": "Ben has a beagle named Pretzel.", "speaker": "ben", "turns": []},
                ]
            }
        )
    if system.startswith("You keep a personal assistant's long-term memory consistent"):
        line = next(ln for ln in user.splitlines() if "twice a week" in ln)
        short = line.split("]")[0].strip("[")
        return json.dumps(
            {
                "decisions": [
                    {
                        "fact": 1,
                        "event": "UPDATE",
                        "memory_id": short,
                        "text": "Ana goes to yoga three times a week "
                        "(twice a week until April 2023).",
                    }
                ]
            }
        )
    if system.startswith("You answer a question about a person"):
        return "Three times a week."
    raise AssertionError(f"unexpected prompt: {system[:60]}")


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY, responder=api_responder) as srv:
        yield srv


def broken_conversation() -> pd.DataFrame:
    """The yoga conversation with a session in between whose extraction never parses."""
    turns = yoga_conversation()
    sessions = [
        (when, [(r.speaker, r.role, r.text, {"dia_id": r.dia_id}) for r in g.itertuples()])
        for when, g in turns.groupby("session_datetime", sort=True)
    ]
    broken = (
        "2023-03-20T12:00:00",
        [("Ana", "user", "BROKEN: this never parses.", {"dia_id": "D9:1"})],
    )
    return make_turns("pair-1", [sessions[0], broken, sessions[1]])


def test_json_extraction_reasks_then_records_a_failed_segment(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, max_reasks=2)
    ds, _, report = build(run_paths, broken_conversation(), client=client)

    assert report.failed_segments == 1 and report.extraction_calls == 3
    segments = pd.read_parquet(ds.memory / "segments.parquet")
    failed = segments.loc[segments["status"] == "failed"]
    assert failed["error"].iloc[0].startswith("unparseable reply")
    assert (segments["status"] == "ok").sum() == 2

    bodies = [r.body for r in server.requests if r.path == CHAT_PATH]
    broken = [b for b in bodies if "BROKEN" in b["messages"][1]["content"]]
    assert len(broken) == 3  # the original and two re-asks
    extract = bodies[0]
    assert extract["model"] == "gpt-5-nano-2025-08-07"
    assert extract["reasoning_effort"] == "low"
    assert extract["response_format"] == {"type": "json_object"}
    assert "temperature" not in extract and "max_tokens" not in extract

    records = read_calls(run_paths.calls)
    reasks = [r for r in records if r.get("reask")]
    assert [r["reask"] for r in reasks] == [1, 2]
    assert {r["prompt_version"] for r in reasks} == {"memory_extract@v1+json_reask@v1"}
    assert {r["stage"] for r in records} == {"extract", "update", "embed"}
    assert all(r["dataset"] == "locomo" and r["conversation_id"] == "pair-1" for r in records)

    facts = read_facts(ds)
    assert facts[["text", "status", "created_by"]].values.tolist() == [
        ["Ana goes to yoga twice a week.", "superseded", "ADD"],
        ["Ben has a beagle named Pretzel.", "active", "ADD"],
        [
            "Ana goes to yoga three times a week (twice a week until April 2023).",
            "active",
            "UPDATE",
        ],
    ]
    # Provenance: cited turns, a fact citing none goes to its speaker's turns, and a merged
    # fact keeps both sources.
    assert [list(x) for x in facts["source_dia_ids"]] == [
        ["D1:2"],
        ["D1:1", "D1:3"],
        ["D2:1", "D1:2"],
    ]
    assert facts["backend"].tolist() == ["openai"] * 3
    assert facts["prompt_version"].tolist()[-1] == "memory_update@v1"
    update = read_updates(ds)
    assert update.loc[update["decision"] == "UPDATE", "backend"].tolist() == ["openai"]


# --- The memory's files and the embedding path ---------------------------------------------------


def test_read_facts_names_notebook_01_or_returns_none_when_asked(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    with pytest.raises(FileNotFoundError, match=r"facts\.parquet.*01_extract_facts\.ipynb"):
        read_facts(ds)
    assert read_facts(ds, missing_ok=True) is None
    build(run_paths, yoga_conversation())
    facts = read_facts(ds, missing_ok=True)
    assert len(facts) == 4 and list(facts.columns) == FACT_SCHEMA.names


def test_embed_groups_counts_truncated_inputs_like_the_client(run_paths):
    client = offline_client(run_paths)
    too_long = "garden " * 9_000  # over the API's 8,192 tokens per input
    vectors = client.embed_groups(
        [(["short fact", too_long], {"dataset": "t"}), ([""], {"dataset": "t"})]
    )
    assert [v.shape[0] for v in vectors] == [2, 1] and not vectors[1].any()
    assert client.stats.truncated_inputs == 1
    assert np.allclose(np.linalg.norm(vectors[0], axis=1), 1.0, atol=4e-3)  # 2^-11 grid
