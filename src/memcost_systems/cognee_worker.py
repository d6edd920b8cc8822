"""The cognee library's side of the ``cognee`` memory system: run by cognee's own interpreter."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any


def _answer(out: Any, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    out.flush()


async def _remember(cognee: Any, request: dict[str, Any]) -> dict[str, Any]:
    from cognee.modules.engine.operations.setup import setup

    await setup()  # creates cognee's databases the first time; a no-op after
    dataset = request["dataset"]
    names = {d.name for d in await cognee.datasets.list_datasets()}
    if dataset in names:
        await cognee.forget(dataset=dataset)
    result = await cognee.remember(
        list(request["documents"]),
        dataset_name=dataset,
        chunk_size=request.get("chunk_size"),
        self_improvement=bool(request.get("self_improvement", False)),
    )
    status = str(getattr(result, "status", result))
    if status != "completed":
        raise RuntimeError(f"remember ended {status}: {result}")
    return {"graph": await _graph(cognee, dataset)}


async def _graph(cognee: Any, dataset: str) -> dict[str, Any]:
    """The dataset's graph (each dataset has its own graph database)."""
    from cognee.context_global_variables import set_database_global_context_variables
    from cognee.infrastructure.databases.graph import get_graph_engine
    from cognee.modules.users.methods import get_default_user

    owner = await get_default_user()
    found = [d for d in await cognee.datasets.list_datasets() if d.name == dataset]
    async with set_database_global_context_variables(found[0].id, owner.id):
        nodes, edges = await (await get_graph_engine()).get_graph_data()
    fields = ("type", "name", "text", "description")
    return {
        "nodes": [{"id": str(i), **{k: d.get(k) for k in fields}} for i, d in nodes],
        "edges": [
            {"relationship": e[2], "description": (e[3] or {}).get("edge_text")} for e in edges
        ],
    }


async def _recall(cognee: Any, request: dict[str, Any]) -> dict[str, Any]:
    from cognee import SearchType

    found = await cognee.recall(
        request["query"],
        query_type=SearchType[request.get("query_type", "HYBRID_COMPLETION")],
        datasets=[request["dataset"]],
        top_k=int(request.get("top_k", 15)),
        only_context=True,
    )
    return {"context": "\n".join(str(getattr(r, "text", r)) for r in found)}


def _offline_tokenizer() -> None:
    """tiktoken fetches cl100k_base (text-embedding-3-small's encoding, which sizes cognee's
    chunks) from the network the first time; cognee's own dependency litellm ships that file
    under the name tiktoken caches it by, and tiktoken checks it against its published hash."""
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        shipped = Path(spec.submodule_search_locations[0]) / "litellm_core_utils" / "tokenizers"
        if shipped.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(shipped))


def main() -> None:
    _offline_tokenizer()
    out = os.fdopen(int(os.environ["MEMCOST_WORKER_FD"]), "w", encoding="utf-8")
    loop = asyncio.new_event_loop()
    cognee = None
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        if op == "stop":
            break
        try:
            if op == "version":
                payload = {"version": metadata.version("cognee")}
            else:
                if cognee is None:
                    import cognee  # noqa: PLC0415 - slow (8 s); only when there is work
                handler = {"remember": _remember, "recall": _recall}[op]
                payload = loop.run_until_complete(handler(cognee, request))
            _answer(out, {"ok": True, **payload})
        except Exception as exc:  # noqa: BLE001 - one request failed; the next may not
            _answer(out, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    loop.close()


if __name__ == "__main__":
    main()
