"""Generation settings of a chat request (shared by memory and retrieval).

The rule lives in the model registry (:func:`memcost.models.generation_params`, by capability);
this name is kept so the stages' imports stay as they are.
"""

from __future__ import annotations

from memcost.models import generation_params

__all__ = ["generation_params"]
