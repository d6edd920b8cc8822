"""The serving-cost study (notebook 06): memory as a service, replayed turn by turn.

``workload`` makes the conversations, ``systems``/``memory_systems`` serve them, ``engines``
answers their calls (offline stand-ins or the project's client), ``replay`` writes one row per
turn and stage, ``pricing`` adds dollars, and ``fit``, ``breakeven``, ``subset``, ``accuracy``,
``tables`` analyse them; ``published`` holds the study's numbers, ``stage`` the notebook's batch
calls. The figures are in :mod:`memcost.plots.serving`.
"""
