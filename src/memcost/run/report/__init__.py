"""The run report: one page that puts this run and the paper side by side.

``runs/<run>/report.md`` (and a self-contained ``report.html`` with the figures embedded) is a
template (``assets/report.md.j2``, :mod:`page`) filled only from files the notebooks wrote into
the run directory: the manifest, each dataset's tables and metrics, and the run-wide cost tables.
Nothing is recomputed here, so the report can never disagree with the notebooks. A section whose
inputs are missing (a preset that ran only some notebooks) says so instead of failing. One module
per group of sections: :mod:`headline` (the answer in brief), :mod:`results` (Tables 1-3),
:mod:`systems`, :mod:`costs` (cost, Tables 4-5, Figure 1), :mod:`analyses`, :mod:`comparison`
(paper vs this run), :mod:`serving`; :mod:`view` reads the run.
"""

# ruff: noqa: F401
from memcost.run.report.comparison import Comparison, paper_vs_run
from memcost.run.report.markdown import md_table
from memcost.run.report.page import render_html, render_markdown, write_report
from memcost.run.report.view import RunView

SECTIONS = (
    "The answer in brief",
    "What ran",
    "Tables 1-2: tokens per conversation and per question",
    "Table 3: accuracy",
    "Cost of this run",
    "Tables 4-5: the cost model",
    "Figure 1",
    "Cost per correct answer, paired tests, judge sensitivity",
    "Paper vs this run",
    "The executed notebooks",
    "Files",
)
