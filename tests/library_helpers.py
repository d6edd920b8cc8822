"""Helpers for the tests of the memory libraries that run in their own environments (cognee,
Hindsight): two users to build, the library's build through the real client against the local
server, and the test that picks out a library's own chat calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fake_api.openai_server import CHAT_PATH, FakeOpenAIServer
from fake_api.stages import library_route
from llm_helpers import api_client
from test_memory import yoga_conversation

from memcost.memory import open_system
from memcost.memory.base import MemorySystem, SystemBuild, system_class
from memcost.paths import RunPaths

PLANTED = "sk-memcost-planted-" + "1b2a3c4d5e6f"


def installed(name: str) -> bool:
    """Whether the system's library environment is here (``make setup-<name>``)."""
    return system_class(name).environment.python().is_file()


def needs(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not installed(name), reason=f"{name}'s environment is missing: make setup-{name}"
    )


def conversations() -> pd.DataFrame:
    """Two users; the second's Ana is Eva, so that a fault can pick her calls."""
    eva = yoga_conversation("pair-2")
    eva["speaker"] = eva["speaker"].str.replace("Ana", "Eva")
    eva["text"] = eva["text"].str.replace("Ana", "Eva")
    return pd.concat([yoga_conversation("pair-1"), eva])


def open_library(name: str, run: RunPaths) -> MemorySystem:
    return open_system(name, run.dataset("locomo").ensure(), dataset="locomo")


def build(
    name: str, run: RunPaths, server: FakeOpenAIServer, tmp: Path, **options: Any
) -> tuple[MemorySystem, SystemBuild]:
    system = open_library(name, run)
    client = api_client(run, server.url, tmp, **options)
    try:
        report = system.build(client, conversations())
    finally:
        client.close()  # its store's files are left as they are (tests read them)
    return system, report


def library_calls(path: str, body: dict) -> bool:
    """A chat request one of the memory libraries made (not an embedding, not the study's)."""
    return path == CHAT_PATH and library_route(body) is not None
