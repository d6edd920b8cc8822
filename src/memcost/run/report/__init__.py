"""The run report (``report.md``, ``report.html``), written only from the files the notebooks
wrote into the run directory (docs/architecture.md, "The report")."""

# ruff: noqa: F401 - the public names
from memcost.run.report.page import render_html, render_markdown, write_report
from memcost.run.report.view import RunView
