"""The metering gateway and the mem0 library behind it, through the real client and the local
OpenAI-compatible server: every call recorded and cached, a budget stop and an outage ending
the stage, and no key in any file of the run."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest
from fake_api.openai_server import Action, FakeOpenAIServer
from llm_helpers import api_client
from test_memory import yoga_conversation

from memcost.calls import read_calls
from memcost.llm import BudgetExceeded, LLMError
from memcost.memory import open_system
from memcost.memory.base import read_done
from memcost.paths import RunPaths
from memcost_systems.mem0_library import Mem0Library, route
from memcost_systems.offline import offline_mem0_extract, offline_mem0_update

pytest.importorskip("mem0", reason="the mem0ai package (make setup installs it)")
PLANTED = "sk-memcost-planted-" + "5f0c1d2e3a4b"


def mem0_responder(body: dict) -> str:
    """An upstream that answers mem0's two prompts as a model would, in mem0's formats."""
    request = SimpleNamespace(payload={"messages": body.get("messages") or []})
    return route(body).offline(request)  # the stand-ins read the messages mem0 sent


def conversations() -> pd.DataFrame:
    return pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])


def build(run: RunPaths, server: FakeOpenAIServer, tmp_path, **options) -> Mem0Library:
    system = open_system(
        "mem0",
        run.dataset("locomo").ensure(),
        dataset="locomo",
        settings={"vector_store": "faiss", "batch_size": 4},
    )
    system.build(api_client(run, server.url, tmp_path, **options), conversations())
    return system


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    with FakeOpenAIServer(api_key=PLANTED, responder=mem0_responder) as server:
        yield server


def test_every_library_call_is_one_tagged_record_and_a_second_run_is_all_cache(upstream, tmp_path):
    first = RunPaths(tmp_path / "first").ensure()
    system = build(first, upstream, tmp_path)
    sent = len(upstream.requests)
    assert sent > 0 and set(read_done(system.folder)) == {"pair-1", "pair-2"}
    records = pd.DataFrame(read_calls(first.calls))
    assert set(records["library_step"]) == {"mem0/extract", "mem0/update", "mem0/embed"}
    assert set(records["system"]) == {"memory_mem0"} and set(records["backend"]) == {"openai"}
    assert set(records["conversation_id"]) == {"pair-1", "pair-2"}
    assert records.loc[records["library_step"] == "mem0/extract", "stage"].eq("extract").all()
    # one record per call the library made; a repeated request (mem0 embeds some texts twice)
    # is a cache hit, recorded as such, and only the others reached the upstream
    assert int((~records["cached"].astype(bool)).sum()) == sent
    second = RunPaths(tmp_path / "second").ensure()
    build(second, upstream, tmp_path, reuse_runs=[str(first.root)])  # the first run's answers
    assert len(upstream.requests) == sent  # nothing sent again
    assert all(r["cached"] for r in read_calls(second.calls))


def test_a_budget_stop_through_the_gateway_ends_the_build_with_nothing_done(upstream, tmp_path):
    run = RunPaths(tmp_path / "run").ensure()
    with pytest.raises(BudgetExceeded):
        build(run, upstream, tmp_path, max_cost_usd=1e-7)
    system = open_system("mem0", run.dataset("locomo"), dataset="locomo")
    assert read_done(system.folder) == {}


def test_an_outage_fails_the_stage_never_an_empty_memory(upstream, tmp_path):
    upstream.on(lambda path, body: True, Action(status=500, retry_after_ms=1), times=None)
    run = RunPaths(tmp_path / "run").ensure()
    system = open_system(
        "mem0", run.dataset("locomo").ensure(), dataset="locomo", settings={"vector_store": "faiss"}
    )
    try:
        report = system.build(api_client(run, upstream.url, tmp_path), conversations())
    except LLMError:
        report = None  # the client's outage stop, raised again after mem0 swallowed it
    assert read_done(system.folder) == {}
    if report is not None:
        assert set(report.failed) == {"pair-1", "pair-2"}


def test_no_key_reaches_a_file_of_the_run(upstream, tmp_path):
    run = RunPaths(tmp_path / "run").ensure()
    system = build(run, upstream, tmp_path)
    system.recall(
        api_client(run, upstream.url, tmp_path),
        pd.DataFrame(
            {
                "question_id": ["q1"],
                "conversation_id": ["pair-1"],
                "question": ["How often does Ana go to yoga?"],
            }
        ),
    )
    leaked = [p for p in run.root.rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]
    assert leaked == []
    headers = [json.dumps(dict(r.headers)) for r in upstream.requests if hasattr(r, "headers")]
    assert all("memcost-gateway" not in h for h in headers)  # upstream sees the real key only


def test_the_adapter_recognises_mem0s_prompts_and_refuses_others():
    from memcost_systems.prompts import MEM0_EXTRACT

    extract = route(
        {
            "messages": [
                {"role": "system", "content": MEM0_EXTRACT.system},
                {"role": "user", "content": "Input:\nuser: Ana: hi"},
            ]
        }
    )
    assert (extract.stage, extract.step) == ("extract", "mem0/extract")
    assert extract.offline is offline_mem0_extract
    update = route(
        {
            "messages": [
                {
                    "role": "user",
                    "content": "You are a smart memory manager which controls the memory "
                    "of a system.\n...",
                }
            ]
        }
    )
    assert (update.stage, update.step, update.offline) == (
        "update",
        "mem0/update",
        offline_mem0_update,
    )
    with pytest.raises(ValueError, match="does not know"):
        route({"messages": [{"role": "user", "content": "Summarise this."}]})


def test_a_session_without_a_date_is_extracted_without_one():
    # PersonaMem's sessions have no date: the stand-in read the date line's "-" as a date and
    # failed every PersonaMem user of mem0
    from memcost_systems.offline import NO_SESSION_DATE

    def facts(date: str) -> list[str]:
        content = f"Input:\nuser: Session date: {date}\nuser: Ana: I go to yoga twice a week now."
        request = SimpleNamespace(payload={"messages": [{"role": "user", "content": content}]})
        return json.loads(offline_mem0_extract(request))["facts"]

    undated = facts(NO_SESSION_DATE)
    assert undated and not any("On " in f for f in undated)
    assert facts("2023-05-08T13:56:00")[0].startswith("On 8 May 2023, Ana said:")


def test_an_unsupported_mem0ai_is_refused_in_one_line(monkeypatch):
    from memcost_systems import mem0_library

    monkeypatch.setattr(mem0_library.metadata, "version", lambda name: "2.2.1")
    with pytest.raises(
        ValueError,
        match=r"^mem0ai 2\.2\.1 is not supported: the adapter "
        r"supports >=1\.0\.0,<2\.0\.0",
    ):
        mem0_library.library_version()


def test_a_library_exception_for_one_user_fails_that_user_and_the_others_are_built(
    upstream, tmp_path, monkeypatch
):
    import mem0.memory.main as mem0_main

    real_add = mem0_main.Memory.add

    def add(self, messages, *, user_id=None, **kwargs):
        if user_id == "pair-2":
            raise RuntimeError("the library broke on this user")
        return real_add(self, messages, user_id=user_id, **kwargs)

    monkeypatch.setattr(mem0_main.Memory, "add", add)
    run = RunPaths(tmp_path / "run").ensure()
    system = open_system(
        "mem0",
        run.dataset("locomo").ensure(),
        dataset="locomo",
        settings={"vector_store": "faiss", "batch_size": 4},
    )
    report = system.build(api_client(run, upstream.url, tmp_path), conversations())
    assert report.built == 1 and set(report.failed) == {"pair-2"}
    assert "RuntimeError: the library broke on this user" in report.failed["pair-2"]
    assert set(read_done(system.folder)) == {"pair-1"}


def test_a_library_users_fingerprint_follows_its_build_settings_and_models(tmp_path, monkeypatch):
    # mem0's used to name only its version, backend and prompt: a user built with other
    # segments or another extraction model was kept on resume
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    run = RunPaths(tmp_path / "run").ensure()
    client = api_client(run, "http://127.0.0.1:9/v1", tmp_path)

    def of(**settings):
        system = open_system(
            "mem0", run.dataset("locomo").ensure(), dataset="locomo", settings=settings
        )
        return system.fingerprint(client)

    assert of() == of(top_k=5)  # a read setting: the memory is the same
    assert len({of(), of(batch_size=4), of(extraction_model="gpt-5-mini-2025-08-07")}) == 3
