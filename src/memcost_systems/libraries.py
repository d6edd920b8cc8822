"""What the memory systems that run a real library share (mem0, cognee, Hindsight): the gateway
their calls go through, the build over users with its resume and failures, and their files."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import subprocess
import time
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

import memcost_systems.stored as store
from memcost.io import Bar
from memcost.llm import LLMClient
from memcost.manifest import fingerprint
from memcost.memory.base import MemorySystem, SystemBuild, recorded_builds, system_dir
from memcost.paths import REPO_ROOT
from memcost_systems.gateway import Gateway, Route


def session_chunks(stats: pd.DataFrame, tokens_per_chunk: float) -> int:
    """The chunks of ``stats``' conversations when each session is cut into chunks of at most
    ``tokens_per_chunk`` (a session's last chunk half full on average)."""
    sessions = stats["n_sessions"]
    chunks = (stats["text_tokens"] / tokens_per_chunk + sessions / 2).round()
    return int(chunks.clip(lower=sessions).sum())


class LibrarySystem(MemorySystem):
    """A memory system that is a third-party library behind the metering gateway."""

    embedding_step: ClassVar[str]  # the ledger step of its embedding calls, e.g. "mem0/embed"
    # where the library lives when it cannot share this environment (None: it is installed here)
    environment: ClassVar[LibraryEnvironment | None] = None
    # what a built user depends on besides the models and the library's version (fingerprint)
    build_settings: ClassVar[tuple[str, ...]] = ()
    prompts: ClassVar[tuple[str, ...]] = ()  # prompt ids the adapter gives the library
    # the library asks the gateway a call at a time, each one a batch of its own in batch mode
    stages_in_turn = ("extract", "update")
    users_at_once = 1  # :meth:`build` gives the library one user after another
    embedding_dims: int  # known once the gateway is open (:meth:`_gateway`)

    @classmethod
    def library_version(cls) -> str:
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
        """What a finished user was built with: the library's version, each model and its backend,
        the adapter's prompts, the settings."""
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
    def _library(self, gateway: Gateway) -> contextlib.AbstractContextManager[Any]: ...

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
        """Build one user inside ``gateway.context``; write its items when :meth:`_held` says the
        build held."""

    @property
    def folder(self) -> Path:
        return system_dir(self.ds, self.name)

    @property
    def memory_files(self) -> list[Path]:
        return [self.folder / "done.json"]

    def close(self) -> None:
        return None

    def _gateway(self, client: LLMClient) -> Gateway:
        # the width the library's stores are built at: the run's embedding model's own
        self.embedding_dims = client.embedding_dims(self.settings["embedding_model"])
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
        done = set(recorded_builds(client, self.answers_as, done))
        report.resumed = len(done)
        todo = [u for u in groups if u not in done]
        try:
            if todo:
                with self._gateway(client) as gateway, self._library(gateway) as library:
                    for user in Bar(todo, desc=f"{self.name} build", unit="user"):
                        self._build_user(library, gateway, user, groups[user], fingerprint, report)
        finally:
            store.record_failures(self.folder, report.failed)
            self.close()
        report.wall_s = time.perf_counter() - t0
        return report

    def _held(self, gateway: Gateway, user: str, report: SystemBuild, error: str | None) -> bool:
        """Whether ``user``'s build held (if not, why is in ``report.failed``); a swallowed
        run-level stop is raised again."""
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
        """A built user's items; a library that kept nothing of a whole conversation failed that
        user (never written as an empty memory)."""
        calls = gateway.chats(conversation_id=user)
        if items.empty:
            report.failed[user] = (
                f"{self.name} stored no memory from {calls} chat call(s): its model's replies "
                "gave it nothing to keep (too small a model, or a reply format it cannot read)"
            )
            return
        store.write_user(self.folder, user, items, None, fingerprint=fingerprint, calls=calls)
        report.built += 1

    def state(self) -> pd.DataFrame:
        return store.state_table(self.folder)

    def items(self, user: str) -> pd.DataFrame:
        return store.read_user(self.folder, user)[0]


# Variables a child library process never gets: the gateway holds the client's key.
_KEY_NAMES = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)


@dataclass(frozen=True)
class LibraryEnvironment:
    system: str  # the memory system's name, e.g. "cognee"
    package: str  # the distribution whose version counts, e.g. "cognee"
    pinned: str  # what make installs
    supported: tuple[str, str]  # [low, high)
    venv: str  # e.g. ".venv-cognee"
    python_env: str  # the variable naming another interpreter
    why: str  # why it has an environment of its own, for the error message
    # dependencies that must stay below a version there: {package: (version, why)}
    below: tuple[tuple[str, str, str], ...] = ()

    @property
    def setup(self) -> str:
        return f"make setup-{self.system}"

    def python(self) -> Path:
        named = os.environ.get(self.python_env)
        return Path(named) if named else REPO_ROOT / self.venv / "bin" / "python"

    def version(self) -> str:
        """The library's version there, or ``ValueError`` in one line (environment missing, library
        absent, version unsupported)."""
        python = self.python()
        if not python.is_file():
            raise ValueError(
                f"memory system {self.system} runs in its own environment ({self.why}): "
                f"{self.setup}, or set {self.python_env} to a Python with "
                f"{self.package}=={self.pinned}"
            )
        version = _installed(python, self.package)
        if version is None:
            raise ValueError(
                f"memory system {self.system}: {python} has no {self.package} package; "
                f"{self.setup} installs {self.package}=={self.pinned} there"
            )
        low, high = (_parts(v) for v in self.supported)
        if not low <= _parts(version) < high:
            raise ValueError(
                f"{self.package} {version} is not supported: the adapter supports "
                f">={self.supported[0]},<{self.supported[1]} ({self.pinned} pinned; "
                f"{self.setup})"
            )
        for package, limit, why in self.below:
            found = _installed(python, package)
            if found is not None and _parts(found) >= _parts(limit):
                raise ValueError(
                    f"{package} {found} in {self.system}'s environment: {why}; "
                    f"{self.setup} installs {package}<{limit}"
                )
        return version


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


@functools.lru_cache(maxsize=8)
def _installed(python: Path, package: str) -> str | None:
    done = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def keyless_environ() -> dict[str, str]:
    """This process's environment without anything named like a key, token or secret."""
    return {k: v for k, v in os.environ.items() if not _KEY_NAMES.search(k)}


def user_slot(dataset: str, user: str) -> str:
    """A library's name for one user's memory, readable and unique however the id is spelled."""
    safe = re.sub(r"[^A-Za-z0-9]", "_", user)[:40]
    return f"{dataset}_{safe}_{hashlib.sha1(user.encode()).hexdigest()[:8]}"
