"""The model registry by capability, request bodies built from it, and model lifecycle."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date

import pytest
from fake_api.openai_server import FakeOpenAIServer

from memcost import catalog
from memcost.catalog import price_for
from memcost.llm.providers import chat_body
from memcost.llm.requests import ChatRequest, ModelCapabilityError
from memcost.paths import REPO_ROOT
from memcost.run.checks import check_lifecycle
from memcost.run.presets import PresetError, resolve_preset
from memcost.run.runner import discover_notebooks


def _request(model: str, **fields) -> ChatRequest:
    return ChatRequest(model, (("user", "Hi"),), "read", "t@v1", tags={"conversation_id": "c1"},
                       **fields)  # fmt: skip


def test_the_paper_models_and_their_successors():
    nano = catalog.model_info("gpt-5-nano-2025-08-07")
    assert (nano.shutdown_date, nano.successor) == ("2026-12-11", "gpt-6-luna")
    assert catalog.model_info("gpt-5-mini-2025-08-07").successor == "gpt-6.1-terra"
    assert catalog.model_info("gpt-5").successor == "gpt-6.1-sol"
    terra = catalog.model_info("gpt-6.1-terra")
    assert (terra.context_window, terra.prompt_limit, terra.max_output_tokens) == (
        1_050_000,
        922_000,
        128_000,
    )
    assert "xhigh" in terra.reasoning_efforts and not terra.temperature
    assert terra.shutdown_date is None
    assert catalog.model_info("text-embedding-3-small").shutdown_date is None
    oss = catalog.model_info("openai/gpt-oss-120b")
    assert oss.output_limit_param == "max_tokens" and oss.temperature and oss.reasoning
    assert price_for("gpt-6.1-terra").output == 5.00 and price_for("gpt-6-luna").input == 0.10


def test_bodies_follow_capabilities_not_names():
    terra = chat_body(_request("gpt-6.1-terra", reasoning_effort="xhigh", max_output_tokens=900))
    assert terra["max_completion_tokens"] == 900 and terra["reasoning_effort"] == "xhigh"
    assert "temperature" not in terra and "max_tokens" not in terra
    assert terra["prompt_cache_key"] == "c1"
    with pytest.raises(ValueError, match="rejects temperature"):
        _request("gpt-6-luna", temperature=0.0)
    with pytest.raises(ModelCapabilityError, match="reasoning_effort='minimal'.*takes none, low"):
        chat_body(_request("gpt-6.1-terra", reasoning_effort="minimal"))
    with pytest.raises(ModelCapabilityError, match="output limit above 128,000"):
        chat_body(_request("gpt-5-mini", max_output_tokens=200_000))
    oss = chat_body(_request("openai/gpt-oss-120b", temperature=0.0, max_output_tokens=8000,
                             reasoning_effort="low"), backend="openrouter")  # fmt: skip
    assert (oss["max_tokens"], oss["temperature"], oss["reasoning_effort"]) == (8000, 0.0, "low")
    assert "prompt_cache_key" not in oss


def test_an_unknown_model_is_an_error_naming_what_to_add_and_a_declared_one_is_plain_chat():
    with pytest.raises(
        KeyError,
        match="unknown model 'llama3.1:8b'.*memcost/assets/models.yaml.*model_capabilities=",
    ) as info:
        chat_body(_request("llama3.1:8b"))
    assert "gpt-6.1-terra" in str(info.value)  # the known models are listed
    assert not catalog.is_known("gpt-5.1-mini")  # no guess from the name
    declared = catalog.declare_model("llama3.1:8b", {"context_window": 131_072})
    params = catalog.generation_params("llama3.1:8b", "low")
    body = chat_body(_request("llama3.1:8b", max_output_tokens=300, **params), declared,
                     backend="custom")  # fmt: skip
    assert body["temperature"] == 0.0 and body["max_tokens"] == 300
    assert "reasoning_effort" not in body  # a model that does not reason has nothing to set
    with pytest.raises(ValueError, match="unknown field.*context"):
        catalog.declare_model("x", {"contxt_window": 1})


def test_tokenizer_falls_back_to_o200k():
    assert catalog.encoding_name("gpt-6.1-terra") == "o200k_base"
    assert catalog.encoding_name("some-future-model") == "o200k_base"
    assert catalog.encoding_name("gpt-4") == "cl100k_base"


def test_lifecycle_dates_and_stand_ins(monkeypatch):
    monkeypatch.setenv(catalog.TODAY_ENV, "2026-12-10")
    assert catalog.today() == date(2026, 12, 10)
    before = catalog.status("gpt-5-mini-2025-08-07", catalog.today())
    assert before.days_left == 1 and not before.shut_down
    after = catalog.status("gpt-5-mini-2025-08-07", date(2026, 12, 11))
    assert after.shut_down and "successor is gpt-6.1-terra" in after.describe()
    served = catalog.status("gpt-6.1-terra", date(2026, 12, 1), {"gpt-6.1-terra": "2026-11-30"})
    assert served.shut_down and served.source == "/v1/models"
    assert catalog.stand_ins({"04": {"judge_model": "gpt-6.1-terra"}}) == {
        "gpt-5-mini-2025-08-07": "gpt-6.1-terra"
    }
    monkeypatch.setenv(catalog.TODAY_ENV, "12/12/2026")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        catalog.today()


@pytest.mark.parametrize("keys", [True, False])
def test_paper_preset_refuses_after_shutdown_before_any_call(tmp_path, keys):
    # without keys too: a key would not make a shut-down model run, the successor preset would
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["MEMCOST_TODAY"] = "2026-12-12"
    if keys:
        env.update(OPENAI_API_KEY="sk-fake", OPENROUTER_API_KEY="sk-fake")
    done = subprocess.run(
        [sys.executable, "-m", "memcost", "run", "--params", "paper_locomo",
         "--run-name", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2  # bad input: refused before anything ran
    out = done.stdout + done.stderr
    assert "gpt-5-mini-2025-08-07 was shut down on 2026-12-11" in out
    assert "python -m memcost run --params current_locomo" in out
    assert not (tmp_path / "run").exists()  # stopped before the run directory, before any call


def test_current_presets_pass_and_the_provider_listing_is_a_second_opinion(monkeypatch):
    notebooks = discover_notebooks()
    monkeypatch.setenv(catalog.TODAY_ENV, "2026-12-12")
    for name in ("current_locomo", "current_longmemeval", "current_personamem"):
        check_lifecycle(resolve_preset(name, notebooks), notebooks)  # no error
    with FakeOpenAIServer() as server:
        server.models = {"gpt-6.1-terra": "2026-12-01"}
        monkeypatch.setenv("MEMCOST_TEST_KEY", "sk-test")
        preset = resolve_preset(
            "current_locomo",
            notebooks,
            overrides={
                "base_url": server.url,
                "client": {"api_key_env": "MEMCOST_TEST_KEY", "model_backends": {}},
            },
        )
        with pytest.raises(
            PresetError,
            match=r"gpt-6.1-terra was shut down on 2026-12-01 "
            r"\(/v1/models\)",
        ):
            check_lifecycle(preset, notebooks)
    offline = resolve_preset(
        "paper_locomo",
        notebooks,
        overrides={"backend": "offline", "client": {"model_backends": {}}},
    )
    check_lifecycle(offline, notebooks)  # an offline run calls no model: nothing to refuse


def test_a_server_of_your_own_is_not_bound_by_a_providers_shutdown(monkeypatch):
    notebooks = discover_notebooks()
    monkeypatch.setenv(catalog.TODAY_ENV, "2027-01-01")
    own = resolve_preset(
        "paper_locomo",
        notebooks,
        overrides={
            "backend": "custom",
            "base_url": "http://127.0.0.1:9/v1",
            "client": {"model_backends": {}},
        },
    )
    check_lifecycle(own, notebooks)  # vLLM serving the old snapshot names: nothing to refuse
    unknown = resolve_preset(
        "paper_locomo",
        notebooks,
        overrides={
            "backend": "custom",
            "base_url": "http://127.0.0.1:9/v1",
            "client": {"model_backends": {}},
            "reader_model": "llama3.1:8b",
        },
    )
    with pytest.raises(PresetError, match="unknown model 'llama3.1:8b'.*model_capabilities"):
        check_lifecycle(unknown, notebooks)
