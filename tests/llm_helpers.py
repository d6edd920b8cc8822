"""Helpers for the model-call client's tests: a client pointed at the local server, with short
timeouts and few retries so the suite stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memcost.llm import ChatRequest, LLMClient, make_client
from memcost.paths import RunPaths

TEST_KEY = "sk-test-memcost-0123456789abcdef"


def api_client(run: RunPaths, url: str, tmp: Path, **options: Any) -> LLMClient:
    """A client for the local server as the ``openai`` backend (key from OPENAI_API_KEY)."""
    options.setdefault("max_retries", 3)
    options.setdefault("progress", False)
    options.setdefault("env_file", tmp / "no.env")  # never the repository's real .env
    options.setdefault("request_timeout_s", 5.0)
    return make_client(run, backend=options.pop("backend", "openai"), base_url=url, **options)


def question(
    i: int, *, model: str = "gpt-5-mini-2025-08-07", stage: str = "read", **fields: Any
) -> ChatRequest:
    """A small request whose user message names item ``i``."""
    if "reasoning_effort" not in fields and model.startswith("gpt-5"):
        fields["reasoning_effort"] = "low"
    return ChatRequest(
        model=model,
        messages=(("system", "Answer briefly."), ("user", f"What is item {i}?")),
        stage=stage,
        prompt_version="test_prompt@v1",
        tags={"dataset": "test", "question_id": f"q{i}", **fields.pop("tags", {})},
        **fields,
    )
