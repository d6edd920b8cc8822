"""The cognee memory system's parts that run without cognee: its prompts told apart, the
stand-ins in cognee's schemas, the recall context read back as items, the worker's environment
and protocol, the version check, and the gateway handing a library's JSON schema on to the model.
(The library itself, end to end: tests/test_cognee_library.py, marked slow.)"""

from __future__ import annotations

import json
import stat
import sys
import time
from types import SimpleNamespace

import pandas as pd
import pytest
from fake_api.openai_server import FakeOpenAIServer
from llm_helpers import api_client
from openai import OpenAI

from memcost.memory import open_system
from memcost.paths import RunPaths
from memcost_systems import cognee_library
from memcost_systems.cognee_library import (
    Worker,
    context_items,
    dataset_name,
    route,
    session_documents,
    stored_items,
)
from memcost_systems.gateway import PLACEHOLDER_KEY, Gateway
from memcost_systems.offline import offline_cognee_graph, offline_cognee_summary

CHUNK = (
    "Session date: 2023-05-08T13:56:00\n"
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.\n"
    "Melanie: That's great! I just signed up for a pottery class with my kids."
)


def schema_body(name: str, user: str = CHUNK) -> dict:
    return {
        "model": "gpt-5-nano",
        "messages": [
            {"role": "system", "content": "You are a top-tier algorithm ..."},
            {"role": "user", "content": user},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": {"type": "object"}, "strict": True},
        },
    }


def offline(body: dict) -> dict:
    request = SimpleNamespace(payload={"messages": body["messages"]})
    return json.loads(route(body).offline(request))


def test_cognees_calls_are_told_apart_by_the_schema_they_ask_for():
    graph, summary = route(schema_body("KnowledgeGraph")), route(schema_body("SummarizedContent"))
    assert (graph.stage, graph.step) == ("extract", "cognee/extract_graph")
    assert (summary.stage, summary.step) == ("extract", "cognee/summarize")
    assert graph.offline is offline_cognee_graph and summary.offline is offline_cognee_summary
    assert graph.reasoning_effort is None  # cognee sends none: the model's default
    with pytest.raises(ValueError, match="SessionTurnAnalysis"):
        route(schema_body("SessionTurnAnalysis"))
    with pytest.raises(ValueError, match="does not know"):
        route({"messages": [{"role": "user", "content": "Respond with test"}]})


def test_the_graph_stand_in_answers_in_cognees_knowledge_graph_schema():
    graph = offline(schema_body("KnowledgeGraph"))
    assert set(graph) == {"nodes", "edges"}
    for node in graph["nodes"]:
        assert set(node) == {"id", "name", "type", "description"} and node["id"]
    ids = {n["id"] for n in graph["nodes"]}
    for edge in graph["edges"]:
        assert set(edge) == {"source_node_id", "target_node_id", "relationship_name", "description"}
        assert {edge["source_node_id"], edge["target_node_id"]} <= ids
    types = {n["name"]: n["type"] for n in graph["nodes"]}
    assert types["Caroline"] == types["Melanie"] == "Person"
    assert types["2023-05-08"] == "Timestamp"  # the session's day, as cognee's prompt asks
    described = [e["description"] for e in graph["edges"]]
    assert (
        "On 8 May 2023, Caroline said: I went to a LGBTQ support group yesterday and it was "
        "so powerful." in described
    )


def test_the_summary_stand_in_has_the_two_sections_cognee_asks_for():
    summary = offline(schema_body("SummarizedContent"))
    assert set(summary) == {"summary", "description"}
    text = summary["summary"]
    assert text.startswith(
        "This chunk is about:\n- People: Caroline, Melanie\n\nFacts:\n- On 8 May"
    )
    assert "pottery class" in text
    # a chunk cut after its document's date line has no date, and says nothing it cannot
    undated = offline(schema_body("SummarizedContent", "Melanie: We went camping at the beach."))
    assert "- Melanie said: We went camping at the beach." in undated["summary"]


def test_a_users_sessions_become_one_dated_document_each():
    turns = pd.DataFrame(
        {
            "conversation_id": "u",
            "position": [0, 1, 2],
            "speaker": ["Ana", "Ben", "Ana"],
            "role": "user",
            "text": ["I go to yoga.", "Nice.", "I moved to Porto."],
            "session_index": [0, 0, 1],
            "session_id": None,
            "session_datetime": ["2023-05-08T13:56:00", "2023-05-08T13:56:00", None],
        }
    )
    documents, positions = session_documents(turns)
    assert documents == [
        "Session date: 2023-05-08T13:56:00\nAna: I go to yoga.\nBen: Nice.",
        "Ana: I moved to Porto.",
    ]
    assert positions == {"Ana: I go to yoga.": 0, "Ben: Nice.": 1, "Ana: I moved to Porto.": 2}
    assert dataset_name("locomo", "conv 1") != dataset_name("locomo", "conv_1")
    assert dataset_name("locomo", "conv-1").startswith("locomo_conv_1_")


def graph_answer() -> dict:
    return {
        "nodes": [
            {"id": "s1", "type": "TextSummary", "name": "", "text": "This chunk is about: ..."},
            {"id": "e1", "type": "Entity", "name": "caroline", "description": "A speaker."},
            {"id": "c1", "type": "DocumentChunk", "name": "", "text": CHUNK, "description": None},
            {"id": "d1", "type": "TextDocument", "name": "text_ab12", "text": None},
        ],
        "edges": [
            {"relationship": "went_to", "description": "Caroline went to a support group."},
            {"relationship": "contains", "description": "Document chunk mentions caroline"},
        ],
    }


def positions() -> dict[str, int]:
    return {line: i for i, line in enumerate(CHUNK.splitlines()[1:])}


def test_what_cognee_keeps_is_stored_as_items_with_the_turns_of_each_chunk():
    items = stored_items(graph_answer(), positions())
    assert items["kind"].tolist() == ["chunk", "summary", "entity", "triple"]  # sorted
    chunk = items.iloc[0]
    assert list(chunk["positions"]) == [0, 1] and chunk["session_datetime"] == "2023-05-08T13:56:00"
    assert items.iloc[2]["text"] == "caroline: A speaker."
    assert items.iloc[3]["text"] == "Caroline went to a support group."  # structure left out


def test_a_recall_context_is_read_back_as_passages_entities_and_facts():
    chunks = stored_items(graph_answer(), positions()).query("kind == 'chunk'")
    context = (
        "The question is: `What did Caroline go to?`\nAnswer using this sectioned context. Keep "
        "the answer brief and do not use information outside the context.\n\nContext:\n"
        f"`## Relevant passages\n{CHUNK}\n---\nMelanie: We went camping.\n\n"
        "## Relevant entities\n### caroline (Person)\n- caroline is a Person.\n"
        "### pottery class (Concept)\n- Melanie signed up for it.\n\n"
        "## Related facts\n- Caroline went to a support group.\n- Melanie took up pottery.`"
    )
    items = context_items(context, chunks)
    assert items["kind"].tolist() == ["chunk", "chunk", "entity", "entity", "fact", "fact"]
    assert items.iloc[0]["text"] == CHUNK and list(items.iloc[0]["positions"]) == [0, 1]
    assert items.iloc[1]["positions"] == []  # a passage of no stored chunk
    assert items.iloc[2]["text"] == "caroline (Person)\n- caroline is a Person."
    assert items.iloc[5]["text"] == "Melanie took up pottery."
    assert (items["tokens"] > 0).all() and items["item_id"].is_unique
    other = context_items("Nodes:\nNode: x\n", chunks)  # another search type: one item
    assert other["kind"].tolist() == ["context"] and other.iloc[0]["text"] == "Nodes:\nNode: x"


def test_a_missing_or_wrong_cognee_environment_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCOST_COGNEE_PYTHON", str(tmp_path / "none" / "python"))
    with pytest.raises(
        ValueError,
        match=r"^memory system cognee runs in its own environment .*"
        r"make setup-cognee",
    ):
        cognee_library.ENVIRONMENT.version()
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 2.0.1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("MEMCOST_COGNEE_PYTHON", str(fake))
    with pytest.raises(
        ValueError,
        match=r"^cognee 2\.0\.1 is not supported: the adapter supports >=1\.6\.0,<1\.7\.0",
    ):
        cognee_library.ENVIRONMENT.version()
    monkeypatch.setenv("MEMCOST_COGNEE_PYTHON", sys.executable)  # an environment without it
    with pytest.raises(ValueError, match="has no cognee package; make setup-cognee"):
        cognee_library.ENVIRONMENT.version()
    with pytest.raises(ValueError, match="make setup-cognee"):
        from memcost.memory import parse_systems

        parse_systems(["mem0_style", "cognee"])  # refused before anything runs


def test_the_worker_gets_the_gateway_and_no_key(tmp_path, monkeypatch):
    planted = "sk-memcost-planted-cognee-7e6d5c"
    monkeypatch.setenv("OPENAI_API_KEY", planted)
    monkeypatch.setenv("MEMCOST_TEST_API_KEY", planted)
    run = RunPaths(tmp_path / "run").ensure()
    system = open_system("cognee", run.dataset("locomo").ensure(), dataset="locomo")
    system.embedding_dims = 384  # what the run's embedding model gives (set as the gateway opens)
    with Gateway(None, route) as gateway:  # type: ignore[arg-type]
        env = system._library(gateway).env
        assert env["LLM_ENDPOINT"] == env["EMBEDDING_ENDPOINT"] == gateway.base_url
        assert env["EMBEDDING_DIMENSIONS"] == "384"
    assert planted not in json.dumps(env)
    assert env["LLM_API_KEY"] == env["EMBEDDING_API_KEY"] == PLACEHOLDER_KEY
    assert (env["CACHING"], env["TELEMETRY_DISABLED"]) == ("false", "1")
    assert env["SYSTEM_ROOT_DIRECTORY"].startswith(str(system.folder))


def test_the_worker_answers_each_request_and_a_dead_worker_is_one_clear_error(tmp_path):
    # this environment has no cognee: each request fails on its own and the worker carries on
    with Worker(sys.executable, {"PATH": "/usr/bin:/bin"}, tmp_path / "w.log") as worker:
        version = worker.ask(op="version")
        assert version["ok"] is False and "PackageNotFoundError" in version["error"]
        remember = worker.ask(op="remember", dataset="d", documents=["x"])
        assert remember == {"ok": False, "error": "ModuleNotFoundError: No module named 'cognee'"}
    dead = tmp_path / "dead"
    dead.write_text("#!/bin/sh\nexit 7\n")
    dead.chmod(dead.stat().st_mode | stat.S_IEXEC)
    with Worker(dead, {}, tmp_path / "dead.log") as worker:
        with pytest.raises(RuntimeError, match=r"the cognee worker ended \(exit 7\) during recall"):
            worker.ask(op="recall", dataset="d", query="q")
    # a worker still at work when a call of its item has failed is stopped, not waited for
    # (cognee retries a failed call for four minutes)
    busy = tmp_path / "busy"
    busy.write_text("#!/bin/sh\nexec sleep 60\n")
    busy.chmod(busy.stat().st_mode | stat.S_IEXEC)
    reasons = iter([None, None, "HTTP 400: rejected"])
    with Worker(busy, {}, tmp_path / "busy.log") as worker:
        started = time.perf_counter()
        answer = worker.ask(give_up=lambda: next(reasons), op="remember", dataset="d")
        process = worker._process
    assert answer == {"ok": False, "error": "stopped: HTTP 400: rejected"}
    assert time.perf_counter() - started < 5 and process is None


def test_the_gateway_hands_a_librarys_json_schema_on_to_the_model(tmp_path, monkeypatch):
    # cognee asks for structured output by JSON schema; sent on as JSON mode the model would
    # never see the schema cognee validates its answer against
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-memcost-schema")
    body = schema_body("KnowledgeGraph")
    with FakeOpenAIServer(
        responder=lambda b: offline_cognee_graph(
            SimpleNamespace(payload={"messages": b["messages"]})
        )
    ) as server:
        run = RunPaths(tmp_path / "run").ensure()
        graph_route = route(body)  # both requests answered as cognee's graph call
        with Gateway(api_client(run, server.url, tmp_path), lambda b: graph_route) as gateway:
            library = OpenAI(base_url=gateway.base_url, api_key=PLACEHOLDER_KEY)
            reply = library.chat.completions.create(**body)
            again = library.chat.completions.create(
                **{**body, "response_format": {"type": "json_object"}}
            )
        sent = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert json.loads(reply.choices[0].message.content)["nodes"]
    assert sent[0]["response_format"] == body["response_format"]
    assert sent[1]["response_format"] == {"type": "json_object"}  # a different request, sent
    assert again.choices[0].message.content


def test_cognees_recall_setting_is_not_a_number_of_items(tmp_path):
    # notebook 02 counts questions "short of top_k" from a system's top_k setting; cognee's
    # recall ranks graph elements, so naming its setting top_k flagged a trap that is not there
    run = RunPaths(tmp_path / "run").ensure()
    system = open_system("cognee", run.dataset("locomo").ensure(), dataset="locomo")
    assert system.settings.get("top_k") is None and system.settings["recall_top_k"] == 15
