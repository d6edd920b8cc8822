"""What the memory systems that run a real library share (mem0, cognee, Hindsight): the gateway
their calls go through, the build over users with its resume and failures, and their files.

A library pointed at the gateway may swallow an HTTP error and carry on with an empty result, so
whether a user's build held is decided here, after the library returns: a run-level stop (budget,
outage) the library swallowed is raised again, a call of the user that failed for good fails the
user whatever the library made of it, and a library error fails the user too. A failed user is
recorded, retried by the next build, and never written as an empty memory.
"""

from __future__ import annotations

import contextlib
import time
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
from tqdm.auto import tqdm

import memcost.systems.store as store
from memcost.llm import LLMClient
from memcost.llm.gateway import Gateway, Route
from memcost.manifest import fingerprint
from memcost.systems.base import MemorySystem, SystemBuild
from memcost.systems.environments import LibraryEnvironment


class LibrarySystem(MemorySystem):
    """A memory system that is a third-party library behind the metering gateway."""

    embedding_step: ClassVar[str]  # the ledger step of its embedding calls, e.g. "mem0/embed"
    # where the library lives when it cannot share this environment (None: it is installed here)
    environment: ClassVar[LibraryEnvironment | None] = None
    # what a built user depends on besides the models and the library's version (fingerprint)
    build_settings: ClassVar[tuple[str, ...]] = ()
    prompts: ClassVar[tuple[str, ...]] = ()  # prompt ids the adapter gives the library

    @classmethod
    def library_version(cls) -> str:
        """The library's version, or ``ValueError`` in one line when it cannot run here."""
        assert cls.environment is not None, f"{cls.name} names no environment"
        return cls.environment.version()

    @classmethod
    def check_available(cls) -> None:
        cls.library_version()

    @staticmethod
    @abstractmethod
    def route(body: Mapping[str, Any]) -> Route:
        """The library's chat request to its ledger stage, step and offline stand-in."""

    def fingerprint(self, client: LLMClient) -> str:
        """What a finished user was built with (a build with another rebuilds it): the library
        and its version, each model with the backend that serves it, the adapter's prompts and
        the build's settings."""
        return fingerprint(
            stage=self.name,
            client=client,
            models=[v for k, v in self.settings.items() if k.endswith("_model")],
            prompts=self.prompts,
            parameters={
                "library": self.library_version(),
                **{k: self.settings[k] for k in self.build_settings},
            },
        )

    @abstractmethod
    def _library(self, gateway: Gateway) -> contextlib.AbstractContextManager[Any]:
        """The library, ready to take users, its calls going to ``gateway``."""

    @abstractmethod
    def _build_user(
        self,
        library: Any,
        gateway: Gateway,
        user: str,
        turns: pd.DataFrame,
        fingerprint: str,
        report: SystemBuild,
    ) -> None:
        """Build one user (inside ``gateway.context(conversation_id=user)``); write its items
        when :meth:`_held` says the build held."""

    @property
    def folder(self) -> Path:
        return store.system_dir(self.ds, self.name)

    @property
    def memory_files(self) -> list[Path]:
        return [self.folder / "done.json"]

    def close(self) -> None:
        """Stop what the library started for this system (a database server); data stays."""
        return None

    def _gateway(self, client: LLMClient) -> Gateway:
        return Gateway(
            client,
            type(self).route,
            embedding_step=self.embedding_step,
            tags={"dataset": self.dataset, "system": self.answers_as},
        )

    def build(self, client: LLMClient, conversations: pd.DataFrame) -> SystemBuild:
        t0 = time.perf_counter()
        type(self).check_available()
        groups = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
        report = SystemBuild(self.name, users=len(groups))
        fingerprint = self.fingerprint(client)
        done = store.finished(self.folder, list(groups), fingerprint)
        report.resumed = len(done)
        todo = [u for u in groups if u not in done]
        try:
            if todo:
                with self._gateway(client) as gateway, self._library(gateway) as library:
                    for user in tqdm(todo, desc=f"{self.name} build", unit="user", leave=False):
                        self._build_user(library, gateway, user, groups[user], fingerprint, report)
        finally:
            store.record_failures(self.folder, report.failed)
            self.close()
        report.wall_s = time.perf_counter() - t0
        return report

    def _held(self, gateway: Gateway, user: str, report: SystemBuild, error: str | None) -> bool:
        """Whether ``user``'s build held; if not, why is in ``report.failed``. A run-level stop
        the library swallowed is raised again."""
        gateway.raise_fatal()
        failed = gateway.failures(conversation_id=user)
        if failed:
            report.failed[user] = f"{len(failed)} calls failed: {failed[0]['error']}"
        elif error:
            report.failed[user] = error
        return user not in report.failed

    def _write(
        self,
        gateway: Gateway,
        user: str,
        items: pd.DataFrame,
        fingerprint: str,
        report: SystemBuild,
    ) -> None:
        """A built user's items, with the number of chat calls the library made for it."""
        calls = gateway.chats(conversation_id=user)
        store.write_user(self.folder, user, items, None, fingerprint=fingerprint, calls=calls)
        report.built += 1

    def state(self) -> pd.DataFrame:
        return store.state_table(self.folder)
