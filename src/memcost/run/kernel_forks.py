"""Notebook kernels forked from a process that has already imported what the notebooks import.

Every kernel a run starts is a new Python process that imports ipykernel, pandas, matplotlib
and this package before its first cell does anything: about 2.5 s of CPU, as much as the
offline work of a short notebook, 17 times in a smoke run. A fork server, started once per
process that runs notebooks, does those imports once; each kernel is then a fork of it that
starts ipykernel exactly as ``python -m ipykernel_launcher -f <connection file>`` would, in its
own session, with the environment and working directory the kernel manager asked for.

A kernel is forked only when that gives it what a fresh launch would: the standard launcher
command of this interpreter, and the very environment the server was started with (a module
may read a variable when it is imported). Anything else starts as a fresh process,
and so does every kernel with ``MEMCOST_KERNEL_FORKS=0``. The server imports nothing a notebook
does not (no seaborn, no faiss, no model client), and it ends when the process that started it
ends: its requests pipe closes. A forked kernel watches the server as a fresh kernel watches
its parent, so no kernel outlives its run.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from memcost.kernel_server import INLINE_BACKEND, LAUNCHER, READY

SWITCH = "MEMCOST_KERNEL_FORKS"  # "0" (or "no", "false"): every kernel is a fresh process
# Variables that change from one kernel to the next and are only read while a kernel runs (each
# kernel gets its own value): no reason for a new server.
PER_CALL = frozenset({"PYTEST_CURRENT_TEST"})
# Every kernel does its numerical work on one thread, unless the environment sets these itself.
# OpenBLAS's threads and FAISS's OpenMP team spin-wait between parallel sections: two notebooks
# side by side on two cores took each other's core (LoCoMo's notebook 01 ran 31 s beside 03
# instead of 12 s alone). One thread also sums a matrix product in one order on every machine,
# so the update phase's nearest facts (and its ties) do not depend on how many cores ran it.
THREAD_LIMITS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# How long the first kernel of a server waits for the server's imports (about 1.2 s of CPU) before
# it is started fresh instead: a fresh kernel imports the same for 2.5 s, beside the server.
FIRST_WAIT_S = 3.0


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "no", "false", "off")


def kernel_env(env: dict[str, str]) -> dict[str, str]:
    """A kernel's environment: ``env`` with :data:`THREAD_LIMITS` where it sets none."""
    return {**THREAD_LIMITS, **env}


def server_env(env: dict[str, str]) -> dict[str, str]:
    """The environment the server imports in: the kernels' (without the variables the kernel
    manager sets per kernel), with the backend a kernel would set itself."""
    chosen = {k: v for k, v in kernel_env(env).items() if not k.startswith("JPY_")}
    chosen = {k: v for k, v in chosen.items() if k not in PER_CALL}
    chosen.setdefault("MPLBACKEND", INLINE_BACKEND)
    chosen.pop("PYTHONEXECUTABLE", None)  # as the kernel manager leaves it out of a kernel's
    return chosen


# ---------------------------------------------------------------------------------------------
# The side that runs notebooks
# ---------------------------------------------------------------------------------------------
class ForkServer:
    """One server process, started for an environment; :meth:`fork` returns a kernel's pid."""

    def __init__(self, env: dict[str, str]):
        self.env = server_env(env)
        read_fd, self._reply_w = os.pipe()
        self._reply = os.fdopen(read_fd, "r", encoding="utf-8")
        # started in an empty folder, so that nothing is imported from where the run was typed
        # (``python -m`` puts it first on sys.path; each kernel puts its own there instead)
        self._folder = tempfile.mkdtemp(prefix="memcost-kernels-")
        command = [sys.executable, "-m", "memcost.kernel_server", str(self._reply_w)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            pass_fds=(self._reply_w,),
            env=self.env,
            cwd=self._folder,
            text=True,
            encoding="utf-8",
        )
        os.close(self._reply_w)
        self._ready = False
        self._waited = False  # the first kernel's wait for the imports is the only one

    def ready(self, first_wait_s: float = 0.0) -> bool:
        """Whether it has finished importing; the first caller to offer ``first_wait_s`` waits
        that long at most, every later one not at all (a server that never gets ready costs
        one wait)."""
        with _LOCK:
            wait_s = 0.0 if self._waited else first_wait_s
            self._waited = self._waited or first_wait_s > 0
            return self._check_ready(wait_s)

    def _check_ready(self, wait_s: float = 0.0) -> bool:
        if not self._ready and self.process.poll() is None:
            if select.select([self._reply], [], [], wait_s)[0]:
                self._ready = self._reply.readline().strip() == READY
        return self._ready and self.process.poll() is None

    def fork(self, args: list[str], env: dict[str, str], cwd: str) -> int | None:
        with _LOCK:  # one request and its reply at a time (datasets' notebooks run side by side)
            return self._fork(args, env, cwd)

    def _fork(self, args: list[str], env: dict[str, str], cwd: str) -> int | None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"args": args, "env": env, "cwd": cwd}) + "\n")
            self.process.stdin.flush()
            if not select.select([self._reply], [], [], 30)[0]:
                self.process.kill()  # wedged: a kernel it forks late ends with it, unused
                return None
            line = self._reply.readline().strip()
            return int(line) if line.isdigit() else None
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()  # the server's loop ends; kernels it forked go on
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reply.close()
        shutil.rmtree(self._folder, ignore_errors=True)


_SERVER: ForkServer | None = None
_LOCK = threading.RLock()  # the server, and the one request in flight on its pipes
_WANTED = True  # False when the runner knows it runs a single kernel: not worth a server


def expect_kernels(count: int) -> None:
    """The runner says how many kernels it will start: a server for two or more, from now on
    (it imports while the first notebook runs), none for one."""
    global _WANTED
    _WANTED = count >= 2
    if _WANTED and enabled():
        _server_for(dict(os.environ))


def _server_for(env: dict[str, str]) -> ForkServer:
    with _LOCK:
        return _start_server_for(env)


def _start_server_for(env: dict[str, str]) -> ForkServer:
    global _SERVER
    if _SERVER is not None and _SERVER.env != server_env(env):
        _SERVER.stop()
        _SERVER = None
    if _SERVER is None or _SERVER.process.poll() is not None:
        if _SERVER is None:
            atexit.register(stop)
        _SERVER = ForkServer(env)
    return _SERVER


def stop() -> None:
    global _SERVER
    if _SERVER is not None:
        _SERVER.stop()
        _SERVER = None


def fork_kernel(cmd: list[str], env: dict[str, str], cwd: str) -> ForkedKernel | None:
    """A kernel forked for this launch, or None: the caller starts it fresh (forks switched
    off, another command, or a server not ready, which is then started or replaced for this
    environment so that the next kernel is forked). A server's first kernel waits for its
    imports up to ``FIRST_WAIT_S``, later ones not at all."""
    if not (enabled() and _WANTED) or not _standard_launch(cmd):
        return None
    server = _server_for(env)
    if not server.ready(FIRST_WAIT_S):
        return None
    pid = server.fork(cmd[3:], {k: v for k, v in env.items() if k != "JPY_PARENT_PID"}, cwd)
    return None if pid is None else ForkedKernel(pid, server.process.pid)


def _standard_launch(cmd: list[str]) -> bool:
    return (
        len(cmd) >= 3
        and cmd[1:3] == ["-m", LAUNCHER]
        and os.path.realpath(cmd[0]) == os.path.realpath(sys.executable)
    )


class ForkedKernel:
    """What the kernel manager holds of a forked kernel: the parts of ``Popen`` it uses. The
    server reaps the kernel, so its exit status is not known here (1 once it has gone)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, server_pid: int):
        self.pid, self._server_pid = pid, server_pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not _running(self.pid, self._server_pid):
            self.returncode = 1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.05)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _running(pid: int, parent: int) -> bool:
    """Whether ``pid`` is still the server's live child (not a later process given its pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # the pid now belongs to another user's process
    if not Path("/proc/self").exists():
        return True  # no /proc (macOS): the signal test is all there is
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z" and int(fields[1]) == parent


def provisioner_class() -> type:
    """jupyter_client's local provisioner, forking the kernel when :func:`fork_kernel` can."""
    from jupyter_client.provisioning import LocalProvisioner

    class ForkingProvisioner(LocalProvisioner):
        async def launch_kernel(self, cmd: list[str], **kwargs: Any):
            streams = [kwargs.get(k) for k in ("stdin", "stdout", "stderr")]
            if kwargs.get("env") is not None:
                kwargs["env"] = kernel_env(kwargs["env"])
            env, cwd = kwargs.get("env"), str(kwargs.get("cwd") or os.getcwd())
            kernel = None if any(streams) or env is None else fork_kernel(cmd, env, cwd)
            if kernel is None:
                return await super().launch_kernel(cmd, **kwargs)
            self.process = kernel
            self.pid = self.pgid = kernel.pid
            self.cwd = cwd
            return self.connection_info

    return ForkingProvisioner
