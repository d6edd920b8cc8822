"""Kernels forked from the warm server are the kernels a fresh launch gives: the same options,
paths, environment and signals as seen from a cell; a dead one is a failed notebook; and
nothing outlives the process that started them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from memcost.run import kernel_forks
from memcost.run.execute import NotebookFailed, execute_notebook

pytestmark = pytest.mark.timeout(120)

FINGERPRINT = """
import json, os, signal, sys
import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
from pandas._config.config import _registered_options

per_call = {"JPY_PARENT_PID", "PYTEST_CURRENT_TEST", "MEMCOST_KERNEL_FORKS"}  # set apart
fingerprint = {
    "pandas": {k: repr(pd.get_option(k)) for k in sorted(_registered_options)},
    "rcParams": {k: repr(v) for k, v in sorted(matplotlib.rcParams.items())},
    "backend": matplotlib.get_backend(),
    "path": sys.path, "flags": repr(sys.flags), "cwd": os.getcwd(), "argv0": sys.argv[0],
    "env": {k: v for k, v in os.environ.items() if k not in per_call},
    "session_leader": os.getsid(0) == os.getpid(),
    "signals": {int(s): repr(signal.getsignal(s))
                for s in (signal.SIGINT, signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE)},
    "displayhook": type(sys.displayhook).__name__,
    "figure_hook": [f.__module__ for f in get_ipython().events.callbacks["post_execute"]],
}
plt.figure()  # the inline backend takes over from here, as in any notebook
fingerprint["figure_hook_after"] = [
    f.__module__ for f in get_ipython().events.callbacks["post_execute"]]
"""


def _notebook(folder: Path, source: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("out = ''", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(source),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = folder / "probe.ipynb"
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    return path


def _warm_server() -> kernel_forks.ForkServer:
    kernel_forks.expect_kernels(2)
    server = kernel_forks._SERVER
    assert server is not None
    deadline = time.monotonic() + 60
    while not server.ready():
        assert time.monotonic() < deadline, "the fork server did not get ready in 60 s"
        time.sleep(0.05)
    return server


def _run(folder: Path, source: str, name: str) -> dict:
    out = folder / f"{name}.json"
    execute_notebook(
        _notebook(
            folder,
            source + f"\njson.dump(fingerprint, open({str(out)!r}, "
            "'w'))\nfingerprint['pid'] = os.getpid()",
        ),
        folder / f"{name}.ipynb",
        {"out": str(out)},
        False,
    )
    return json.loads(out.read_text(encoding="utf-8"))


def test_a_forked_kernel_is_what_a_fresh_launch_gives(tmp_path, monkeypatch):
    for name in kernel_forks.THREAD_LIMITS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(kernel_forks.SWITCH, "0")
    fresh = _run(tmp_path, FINGERPRINT + "\nfingerprint['parent'] = os.getppid()", "fresh")
    monkeypatch.setenv(kernel_forks.SWITCH, "1")
    server = _warm_server()
    forked = _run(tmp_path, FINGERPRINT + "\nfingerprint['parent'] = os.getppid()", "forked")
    assert fresh.pop("parent") == os.getpid()
    assert forked.pop("parent") == server.process.pid  # it was forked, not launched
    for key in fresh:
        assert forked[key] == fresh[key], key
    assert fresh["pandas"]["display.max_columns"] == "20"  # a kernel's, not a terminal's
    assert fresh["env"]["OMP_NUM_THREADS"] == fresh["env"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "matplotlib_inline.backend_inline" in fresh["figure_hook_after"]


def test_a_forked_kernel_ends_as_a_program_does_without_its_teardown(tmp_path, monkeypatch):
    # a forked kernel leaves without freeing its modules one by one (half a second of every
    # notebook), but what a normal exit does that a notebook can rely on is still done
    monkeypatch.setenv(kernel_forks.SWITCH, "1")
    _warm_server()
    source = textwrap.dedent(f"""
        import atexit, threading, time
        from pathlib import Path
        folder = Path({str(tmp_path)!r})
        left_open = open(folder / "left_open.txt", "w")  # never closed by the notebook
        left_open.write("flushed at exit")
        atexit.register(lambda: (folder / "atexit.txt").write_text("ran"))
        def late():
            time.sleep(0.3)
            (folder / "thread.txt").write_text("joined")
        threading.Thread(target=late, daemon=False).start()  # the exit waits for it
    """)
    execute_notebook(_notebook(tmp_path, source), tmp_path / "out.ipynb", {}, False)
    deadline = time.monotonic() + 10
    while not (tmp_path / "atexit.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "left_open.txt").read_text() == "flushed at exit"
    assert (tmp_path / "thread.txt").read_text() == "joined"
    assert (tmp_path / "atexit.txt").read_text() == "ran"


def test_a_forked_kernel_that_dies_is_a_failed_notebook(tmp_path, monkeypatch):
    monkeypatch.setenv(kernel_forks.SWITCH, "1")
    server = _warm_server()
    source = (
        "import os, signal, sys, time\nprint(os.getppid())\nsys.stdout.flush()\n"
        "time.sleep(0.5)\nos.kill(os.getpid(), signal.SIGKILL)"
    )
    with pytest.raises(NotebookFailed, match="kernel died"):
        execute_notebook(_notebook(tmp_path, source), tmp_path / "out.ipynb", {}, False)
    printed = json.loads((tmp_path / "out.ipynb").read_text(encoding="utf-8"))
    outputs = printed["cells"][1]["outputs"]
    assert outputs and outputs[0]["text"].strip() == str(server.process.pid)


OWNER = """
import sys, time
from pathlib import Path
from memcost.run import kernel_forks
from memcost.run.execute import execute_notebook
folder = Path(sys.argv[1])
kernel_forks.expect_kernels(2)
while not kernel_forks._SERVER.ready():
    time.sleep(0.05)
(folder / "server.pid").write_text(str(kernel_forks._SERVER.process.pid))
execute_notebook(folder / "probe.ipynb", folder / "out.ipynb", {}, False)
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_nothing_outlives_a_killed_owner(tmp_path):
    _notebook(
        tmp_path,
        textwrap.dedent(f"""
        import os, time
        open({str(tmp_path / "kernel.pid")!r}, 'w').write(str(os.getpid()))
        time.sleep(120)
    """),
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path)], env={**os.environ, kernel_forks.SWITCH: "1"}
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "kernel.pid").exists():
            assert owner.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        server_pid = int((tmp_path / "server.pid").read_text())
        kernel_pid = int((tmp_path / "kernel.pid").read_text())
        assert kernel_pid != owner.pid and not _gone(kernel_pid)
        owner.send_signal(signal.SIGKILL)  # no atexit, no cleanup: only the pipes close
        owner.wait()
        deadline = time.monotonic() + 15
        while not (_gone(server_pid) and _gone(kernel_pid)):
            assert time.monotonic() < deadline, "the server or its kernel outlived the owner"
            time.sleep(0.1)
    finally:
        if owner.poll() is None:
            owner.kill()


def test_a_kernel_being_shut_down_is_not_interrupted(monkeypatch):
    # jupyter_client sends SIGINT before every shutdown; a kernel finishing its last reply
    # then printed "KeyboardInterrupt caught in kernel" on the terminal
    import asyncio

    from memcost.run.kernel_manager import kernel_manager_class

    manager = kernel_manager_class()()
    sent = []

    async def signal_kernel(signum):
        sent.append(signum)

    monkeypatch.setattr(manager, "_async_signal_kernel", signal_kernel)
    manager.shutting_down = True
    asyncio.run(manager._async_interrupt_kernel())
    assert sent == []


def test_a_servers_kernels_are_forked_from_the_first_and_end_without_a_sigterm(
    tmp_path, monkeypatch
):
    # The first kernel waits for the server's imports: started fresh, it imported for 2.5 s
    # beside them. Every kernel ends at its shutdown request: ipykernel's control thread
    # publishes "idle" after it, the exit handlers stopped IOPub beneath it about once in seven
    # kernels, and the kernel hung until the kernel manager's SIGTERM, 2.5 s later.
    import logging

    monkeypatch.setenv(kernel_forks.SWITCH, "1")
    monkeypatch.setattr(kernel_forks, "FIRST_WAIT_S", 60.0)  # a busy machine imports slowly
    kernel_forks.stop()
    notebook = _notebook(tmp_path, "import os\nparent = os.getppid()\nparent")
    said: list[str] = []

    class Said(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    handler, logger = Said(level=logging.DEBUG), logging.getLogger("traitlets")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    parents = []
    try:
        for i in range(12):
            execute_notebook(notebook, tmp_path / f"out{i}.ipynb", {}, False)
            printed = json.loads((tmp_path / f"out{i}.ipynb").read_text(encoding="utf-8"))
            parents.append("".join(printed["cells"][-1]["outputs"][0]["data"]["text/plain"]))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert parents == [str(kernel_forks._SERVER.process.pid)] * 12  # forked, the first too
    assert sum("Starting kernel" in m for m in said) == 12
    assert not [m for m in said if "taking too long" in m]
