"""The kernel manager and client the runner gives papermill: jupyter_client's, with the
changes that a run of many notebooks on a busy machine needs (each says why)."""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from queue import Empty
from typing import Any

from memcost.run.kernel_forks import provisioner_class

# The longest a wait on a kernel socket lasts before the socket's own queue is looked at again.
WAIT_SLICE_S = 1.0
# Starting a kernel: how long a kernel_info request waits for its reply, then for a message on
# IOPub (proof that the subscription is live) before it is sent again.
READY_REPLY_S, READY_IOPUB_S = 1.0, 0.05
SHUTDOWN_POLL_S = 0.01  # how often a kernel asked to shut down is looked at (jupyter's: 0.1 s)


def kernel_manager_class() -> type:
    """A kernel manager that talks to the kernel over IPC sockets in the temp directory, with a
    client that never sleeps beside a message that has arrived, and kernels forked from a
    process that has imported what notebooks import (:mod:`memcost.run.kernel_forks`).

    The default TCP transport makes every kernel print a plain-text-transport warning into the
    terminal; local IPC sockets avoid both the warning and the open ports.

    A zmq socket wakes the event loop through an edge-triggered file descriptor, and that wake-up
    can be lost: on a busy machine a kernel's reply was seen waiting in the client's socket while
    the cell waited for it forever (both processes idle, the run stuck mid-notebook). The
    client's channels therefore wait in slices of ``WAIT_SLICE_S``; each new wait looks at the
    socket's queue first, so a reply whose wake-up was lost is read within a slice.
    """
    from jupyter_client.manager import AsyncKernelManager

    client_class = _client_class()

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any):
            kwargs.setdefault("transport", "ipc")
            kwargs.setdefault(
                "ip", os.path.join(tempfile.gettempdir(), f"memcost-kernel-{uuid.uuid4().hex[:12]}")
            )
            kwargs.setdefault("client_factory", client_class)
            super().__init__(**kwargs)

        async def _async_interrupt_kernel(self) -> None:
            # jupyter_client interrupts every kernel it shuts down, busy or not, and a kernel
            # still finishing its last reply then prints "KeyboardInterrupt caught in kernel"
            # (two notebooks at once made that common). The runner shuts a kernel down when
            # its notebook has ended; one still busy (the run interrupted) gets the shutdown
            # request, then SIGTERM and SIGKILL, as jupyter_client goes on to send.
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

        async def _async_finish_shutdown(
            self,
            waittime: float | None = None,
            pollinterval: float = SHUTDOWN_POLL_S,
            restart: bool = False,
        ) -> None:
            # a kernel ends within milliseconds of its shutdown request: looked at every
            # 10 ms, not 100, the notebook is over when it is
            await super()._async_finish_shutdown(waittime, SHUTDOWN_POLL_S, restart)

        async def _async_pre_start_kernel(self, **kw: Any) -> Any:
            if self.provisioner is None:  # kernels forked from a warm process when they can be
                self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
                self.provisioner = provisioner_class()(
                    kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self
                )
            return await super()._async_pre_start_kernel(**kw)

    return IPCKernelManager


def _client_class() -> type:
    """A client whose channels wait in slices, and whose start skips jupyter_client's pauses."""
    from jupyter_client.asynchronous.client import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from traitlets import Type

    class SlicedWaitChannel(AsyncZMQSocketChannel):
        async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                left = WAIT_SLICE_S if deadline is None else deadline - time.monotonic()
                if await self.socket.poll(int(max(0.0, min(WAIT_SLICE_S, left)) * 1000)):
                    return await self._recv()
                if deadline is not None and time.monotonic() >= deadline:
                    raise Empty

    class SlicedWaitClient(AsyncKernelClient):
        shell_channel_class = Type(SlicedWaitChannel)
        iopub_channel_class = Type(SlicedWaitChannel)
        stdin_channel_class = Type(SlicedWaitChannel)
        control_channel_class = Type(SlicedWaitChannel)

        async def wait_for_ready(self, timeout: float | None = None) -> None:
            # jupyter_client's check, without its fixed pauses: it waits 0.2 s for IOPub after
            # each reply, then until IOPub has been quiet for 0.2 s, a third of a second of
            # every notebook's start. Replies and outputs are matched to their request
            # anyway, so what is left of the handshake on the sockets is simply ignored.
            deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
            while True:
                self.kernel_info()
                try:
                    reply = await self.shell_channel.get_msg(timeout=READY_REPLY_S)
                except Empty:
                    reply = None
                if reply is not None and reply["msg_type"] == "kernel_info_reply":
                    try:
                        await self.iopub_channel.get_msg(timeout=READY_IOPUB_S)
                    except Empty:
                        pass  # the subscription is not live yet: ask again
                    else:
                        self._handle_kernel_info_reply(reply)
                        return
                if not await self._async_is_alive():
                    raise RuntimeError("Kernel died before replying to kernel_info")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    return SlicedWaitClient
