"""Embedding several groups of texts in one parallel batch, each group with its own ledger tags
(one user's facts; one question), through the client's embedding path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memcost.llm import EmbeddingRequest, LLMClient, LLMError
from memcost.llm.offline import plan_batches
from memcost.paper import EMBEDDING_MODEL


def embed_groups(
    client: LLMClient,
    groups: Sequence[tuple[Sequence[str], Mapping[str, Any]]],
    *,
    model: str = EMBEDDING_MODEL,
    desc: str = "embed",
    progress: bool | None = None,
) -> list[np.ndarray]:
    """One ``(len(texts), d)`` array per group, rows L2-normalised; texts without content get
    zero rows (the API rejects them).

    Each group is batched as :meth:`LLMClient.embed` batches it (same requests, so the cache
    and ledger see the same calls), but all groups go to :meth:`LLMClient.embed_many` at once
    so that users are embedded in parallel. Inputs cut to the API's per-input limit are counted
    in the client's ``truncated_inputs``, as :meth:`LLMClient.embed` counts them.
    """
    requests: list[EmbeddingRequest] = []
    owners: list[tuple[int, list[int]]] = []
    truncated = 0
    for g, (texts, tags) in enumerate(groups):
        keep = [i for i, t in enumerate(texts) if str(t).strip()]
        if not keep:
            continue
        batches, fitted, cut = plan_batches([str(texts[i]) for i in keep])
        truncated += cut
        for batch in batches:
            requests.append(
                EmbeddingRequest(model, tuple(fitted[j] for j in batch), tags=dict(tags))
            )
            owners.append((g, [keep[j] for j in batch]))
    client.stats.truncated_inputs += truncated
    results = client.embed_many(requests, desc=desc, progress=progress) if requests else []
    failed = [r for r in results if r.error]
    if failed:
        raise LLMError(
            f"{len(failed)} of {len(results)} embedding calls failed ({failed[0].error}); rerun "
            "to retry them (completed calls come back from the cache)"
        )
    dims = results[0].vectors.shape[1] if results else client.embed([""], model=model).shape[1]
    out = [np.zeros((len(texts), dims), dtype=np.float32) for texts, _ in groups]
    for (g, rows), result in zip(owners, results, strict=True):
        out[g][rows] = result.vectors
    return out
