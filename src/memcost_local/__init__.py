"""The real path against a real model server on this machine (``make local``): a llama.cpp
server with a small instruct model from the package registry, and the preset that runs the study
against it (docs/running.md, "Your own model server")."""

from pathlib import Path

from memcost.plugins import Plugin

PLUGIN = Plugin(name="local", presets=(Path(__file__).parent / "presets" / "local.yaml",))
