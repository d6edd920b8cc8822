"""The serving-cost study (notebook 06): memory as a service, replayed turn by turn.

``workload`` makes the conversations (and picks LoCoMo's accuracy subset), ``systems`` serves
them (full history, a rolling window, and the main study's ``mem0_style`` and
``observational`` memories served live) and answers their calls (offline stand-ins or the
project's client) at the dated prices, ``replay`` writes one row per turn and stage, and
``analysis`` fits, compares and tabulates them. The figures are in :mod:`memcost.plots.serving`;
the study's published numbers in :mod:`memcost.paper`.
"""
