"""Command line: ``python -m memcost run --params papermill_params/smoke.yaml`` and
``python -m memcost report <run>`` (:func:`memcost.cli.main.main`)."""
