"""The fork server of notebook kernels: ``python -m memcost.kernel_server REPLY_FD``.

It imports what the notebooks import, writes ``ready`` to ``REPLY_FD``, then reads one request
per line on its standard input and forks a kernel for it, answering with the kernel's pid. Only
the standard library is imported before the preload, so the kernels get exactly the modules a
fresh kernel would import. :mod:`memcost.run.kernel_forks` starts it and says why.
"""

from __future__ import annotations

import atexit
import gc
import importlib.util
import json
import os
import signal
import sys
import threading
from typing import Any

# The modules the notebooks' first cells import, and what those import (ipykernel's own, too).
PRELOAD = (
    "ipykernel.kernelapp",
    "IPython.display",
    "numpy",
    "pandas",
    "pyarrow.parquet",
    "matplotlib.pyplot",
    "memcost.datasets",
    "memcost.io",
    "memcost.llm",
    "memcost.manifest",
    "memcost.params",
    "memcost.paths",
    "memcost.plots",
    "memcost.prices",
    "memcost.tokens",
)
# What ipykernel sets when the environment names no backend (its kernelapp does so at start):
# matplotlib reads the variable when it is imported, so the server sets it first.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
READY = "ready"
CONTROL_FINISH_S = 1.0  # the longest a kernel waits for its control thread to end
LAUNCHER = "ipykernel_launcher"


def serve(requests_fd: int, reply_fd: int) -> None:
    """Import, say ready, then fork one kernel per request line until the requests pipe
    closes. Kernels are reaped by the system (no zombie a liveness check could mistake)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    entry = sys.path[0]  # the server's own folder, which ``python -m`` put first
    _preload()
    # What the imports made lives as long as the server and every kernel: set apart from the
    # collector, a kernel's collections look only at what the kernel itself made (a full one
    # took 50 ms, at every exit and often while pandas works), and no kernel copies the pages
    # of the server's objects only to update their collector's bookkeeping.
    gc.collect()
    gc.freeze()
    # closefd=False: a forked kernel puts /dev/null on that descriptor, and nothing of the
    # server's may close it (or a descriptor of the kernel's given its number) later
    requests = os.fdopen(requests_fd, "r", encoding="utf-8", closefd=False)
    os.write(reply_fd, f"{READY}\n".encode())
    for line in requests:
        request = {**json.loads(line), "server_entry": entry}
        pid = os.fork()
        if pid == 0:
            _become_kernel(request, (requests_fd, reply_fd))  # does not return
        os.write(reply_fd, f"{pid}\n".encode())


class _KernelShell:
    """What ``get_ipython()`` is inside a Jupyter kernel, as far as an import looks at it."""

    kernel = True  # pandas: "IPython as a Jupyter kernel", so 20 display columns, not 0


class _KernelStream:
    """A standard stream with the encoding a kernel's has (pandas keeps it as its display
    encoding); what is written goes to the real stream."""

    def __init__(self, stream: Any, encoding: str):
        self._stream, self.encoding = stream, encoding

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _preload() -> None:
    """Import as a kernel would: a module that asks whether it runs in one (pandas chooses its
    display width so) must hear yes, and one that reads the streams' encoding must read a
    kernel's, as it would have."""
    import builtins
    import importlib

    from ipykernel.iostream import OutStream

    real = sys.stdout, sys.stderr
    builtins.get_ipython = lambda: _KernelShell  # type: ignore[attr-defined]
    sys.stdout, sys.stderr = (_KernelStream(s, OutStream.encoding) for s in real)
    try:
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the kernel imports it again, and reports why
                pass
    finally:
        del builtins.get_ipython  # type: ignore[attr-defined]
        sys.stdout, sys.stderr = real
    try:
        from memcost import tokens

        tokens.get_encoding()  # the tokenizer's ranks, read and checked once
    except Exception:  # noqa: BLE001 - as above: the notebook that counts tokens says why
        pass


def _become_kernel(request: dict[str, Any], server_fds: tuple[int, ...]) -> None:
    """In the forked child: the process ``python -m ipykernel_launcher ARGS`` would be."""
    os.setsid()  # its own session, as the kernel manager starts kernels: interrupts reach it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # so that its own subprocesses can be waited
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # in place of the requests pipe (as a fresh kernel, it reads nothing)
    for fd in {null, *server_fds} - {0}:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    parent = str(os.getppid())
    os.environ["JPY_PARENT_PID"] = parent
    if sys.path and sys.path[0] == request["server_entry"]:
        del sys.path[0]  # what ``python -m`` put first, as ipykernel_launcher drops it
    # ipykernel read JPY_PARENT_PID when the server imported it, before there was one: said
    # again here, the kernel watches the server and ends when it does
    launcher = importlib.util.find_spec(LAUNCHER)
    sys.argv = [
        launcher.origin if launcher and launcher.origin else LAUNCHER,
        *request["args"],
        f"--IPKernelApp.parent_handle={parent}",
    ]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()
    _let_control_finish(kernelapp.IPKernelApp)
    _exit_without_teardown()
    sys.exit(0)  # (where that cannot be done) the interpreter shuts down as a kernel's would


def _let_control_finish(app_class: Any) -> None:
    """Wait (a second at most) for the kernel's control thread to end after a shutdown request.

    The request is handled on that thread: it stops the main loop, so this function runs,
    and then publishes the kernel's "idle" status through the IOPub thread. The exit handlers
    stop that thread; a status sent as it stops waits forever on a socket nobody reads, and the
    handler that joins the control thread then hangs until the kernel manager's SIGTERM, 2.5 s
    later (one kernel in seven here). Joined first, the control thread has sent its status.
    """
    if not app_class.initialized():
        return
    control = getattr(app_class.instance(), "control_thread", None)
    if control is not None and control.is_alive():
        control.join(timeout=CONTROL_FINISH_S)


def _exit_without_teardown() -> None:
    """End the kernel as the interpreter ends a program, less its teardown.

    What a normal exit does that anything can depend on is done here in the same order:
    non-daemon threads are joined (and executors told to stop), the ``atexit`` handlers run,
    the notebook's namespace is released (its objects' finalisers run: a file left open is
    flushed), the standard streams are flushed. What is skipped is freeing every module
    and object one by one, which in a kernel that imported pandas and matplotlib took half a
    second of every notebook's shutdown. Returns, doing nothing, where the interpreter's hooks
    are not there.
    """
    join_threads = getattr(threading, "_shutdown", None)
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if join_threads is None or run_exit_handlers is None:
        return
    from IPython.core.interactiveshell import InteractiveShell

    join_threads()
    run_exit_handlers()
    if InteractiveShell.initialized():
        InteractiveShell.instance().user_ns.clear()
    gc.collect()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass  # a stream already closed has nothing left to write
    os._exit(0)


if __name__ == "__main__":
    serve(sys.stdin.fileno(), int(sys.argv[1]))
