"""Plugins: packages that add to the study, found through the ``memcost.plugins`` entry points.

docs/architecture.md ("The core and its plugins") says what each may add and how to write one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

GROUP = "memcost.plugins"


@dataclass(frozen=True)
class Table:
    """One of the run's tables in a report section: ``file`` relative to the run directory
    (``{dataset}/...``: every dataset's, one after another), shown as ``columns`` (column →
    header) in their order (a column it lacks shows "—"); datasets and systems (``system``,
    ``system_*``, ``*_system``) by their names in the report."""

    file: str
    columns: Mapping[str, str]
    caption: str | Callable[[Any], str] = ""  # the sentence above it, or caption(view)
    formats: Mapping[str, Callable[[Any], str]] = field(default_factory=dict)  # column → text
    title: str = ""  # its heading, under the section's
    min_rows: int = 1  # fewer rows: the table is not shown


@dataclass(frozen=True)
class Section:
    """A section of the run's report: its title and sentence, tables and figures (``(file,
    caption)``), then ``lines(view)`` for what they cannot say (memcost.run.report.section
    renders it; nothing is shown when none of it exists)."""

    name: str
    title: str = ""
    text: str | Callable[[Any], str] = ""  # or text(view), "" for none
    tables: tuple[Table, ...] = ()
    figures: tuple[tuple[str, str], ...] = ()
    lines: Callable[[Any], list[str]] | None = None
    # a plugin's: the section it follows, and its line on the first screen (``brief(view)``;
    # ``leads``: before the paper's answer, for a run of a study of its own)
    after: str = ""
    brief: Callable[[Any], str | None] | None = None
    leads: bool = False


@dataclass(frozen=True)
class Plugin:
    """What one package adds; every field is optional."""

    name: str
    memory_systems: tuple[type, ...] = ()  # memcost.memory.MemorySystem subclasses
    # memcost.memory.vectors.VectorStore subclasses, by the name the vector_store parameter gives
    vector_stores: Mapping[str, type] = field(default_factory=dict)
    # notebooks a preset runs only where its steps name them, and the presets that do
    notebooks: tuple[Path, ...] = ()
    presets: tuple[Path, ...] = ()
    report_sections: tuple[Section, ...] = ()
    # a parameter's valid values, and checks of a block of a preset's parameters (ValueError:
    # refused in one line, before anything runs)
    choices: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    parameter_checks: tuple[Callable[[Mapping[str, Any]], None], ...] = ()
    # its parameters that name a file or folder, read from where the command was typed
    path_parameters: tuple[str, ...] = ()
    # what the command line says of its notebooks: "download" (one fails to download),
    # "estimate" (``memcost estimate`` of a paid run of one)
    hints: Mapping[str, str] = field(default_factory=dict)
    # what it leaves running in a run directory: ``stop_orphans(root)`` stops what a killed
    # kernel left (returns a line saying so), ``running(root)`` says what still runs there
    stop_orphans: Callable[[Path], str | None] | None = None
    running: Callable[[Path], str | None] | None = None


class PluginError(RuntimeError):
    """An installed plugin that cannot be used."""


@functools.cache
def plugins() -> tuple[Plugin, ...]:
    """Every installed plugin, by entry-point name."""
    found = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        try:
            plugin = point.load()
        except Exception as exc:  # noqa: BLE001 - any failure of someone else's package
            raise PluginError(
                f"plugin {point.name} ({point.value}) does not load ({type(exc).__name__}: "
                f"{exc}); fix or uninstall the package that provides it"
            ) from exc
        if not isinstance(plugin, Plugin):
            raise PluginError(
                f"plugin {point.name} ({point.value}) is a {type(plugin).__name__}, not a "
                "memcost.plugins.Plugin"
            )
        found.append(plugin)
    return tuple(found)


def contributed(what: str) -> list[Any]:
    """One field of every plugin, concatenated (``contributed("presets")``)."""
    return [item for plugin in plugins() for item in getattr(plugin, what)]
