"""Where a run's columns come from, for runs with ``[[systems]]``: an archlab server measures
itself (its ``getrusage``, its socket-call counters), a foreign system is measured from outside
through ``/proc``, a remote target not at all. The manifest records this per architecture level
(``column_sources``, ``remote_targets``); this module prints it under the terminal table and as
a section of the HTML report, so no reader takes an outside estimate for a self-count, or an
unavailable column for a zero."""

from __future__ import annotations

from html import escape
from typing import Mapping

from archlab.store import Manifest

_COLUMNS = (("throughput_latency", "throughput, latency"), ("cpu", "CPU"), ("context_switches", "context switches"), ("rss", "RSS"), ("syscalls", "socket calls"))


def _sources(manifest: Manifest) -> Mapping[str, Mapping[str, str]]:
    value = manifest.document.get("column_sources")
    return value if isinstance(value, Mapping) else {}


def column_source_lines(manifest: Manifest) -> list[str]:
    """One line per architecture level, for the terminal; none for runs without systems."""
    lines = []
    for level, sources in _sources(manifest).items():
        parts = "; ".join(f"{label}: {sources.get(key, '?')}" for key, label in _COLUMNS[1:])
        lines.append(f"columns of {level}: {parts}")
    remote = manifest.document.get("remote_targets") or {}
    for level, url in remote.items():
        lines.append(f"{level} is a remote target ({url}): load and latency only")
    return lines


def column_sources_html(manifest: Manifest) -> str:
    sources = _sources(manifest)
    if not sources:
        return ""
    head = "".join(f"<th>{escape(label)}</th>" for _, label in _COLUMNS)
    body = "".join(
        f"<tr><td>{escape(level)}</td>" + "".join(f"<td>{escape(s.get(key, '?'))}</td>" for key, _ in _COLUMNS) + "</tr>"
        for level, s in sources.items()
    )
    remote = manifest.document.get("remote_targets") or {}
    note = "".join(f"<p>{escape(level)} is a remote target ({escape(url)}): the lab measured load and latency only.</p>" for level, url in remote.items())
    return (
        '<section id="column-sources"><h2>Where the columns come from</h2>'
        f"<table><thead><tr><th>architecture</th>{head}</tr></thead><tbody>{body}</tbody></table>{note}</section>"
    )
