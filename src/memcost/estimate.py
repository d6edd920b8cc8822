"""The bill estimated before a run; it lives in :mod:`memcost.costs.estimate` (this path stays for
the runner, which calls :func:`estimate_run` and :func:`summary_text`)."""

from memcost.costs.estimate import estimate_run, summary_text

__all__ = ["estimate_run", "summary_text"]
