"""The run report: one page that puts this run and the paper side by side.

``runs/<run>/report.md`` (and a self-contained ``report.html`` with the figures embedded) is
assembled only from files the notebooks wrote into the run directory: the manifest, each
dataset's tables and metrics, and the run-wide cost tables. Nothing is recomputed here, so the
report can never disagree with the notebooks. A section whose inputs are missing (a preset that
ran only some notebooks) says so instead of failing. One module per group of sections:
:mod:`overview` (what ran, files), :mod:`results` (Tables 1-3), :mod:`costs` (cost, Tables 4-5,
Figure 1), :mod:`comparison` (paper vs this run); :mod:`view` reads the run.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from memcost.io import write_text
from memcost.paths import RunPaths
from memcost.run.report.analyses import section_analyses
from memcost.run.report.comparison import Comparison, paper_vs_run, section_paper
from memcost.run.report.costs import section_cost_model, section_costs, section_figure1
from memcost.run.report.executed import section_notebooks
from memcost.run.report.failures import section_failures
from memcost.run.report.headline import section_headline
from memcost.run.report.markdown import md_table
from memcost.run.report.overview import section_files, section_what_ran
from memcost.run.report.results import section_accuracy, section_tokens
from memcost.run.report.serving import section_serving
from memcost.run.report.systems import section_memory_systems
from memcost.run.report.view import RunView

__all__ = [
    "SECTIONS",
    "Comparison",
    "RunView",
    "md_table",
    "paper_vs_run",
    "render_html",
    "render_markdown",
    "write_report",
]

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


def render_markdown(run: RunPaths) -> str:
    view = RunView.load(run)
    lines = [
        f"# Fact memory vs. long context: run {run.name}",
        "",
        "Reproduction of *Beyond the Context Window: A Cost-Performance Analysis of "
        "Fact-Based Memory vs. Long-Context LLMs for Persistent Agents* "
        "(Pollertlam & Kornsuwannawit).",
        "",
    ]
    for section in (
        section_failures,
        section_headline,
        section_serving,
        section_what_ran,
        section_tokens,
        section_accuracy,
        section_memory_systems,
        section_costs,
        section_cost_model,
        section_figure1,
        section_analyses,
        section_paper,
        section_notebooks,
        section_files,
    ):
        lines += section(view)
    return "\n".join(lines).rstrip() + "\n"


_HTML_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; max-width: 1100px;
       margin: 2rem auto; padding: 0 1rem; line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
blockquote { border-left: 4px solid #d62728; margin: 1rem 0; padding: 0.5rem 1rem;
             background: #fff5f5; }
img { max-width: 100%; height: auto; margin: 0.5rem 0 1.5rem; }
code { background: #f3f3f3; padding: 0 0.2rem; }
"""


def render_html(markdown_text: str, root: Path) -> str:
    """The Markdown as a self-contained HTML page (figures embedded, so it can be mailed)."""
    import markdown as md

    def embed(match: re.Match[str]) -> str:
        alt, target = match.group(1), match.group(2)
        path = root / target
        if not path.is_file() or path.suffix.lower() != ".png":
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"![{alt}](data:image/png;base64,{data})"

    embedded = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", embed, markdown_text)
    body = md.markdown(embedded, extensions=["tables"])
    title = html.escape(markdown_text.splitlines()[0].lstrip("# ").replace("`", "").strip())
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{_HTML_STYLE}</style></head>\n<body>\n{body}\n"
        "</body></html>\n"
    )


def write_report(run: RunPaths) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into the run directory; return their paths."""
    text = render_markdown(run)
    write_text(run.report_md, text)
    write_text(run.report_html, render_html(text, run.root))
    return run.report_md, run.report_html
