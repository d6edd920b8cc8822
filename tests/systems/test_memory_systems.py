"""The memory-system interface and the four architectures beside the paper's: what each stores,
what its gates and policies do, and what its ledger holds."""

from __future__ import annotations

import gc
import json
import os
import re
import weakref

import numpy as np
import pandas as pd
import pytest
from test_memory import make_turns, yoga_conversation

from memcost.answers import system_kind
from memcost.calls import read_calls
from memcost.llm import make_client
from memcost.memory import open_system, parse_systems, system_names
from memcost.memory.facts import read_facts
from memcost.memory.reader import answer_with_system
from memcost.text import count_tokens
from memcost_systems.graph import GraphMemory
from memcost_systems.hierarchical import WorkingSet
from memcost_systems.live import user_lines
from memcost_systems.observational import ObservationalMemory
from memcost_systems.stored import read_user


def client_for(run):
    return make_client(run, progress=False)


def questions_for(user: str, texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": [f"{user}-q{i}" for i in range(len(texts))],
            "conversation_id": user,
            "question": texts,
            "evidence": [[] for _ in texts],
            "question_date": None,
            "options": None,
        }
    )


def test_the_registry_names_the_systems_and_refuses_an_unknown_one_in_one_line():
    assert system_names() == (
        "mem0_style",
        "cognee",
        "graph",
        "hierarchical",
        "hindsight",
        "mem0",
        "observational",
        "rag",
    )
    with pytest.raises(
        ValueError,
        match=r"^unknown memory system 'mem1'; the memory systems "
        r"are mem0_style, cognee, graph, hierarchical",
    ):
        parse_systems(["mem1"])
    with pytest.raises(ValueError, match=r"memory system rag: unknown setting\(s\) \['k'\]"):
        parse_systems([{"rag": {"k": 3}}])
    assert parse_systems(["rag", {"hierarchical": {"window_turns": 4}}]) == [
        ("rag", {}),
        ("hierarchical", {"window_turns": 4}),
    ]
    assert system_kind("memory_graph") == "memory"  # judged as a memory system


class ModelLikeGraph(GraphMemory):
    """The graph system with the replies a model gives for the yoga conversation (the offline
    stand-in finds relations from words; a model says which relation a new one supersedes)."""

    def offline(self, request):
        step, text = request.payload["step"], " ".join(t for _, t in request.payload["messages"])
        if step == "entities":
            return json.dumps(
                {
                    "entities": [
                        {"name": "Ana", "type": "person"},
                        {"name": "yoga", "type": "activity"},
                    ]
                }
            )
        if "twice a week" in text:
            return json.dumps(
                {
                    "relations": [
                        {
                            "source": "Ana",
                            "relation": "goes to yoga",
                            "destination": "twice a week",
                            "supersedes": None,
                        }
                    ]
                }
            )
        if "three times a week" in text:
            stored = request.payload["stored"]
            assert [s[2] for s in stored] == ["goes to yoga"]  # shown the stored relation
            return json.dumps(
                {
                    "relations": [
                        {
                            "source": "Ana",
                            "relation": "goes to yoga",
                            "destination": "three times a week",
                            "supersedes": stored[0][0],
                        }
                    ]
                }
            )
        return json.dumps({"relations": []})


def test_graph_marks_a_superseded_relation_invalid_and_keeps_it(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    system = ModelLikeGraph(ds, {"batch_size": 2}, dataset="locomo")
    report = system.build(client_for(run_paths), yoga_conversation())
    assert report.built == 1 and not report.failed
    items, vectors = read_user(system.folder, "pair-1")
    triples = items.loc[items["kind"] == "triple"].set_index("item_id")
    assert triples["text"].tolist() == [
        "Ana goes to yoga twice a week",
        "Ana goes to yoga three times a week",
    ]
    old, new = triples.index
    assert not triples.loc[old, "valid"] and triples.loc[new, "valid"]  # kept, marked
    assert json.loads(triples.loc[old, "detail"])["superseded_by"] == new
    assert vectors.shape[0] == len(items)
    # only the valid relation comes back for a question about it
    recall = system.recall(
        client_for(run_paths), questions_for("pair-1", ["How often does Ana go to yoga?"])
    )
    assert recall["pair-1-q0"].items["text"].tolist() == ["Ana goes to yoga three times a week"]


def test_graph_offline_makes_two_calls_per_segment_tagged_with_the_system(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    system = open_system("graph", ds, dataset="locomo", settings={"batch_size": 2})
    system.build(client_for(run_paths), yoga_conversation())
    calls = [c for c in read_calls(run_paths.calls) if c["stage"] == "extract"]
    steps = [c["memory_step"] for c in calls]
    assert steps == ["entities", "relations"] * (len(steps) // 2) and len(steps) >= 4
    assert {c["system"] for c in calls} == {"memory_graph"}


def test_working_set_evicts_by_its_policy():
    lru = WorkingSet(2, "lru")
    for row in (1, 2, 1, 3):  # 1 is hit again, so 2 is the least recently used
        lru.hit(row)
    assert lru.rows() == [1, 3] and lru.evicted == [2]
    fifo = WorkingSet(2, "fifo")
    for row in (1, 2, 1, 3):  # under fifo a second hit does not save 1
        fifo.hit(row)
    assert fifo.rows() == [2, 3] and fifo.evicted == [1]
    with pytest.raises(ValueError, match="eviction must be one of"):
        WorkingSet(2, "random")


def test_hierarchical_promotes_an_archived_hit_into_working_memory(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    settings = {"window_turns": 2, "summary_every": 3, "archive_top_k": 1, "working_capacity": 1}
    system = open_system("hierarchical", ds, dataset="locomo", settings=settings)
    client = client_for(run_paths)
    system.build(client, yoga_conversation())
    items, _ = read_user(system.folder, "pair-1")
    assert items["kind"].tolist().count("turn") == 2  # L1: the last two messages
    assert items["kind"].tolist().count("summary") == 1
    archived = items.loc[items["kind"] == "archive", "text"].tolist()
    assert any("twice a week" in t for t in archived)
    recalls = system.recall(
        client,
        questions_for(
            "pair-1", ["Ana yoga twice a week studio office", "beagle Pretzel adopted January"]
        ),
    )
    first, second = recalls["pair-1-q0"].items, recalls["pair-1-q1"].items
    assert "twice a week" in first.loc[first["kind"] == "working", "text"].item()
    assert "Pretzel" in second.loc[second["kind"] == "working", "text"].item()
    working = system.working_sets["pair-1"]
    assert len(working.evicted) == 1  # the yoga message went back to L3 at capacity 1
    # what every question shares first (a prompt cache serves it), then what it promoted
    assert second["kind"].tolist() == ["summary", "turn", "turn", "working"]


def test_a_recall_lets_each_users_items_go_after_its_questions(run_paths):
    """Every user's items and vectors held until the last question outgrew 24 GB on
    LongMemEval's 500 users (hierarchical and observational memory in one notebook 02): a
    user's are let go once its questions are answered, in the order asked, and the answers
    come back in the questions' order."""
    ds = run_paths.dataset("locomo").ensure()
    settings = {"window_turns": 2, "summary_every": 3, "archive_top_k": 1, "working_capacity": 1}
    system = open_system("hierarchical", ds, dataset="locomo", settings=settings)
    client = client_for(run_paths)
    system.build(client, pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")]))
    loaded, load = [], system.load

    def load_and_watch(user):
        items, vectors = load(user)
        loaded.append((user, weakref.ref(vectors)))
        return items, vectors

    system.load = load_and_watch
    asked = pd.concat(
        [
            questions_for("pair-1", ["Ana yoga twice a week", "beagle Pretzel adopted"]),
            questions_for("pair-2", ["beagle Pretzel adopted"]),
        ]
    ).iloc[[0, 2, 1]]  # the users' questions interleaved
    recalls = system.recall(client, asked)
    gc.collect()
    assert [u for u, _ in loaded] == ["pair-1", "pair-2"]  # each user's items loaded once
    assert all(ref() is None for _, ref in loaded)  # and none held after the recall
    assert list(recalls) == ["pair-1-q0", "pair-2-q0", "pair-1-q1"]
    # the working set went on from the user's first question to its second, as asked: at
    # capacity 1 the second's promotion evicted the first's
    assert "Pretzel" in recalls["pair-1-q1"].items.query("kind == 'working'")["text"].item()
    working = system.working_sets
    assert len(working["pair-1"].evicted) == 1 and not working["pair-2"].evicted


def test_a_build_embeds_and_writes_its_users_a_block_at_a_time(run_paths, monkeypatch, capsys):
    """A build embedded every user's items before writing any: on LongMemEval's 500 users
    hierarchical memory's archived turns alone held 8.5 GB of vectors. A block of users is
    embedded, written and let go before the next; one bar counts the users."""
    from memcost_systems import stored

    monkeypatch.setattr(stored, "USERS_PER_BLOCK", 2)
    ds = run_paths.dataset("locomo").ensure()
    users = ["pair-1", "pair-2", "pair-3"]
    system = open_system("hierarchical", ds, dataset="locomo", settings={"window_turns": 2})
    blocks, embed = [], system._embed
    monkeypatch.setattr(
        system, "_embed", lambda c, items: blocks.append(list(items)) or embed(c, items)
    )
    capsys.readouterr()
    system.build(make_client(run_paths), pd.concat([yoga_conversation(u) for u in users]))
    assert blocks == [["pair-1", "pair-2"], ["pair-3"]]
    assert sorted(system.state()["conversation_id"]) == users
    assert all(len(read_user(system.folder, u)[1]) for u in users)  # items and their vectors
    drawn = capsys.readouterr().err.replace("\r", "\n").splitlines()
    assert [x for x in drawn if x.startswith("hierarchical: embed and write: 100%|")]
    assert not [x for x in drawn if "embed items" in x]


def test_observer_fires_on_the_message_that_reaches_its_threshold(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    turns = yoga_conversation()
    lines = user_lines(turns)
    sizes = [count_tokens(line.render() + "\n") for line in lines]
    threshold = sum(sizes[:3])  # reached exactly by the third message
    system = ObservationalMemory(
        ds, {"observer_tokens": threshold, "reflector_tokens": 10**6}, dataset="locomo"
    )
    system.build(client_for(run_paths), turns)
    state = system.state().set_index("conversation_id").loc["pair-1"]
    assert state["observer_fired"] == 2 - (sum(sizes[3:]) < threshold)
    assert state["gates"][0] == {
        "gate": "observer",
        "position": lines[2].position,
        "tokens": threshold,
        "reason": f"observer: {threshold:,} un-observed tokens >= {threshold:,}",
    }
    one_less = ObservationalMemory(
        run_paths.dataset("longmemeval").ensure(),
        {"observer_tokens": threshold + 1},
        dataset="longmemeval",
    )
    one_less.build(client_for(run_paths), turns)
    gates = one_less.state().set_index("conversation_id").loc["pair-1", "gates"]
    assert gates[0]["position"] == lines[3].position  # one token more: one message later


def test_the_reflector_condenses_once_observations_reach_its_threshold(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    system = ObservationalMemory(
        ds, {"observer_tokens": 1, "reflector_tokens": 1}, dataset="locomo"
    )
    system.build(client_for(run_paths), yoga_conversation())
    state = system.state().set_index("conversation_id").loc["pair-1"]
    assert state["reflector_fired"] >= 1
    stages = [c["memory_step"] for c in read_calls(run_paths.calls) if c["stage"] == "extract"]
    # each message is observed at once; the first observation starts the reflector
    first = stages.index("reflector")
    assert first > 0 and set(stages[:first]) == {"observer"}


def test_rag_writes_with_embeddings_alone_and_answers_under_its_own_name(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])
    system = open_system("rag", ds, dataset="locomo", settings={"chunk_tokens": 60})
    client = client_for(run_paths)
    system.build(client, turns)
    records = read_calls(run_paths.calls)
    mine = [r for r in records if r["system"] == "memory_rag"]
    assert {r["stage"] for r in mine} == {"embed"}  # no extraction, no update
    items, vectors = read_user(system.folder, "pair-1")
    assert (
        len(items) > 1
        and (items["tokens"] <= 60).all()
        and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=4e-3)  # 2^-11 grid
    )
    assert sorted(p for ps in items["positions"] for p in ps) == list(range(7))  # every turn
    questions = questions_for("pair-1", ["What is the beagle called?"])
    answers = answer_with_system(client, system, questions, turns)
    assert answers.answered == 1 and answers.recalls["pair-1-q0"].tokens > 0
    lines = [json.loads(x) for x in ds.answers_file("memory_rag").read_text().splitlines()]
    assert lines[0]["system"] == "memory_rag" and lines[0]["retrieved_kinds"] == ["chunk"] * 2
    read = [r for r in read_calls(run_paths.calls) if r["stage"] == "read"]
    assert read[0]["system"] == "memory_rag"


def test_a_finished_user_is_not_built_again_and_a_failed_one_is_retried(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    turns = pd.concat(
        [
            yoga_conversation("pair-1"),
            make_turns(
                "pair-2",
                [
                    (
                        "2023-05-01T09:00:00",
                        [("Cleo", "user", "I moved to Porto in May for a new job.")],
                    )
                ],
            ),
        ]
    )

    class Flaky(GraphMemory):
        def offline(self, request):
            if request.tags["conversation_id"] == "pair-2" and not getattr(self, "healed", False):
                raise RuntimeError("the model is down")
            return super().offline(request)

    system = Flaky(ds, dataset="locomo")
    with pytest.raises(RuntimeError):  # an offline method that raises is a bug, not a failure
        system.build(client_for(run_paths), turns)
    system.healed = True
    first = system.build(client_for(run_paths), turns)
    assert first.built == 2 and first.resumed == 0
    again = system.build(client_for(run_paths), turns)
    assert again.built == 0 and again.resumed == 2


def test_a_user_whose_call_fails_is_recorded_failed_counted_and_built_by_a_rerun(
    run_paths, tmp_path, monkeypatch
):
    """Through the real client and the local server: one user's graph calls are rejected (a
    400 for that item), the other user is built; the failed one is in failed.json, counted in
    notebook 01's items, and a rerun builds it and only it."""
    from fake_api.openai_server import Action
    from fake_api.stages import stage_server
    from llm_helpers import TEST_KEY, api_client

    from memcost.run.checks import stage_status

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    ds = run_paths.dataset("locomo").ensure()
    turns = pd.concat(
        [
            yoga_conversation("pair-1"),
            make_turns(
                "pair-2",
                [
                    (
                        "2023-05-01T09:00:00",
                        [
                            ("Cleo", "user", "I moved to Porto in May for a new job."),
                            ("Dan", "user", "Congratulations on the new job in Porto!"),
                        ],
                    )
                ],
            ),
        ]
    )
    with stage_server(api_key=TEST_KEY, faults=False, malformed_every=0) as server:
        server.on(
            lambda path, body: "Cleo" in json.dumps(body.get("messages", "")),
            Action(status=400, message="This item was rejected."),
            times=None,
        )
        system = open_system("graph", ds, dataset="locomo")
        first = system.build(api_client(run_paths, server.url, tmp_path), turns)
        assert first.built == 1 and set(first.failed) == {"pair-2"}
        assert "rejected" in first.failed["pair-2"] and "FAILED" in first.line()
        assert set(system.state()["conversation_id"]) == {"pair-1"}
        status = stage_status(run_paths, "01_extract_facts", "locomo")
        assert (status.total, status.failed, status.item) == (2, 1, "segments and users")
        server.clear()
        again = system.build(api_client(run_paths, server.url, tmp_path), turns)
    assert (again.built, again.resumed, again.failed) == (1, 1, {})
    assert set(system.state()["conversation_id"]) == {"pair-1", "pair-2"}
    assert stage_status(run_paths, "01_extract_facts", "locomo").failed == 0


def test_an_unknown_memory_system_stops_the_run_before_it_starts(tmp_path):
    from memcost.run import PresetError
    from memcost.run.presets import resolve_preset, validate_run
    from memcost.run.runner import discover_notebooks

    notebooks = discover_notebooks()
    preset = resolve_preset("smoke", notebooks, overrides={"memory_systems": ["mem0_style", "rga"]})
    with pytest.raises(
        PresetError,
        match=r"^parameter memory_systems: unknown memory system 'rga'; the memory systems are "
        + re.escape(", ".join(system_names()))  # the names the registry test lists
        + "$",
    ):
        validate_run(preset, notebooks, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_each_memory_system_is_priced_from_its_own_records_at_both_prices():
    from test_usage import record

    from memcost import costs
    from memcost.costs.ledger import ledger_from_records

    nano, mini = "gpt-5-nano-2025-08-07", "gpt-5-mini-2025-08-07"
    q = {"question_id": "q1"}
    records = [
        record("extract", nano, 100_000, 20_000, request_hash="w0"),  # the paper's memory
        record("extract", nano, 10_000, 2_000, system="memory_graph", request_hash="w1"),
        record("read", mini, 1_000, 50, system="memory_mem0_style", request_hash="r0", **q),
        record("read", mini, 2_000, 50, system="memory_graph", request_hash="r1", **q),
        record(
            "long_context",
            mini,
            100_000,
            500,
            system="long_context_gpt-5-mini",
            request_hash="l0",
            **q,
        ),
    ]
    ledger = ledger_from_records(records)
    table, _, _ = costs.measured_break_even(costs.price_calls(ledger))
    by = table.set_index("memory_system")
    assert by.loc["memory_mem0_style", "write_usd"] == pytest.approx(
        (100_000 * 0.05 + 20_000 * 0.4) / 1e6
    )
    assert by.loc["memory_graph", "write_usd"] == pytest.approx((10_000 * 0.05 + 2_000 * 0.4) / 1e6)
    assert by.loc["memory_graph", "read_usd"] == pytest.approx((2_000 * 0.25 + 50 * 2.0) / 1e6)
    today = costs.price_calls(costs.as_successors(ledger), on="2026-11-30")
    assert set(today["price_model"]) == {"gpt-6-luna", "gpt-6.1-terra"}
    summary = costs.summary_table(costs.price_calls(ledger)).set_index("component")
    assert summary.loc["write: fact extraction", "total_usd"] == pytest.approx(
        by.loc["memory_mem0_style", "write_usd"]
    )  # the paper's line holds the paper's memory only
    assert summary.loc["write: memory_graph", "total_usd"] == pytest.approx(
        by.loc["memory_graph", "write_usd"]
    )


def test_a_memory_built_without_a_call_costs_nothing_to_write_and_stays_in_the_table():
    """Observational memory below its observer gate (the real LoCoMo's 20,000-token histories,
    a 30,000-token gate) writes nothing: it is measured with a write of $0, not left out of the
    side-by-side table as "cannot measure". The paper's memory without its writes still is."""
    from test_usage import record

    from memcost import costs
    from memcost.costs.ledger import ledger_from_records

    mini = "gpt-5-mini-2025-08-07"
    q = {"question_id": "q1"}
    records = [
        record("read", mini, 3_000, 50, system="memory_observational", request_hash="r1", **q),
        record("read", mini, 1_000, 50, system="memory_mem0_style", request_hash="r0", **q),
        record("long_context", mini, 20_000, 500, system="long_context_gpt-5-mini",
               request_hash="l0", **q),
    ]  # fmt: skip
    table, _, skipped = costs.measured_break_even(costs.price_calls(ledger_from_records(records)))
    by = table.set_index("memory_system")
    assert by.loc["memory_observational", "write_usd"] == 0.0
    assert by.loc["memory_observational", "read_usd"] == pytest.approx((3_000 * 0.25 + 100) / 1e6)
    assert by.loc["memory_observational", "break_even_n"] == 1  # nothing to pay back
    assert "memory_mem0_style" not in by.index
    assert skipped == [
        "longmemeval/memory_mem0_style/long_context_gpt-5-mini: dataset 'longmemeval': no ledger "
        "records for write; cannot measure the cost model"
    ]


def test_questions_short_of_top_k_count_only_users_who_hold_enough():
    from memcost.memory.reader import short_of_top_k

    retrieved = pd.Series([["a"] * 20, ["a"] * 3, ["a"] * 3, []])
    users = pd.Series(["big", "big", "small", "empty"])
    stored = pd.Series({"big": 200, "small": 3, "empty": 0})
    # the second question got 3 of the 20 the big user holds; the small user has only 3
    assert short_of_top_k(retrieved, users, 20, stored) == 1


def test_one_gate_rule_for_both_studies():
    from memcost_systems.observational import ObservationGates

    gates = ObservationGates(observer_tokens=10, reflector_tokens=25)
    assert [gates.add(n) for n in (4, 5, 1)] == [False, False, True]  # on reaching it, not after
    assert gates.pending == 10 and gates.observed(24) is False and gates.pending == 0
    assert gates.observed(25) is True


def test_the_serving_study_serves_the_main_studys_memory_systems():
    """No second Mem0 and no second observational memory: notebook 06's are this package's
    systems, made with the serving study's settings and served turn by turn."""
    from memcost_serving.mem0_live import Mem0Live
    from memcost_serving.replay import make_system
    from memcost_serving.systems import ServingConfig
    from memcost_systems.observational import (
        ObservationalLive,
        ObservationalMemory,
        ObservationGates,
    )

    config = ServingConfig(ingest_interval=7, mem0_top_k=4, observer_tokens=900)
    mem0 = make_system("mem0", config).live
    assert isinstance(mem0, Mem0Live)
    assert mem0.settings["batch_size"] == 7 and mem0.settings["top_k"] == 4
    assert mem0.settings["max_segment_chars"] == 8_000  # the paper's segments, unchanged
    observational = make_system("observational", config).live
    assert isinstance(observational, ObservationalLive)
    assert isinstance(observational.system, ObservationalMemory)
    assert isinstance(observational.ingest.gates, ObservationGates)
    assert observational.ingest.gates.observer_tokens == 900
    assert observational.system.settings["unobserved_in_context"] is False


def _needs_no_library(name: str) -> bool:
    from memcost.memory.base import system_class
    from memcost_systems.libraries import LibrarySystem

    return not issubclass(system_class(name), LibrarySystem)


@pytest.mark.parametrize("name", [n for n in system_names() if _needs_no_library(n)])
def test_every_registered_system_keeps_the_contract(run_paths, name):
    """What every system that runs in this environment owes the study (a new module registered
    in memcost.memory is in this list by itself): two users built offline, a rerun builds
    neither, and each question is answered once under the system's own name, which notebook 04
    judges as a memory system and whose calls the ledger tags with it."""
    ds = run_paths.dataset("locomo").ensure()
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])
    system = open_system(name, ds, dataset="locomo")
    client = client_for(run_paths)
    first = system.build(client, turns)
    assert (first.built, first.resumed, first.failed) == (2, 0, {})
    again = system.build(client, turns)
    assert (again.built, again.resumed) == (0, 2)
    questions = pd.concat(
        [questions_for(u, ["How often does Ana go to yoga?"]) for u in ("pair-1", "pair-2")]
    )
    answers = answer_with_system(client, system, questions, turns)
    assert (answers.answered, answers.errors) == (2, 0)
    lines = [json.loads(x) for x in ds.answers_file(system.answers_as).read_text().splitlines()]
    assert sorted(r["question_id"] for r in lines) == ["pair-1-q0", "pair-2-q0"]
    assert {r["system"] for r in lines} == {system.answers_as}
    assert system_kind(system.answers_as) == "memory"
    read = [r for r in read_calls(run_paths.calls) if r["stage"] == "read"]
    assert len(read) == 2 and {r["system"] for r in read} == {system.answers_as}
    assert answer_with_system(client, system, questions, turns).resumed == 2


def test_the_papers_update_phase_shows_its_progress(run_paths, capsys):
    """The update phase goes a segment index at a time through every user; its calls had no bar
    of their own, so hours of them (LongMemEval's 500 users) showed nothing, in the notebook,
    the log or the runner's progress lines."""
    ds = run_paths.dataset("locomo").ensure()
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])
    system = open_system("mem0_style", ds, dataset="locomo")
    capsys.readouterr()
    system.build(make_client(run_paths), turns)  # the client's bars on, as in the notebooks
    drawn = capsys.readouterr().err.replace("\r", "\n").splitlines()
    last = [line for line in drawn if line.startswith("update phase: ")][-1]
    # each user's two sessions are two segments: the bar counts the four segments, two waves of
    # two; the first adds to an empty memory with no call, the second asks the model once a user
    assert last.startswith("update phase: 100%|") and "| 4/4 [" in last
    assert last.endswith("segment/s, calls=2]")


def test_the_papers_memory_reads_its_facts_once_for_every_user(run_paths, monkeypatch):
    """Notebook 02 asks for each user's items (the turns their facts came from): a store made
    anew for each user read and grouped the whole facts.parquet again, 47 s of the 53 notebook
    02 took on LongMemEval's 500 users. One read serves them all until the file changes."""
    from memcost.memory import search

    ds = run_paths.dataset("locomo").ensure()
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])
    system = open_system("mem0_style", ds, dataset="locomo")
    system.build(make_client(run_paths), turns)
    reads = []
    monkeypatch.setattr(search, "read_facts", lambda d: reads.append(d) or read_facts(d))
    first, second = system.items("pair-1"), system.items("pair-2")
    assert len(reads) == 1 and len(first) and len(second)
    assert set(first["fact_id"]).isdisjoint(second["fact_id"])
    facts = ds.memory / "facts.parquet"
    later = facts.stat().st_mtime_ns + 1_000_000_000
    os.utime(facts, ns=(later, later))  # a rebuild rewrites the file: read again
    assert system.items("pair-1")["fact_id"].tolist() == first["fact_id"].tolist()
    assert len(reads) == 2


def test_a_stored_systems_ingest_bar_counts_its_calls_and_heeds_the_client(run_paths, capsys):
    """Users of alike histories finish in the same wave: the bar over users stood at 0% for
    the whole of LongMemEval's ingest, and it drew with the client's progress off."""
    ds = run_paths.dataset("locomo").ensure()
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])
    settings = {"window_turns": 2, "summary_every": 3}
    quiet = open_system("hierarchical", ds, dataset="locomo", settings=settings)
    capsys.readouterr()
    quiet.build(client_for(run_paths), turns)
    assert "hierarchical: ingest" not in capsys.readouterr().err
    shown = open_system(
        "hierarchical",
        run_paths.dataset("longmemeval").ensure(),
        dataset="longmemeval",
        settings=settings,
    )
    shown.build(make_client(run_paths), turns)
    drawn = capsys.readouterr().err.replace("\r", "\n").splitlines()
    last = [line for line in drawn if line.startswith("hierarchical: ingest")][-1]
    calls = [
        r
        for r in read_calls(run_paths.calls)
        if r["dataset"] == "longmemeval" and r["stage"] == "extract"  # the summaries
    ]
    assert last.startswith("hierarchical: ingest: 100%|") and "| 2/2 [" in last
    assert last.endswith(f"calls, {len(calls):,} in all]") and calls


def test_every_progress_bar_of_a_build_is_text_that_the_log_keeps(smoke_run):
    """The other systems' builds drew tqdm.auto's widget in a kernel: the executed notebook kept
    it at 0/2 forever, and neither the log nor the runner's progress lines had it."""
    notebook = smoke_run.dataset("locomo").notebooks / "01_extract_facts.ipynb"
    outputs = [o for c in json.loads(notebook.read_text())["cells"] for o in c.get("outputs", [])]
    widgets = [
        o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    assert widgets == []
    log = "".join(path.read_text(encoding="utf-8") for path in smoke_run.logs.glob("*.log"))
    for system in ("rag", "graph", "hierarchical", "observational"):
        assert f"{system}: ingest: 100%|" in log


def walks_observed_in_part(run, users=("pair-1",)):
    """Per user, 90 messages of which observational memory observes the first 50 (the last 40,
    some 1,500 tokens, stay raw in every question's prompt), and four questions about them."""
    said = "On day {} I walked {} miles along the river {}, past the old mill and the bridge."

    def chat(user: str) -> list[tuple]:
        return [("Ana" if i % 2 else "Ben", "user", said.format(i, i, user)) for i in range(90)]

    turns = pd.concat([make_turns(u, [("2023-03-01T10:00:00", chat(u))]) for u in users])
    first_lines = count_tokens("".join(x.render() + "\n" for x in user_lines(turns)[:50]))
    system = ObservationalMemory(
        run.dataset("locomo").ensure(),
        {"observer_tokens": first_lines, "reflector_tokens": 10**6},
        dataset="locomo",
    )
    days = (7, 85, 12, 60)
    asked = pd.concat(
        [questions_for(u, [f"How far did I walk on day {d}?" for d in days]) for u in users]
    )
    return turns, system, asked.reset_index(drop=True)


def test_observational_reads_put_the_raw_messages_first_and_are_priced_as_a_cache_serves_them(
    run_paths,
):
    """The messages not observed yet are the same for every question of a user: they come
    first, then the observation a question retrieves, so a provider's prompt cache can serve
    them from the second question on. The offline backend has no cache: its reader records carry
    the tokens a cache would serve (whole 128-token steps from 1,024 on), and the cost model
    prices them cached, as it prices long context from a user's second question on."""
    from memcost import costs
    from memcost.catalog import cacheable
    from memcost.costs.ledger import load_ledger
    from memcost.costs.measured import served_reads

    turns, system, asked = walks_observed_in_part(run_paths)
    client = client_for(run_paths)
    system.build(client, turns)
    answer_with_system(client, system, asked, turns)
    shown = system.recall(client, asked)["pair-1-q0"].facts
    kinds = shown["kind"].tolist()
    assert kinds == ["turn"] * 40 + ["observation"]

    reads = [c for c in read_calls(run_paths.calls) if c["stage"] == "read"]
    assert [c["question_id"] for c in reads] == asked["question_id"].tolist()
    assert "shared_prefix_tokens" not in reads[0]  # the first question writes the cache
    shared = reads[1]["shared_prefix_tokens"]
    assert shared >= 1_024 and shared == cacheable(shared)
    assert {c["shared_prefix_tokens"] for c in reads[1:]} == {shared}
    assert all(c["cached_prompt_tokens"] == 0 for c in reads)  # as the offline backend said

    # the ledger keeps what the offline backend counted (the bill shows no cache offline, for
    # long context too); the cost model prices the reads as a provider's cache serves them
    priced = costs.price_calls(load_ledger([run_paths.root]))
    reads = priced.loc[priced["stage"] == "read"].set_index("question_id")
    assert reads["cached_prompt_tokens"].sum() == 0
    served = served_reads(reads, None)["cost_usd"]
    assert served["pair-1-q0"] == reads.loc["pair-1-q0", "cost_usd"]  # it writes the cache
    for question in ("pair-1-q1", "pair-1-q2", "pair-1-q3"):
        p, c = reads.loc[question, ["prompt_tokens", "completion_tokens"]]
        assert served[question] == pytest.approx(
            ((p - shared) * 0.25 + shared * 0.025 + c * 2) / 1e6
        )
        assert served[question] < reads.loc[question, "cost_usd"] / 3
    api = reads.assign(is_estimate=False)  # a provider reports its own cached tokens
    assert served_reads(api, None)["cost_usd"].equals(api["cost_usd"])
    # the side-by-side table's read per question is the served one
    from test_usage import record

    from memcost.costs.ledger import ledger_from_records

    lc = [
        record("long_context", "gpt-5-mini-2025-08-07", 2_000, 50, backend="offline",
               system="long_context_gpt-5-mini", dataset="locomo", conversation_id="pair-1",
               question_id=q, request_hash=f"lc-{q}")
        for q in asked["question_id"]
    ]  # fmt: skip
    ledger = pd.concat([load_ledger([run_paths.root]), ledger_from_records(lc)], ignore_index=True)
    table, _, _ = costs.measured_break_even(costs.price_calls(ledger))
    side = table.set_index("memory_system").loc["memory_observational"]
    query_embeddings = priced.loc[(priced["stage"] == "embed") & priced["question_id"].notna()]
    assert side["read_usd"] == pytest.approx(
        (served.sum() + query_embeddings["cost_usd"].sum()) / 4
    )


def test_over_an_api_observational_reads_are_priced_with_the_cached_tokens_the_provider_reports(
    run_paths, tmp_path, monkeypatch
):
    """Through the real client and the local server (which caches prefixes as OpenAI does): a
    user's first question is sent alone, so that from the second on the provider serves the raw
    messages from its cache, and the cost tables price what it reported, not the offline rule's
    count."""
    from fake_api.stages import stage_server
    from llm_helpers import TEST_KEY, api_client

    from memcost import costs
    from memcost.costs.ledger import load_ledger
    from memcost.costs.measured import served_reads

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    turns, system, asked = walks_observed_in_part(run_paths, users=("pair-1", "pair-2"))
    # calls take a while, so that calls sent together overlap as they do on a real API
    with stage_server(api_key=TEST_KEY, faults=False, malformed_every=0, latency_s=0.2) as server:
        client = api_client(run_paths, server.url, tmp_path)
        system.build(client, turns)
        answer_with_system(client, system, asked, turns)
    reads = pd.DataFrame([c for c in read_calls(run_paths.calls) if c["stage"] == "read"])
    assert (reads["backend"] == "openai").all() and len(reads) == 8
    for _, calls in reads.groupby("conversation_id"):
        first = calls["question_id"].str.endswith("-q0")
        assert calls.loc[first, "cached_prompt_tokens"].tolist() == [0]
        # the raw messages, from the second question on
        assert calls.loc[~first, "cached_prompt_tokens"].min() >= 1_024
    priced = costs.price_calls(load_ledger([run_paths.root]))
    priced = priced.loc[priced["stage"] == "read"]
    assert priced["cached_prompt_tokens"].tolist() == reads["cached_prompt_tokens"].tolist()
    assert served_reads(priced, None)["cost_usd"].equals(priced["cost_usd"])
