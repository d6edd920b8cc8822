"""The runner's kernel client reads a reply whose wake-up was lost.

A zmq socket tells the event loop that a message arrived through an edge-triggered file
descriptor. When that edge is consumed by something else before the loop sees it, a wait with no
timeout sleeps forever beside the message (a notebook run once hung that way: the kernel idle,
its reply waiting in the client's shell socket). Here the edge is consumed on purpose: jupyter
client's own channel never wakes, the runner's reads the reply within one wait slice.
"""

from __future__ import annotations

import asyncio
import time

import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session

from memcost.run.kernel_manager import WAIT_SLICE_S, kernel_manager_class


async def _reply_after_a_lost_wake_up(channel_class: type, address: str, wait_s: float) -> str:
    """What a waiting channel returns when the reply's wake-up is consumed before the loop runs:
    the message type, or "still waiting" after ``wait_s``."""
    peer = zmq.Context.instance().socket(zmq.PAIR)  # the kernel's side
    peer.bind(address)
    socket = zmq.asyncio.Context.instance().socket(zmq.PAIR)
    socket.connect(address)
    session = Session(key=b"test-key")
    waiting = asyncio.ensure_future(channel_class(socket, session).get_msg(timeout=None))
    try:
        await asyncio.sleep(0.2)  # the wait is registered on the socket's descriptor
        session.send(peer, "execute_reply", content={"status": "ok"})
        time.sleep(0.3)  # the reply arrives while the loop is busy elsewhere ...
        zmq.Socket.shadow(socket.underlying).get(zmq.EVENTS)  # ... and its edge is consumed
        reply = await asyncio.wait_for(waiting, wait_s)
        return reply["msg_type"]
    except TimeoutError:
        return "still waiting"
    finally:
        waiting.cancel()
        socket.close(linger=0)
        peer.close(linger=0)


def test_a_reply_whose_wake_up_was_lost_is_read_within_a_slice(tmp_path):
    runner_channel = kernel_manager_class()().client().shell_channel_class
    # jupyter client's channel: still waiting after a slice and a half, when ours has read it
    stock = asyncio.run(
        _reply_after_a_lost_wake_up(
            AsyncZMQSocketChannel, f"ipc://{tmp_path}/stock", 1.5 * WAIT_SLICE_S
        )
    )
    assert stock == "still waiting"  # the failure the runner's client guards against
    ours = asyncio.run(
        _reply_after_a_lost_wake_up(runner_channel, f"ipc://{tmp_path}/runner", 1.5 * WAIT_SLICE_S)
    )
    assert ours == "execute_reply"


def test_the_runner_client_waits_on_every_channel_in_slices():
    client = kernel_manager_class()().client()
    for name in ("shell", "iopub", "stdin", "control"):
        assert getattr(client, f"{name}_channel_class").__name__ == "SlicedWaitChannel", name
