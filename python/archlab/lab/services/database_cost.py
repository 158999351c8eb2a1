"""What the lab database spent during a cell's measurement window, so that a ``/db`` cell (or a
system that uses the database) shows where its CPU went: the server's or system's own cost beside
PostgreSQL's, per request. PostgreSQL is a process tree (the postmaster forks one backend per
connection, plus its background workers), read from ``/proc`` at the same instants as the
measured server (the probe at the window's edges calls both), so its figures are measured from
outside and its socket calls are unavailable, never zero. The backends of a pool opened at the
server's start live through the whole window, so their CPU time is counted whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar

from archlab.lab import process_tree
from archlab.lab.process_tree import TreeSample
from archlab.lab.services.postgres import Postgres

T = TypeVar("T")


@dataclass
class DatabaseMeter:
    """Samples the database's process tree alongside another probe."""

    sample: Callable[[], TreeSample]  # its process tree, read on the host that runs it
    what: str
    worker: dict | None = None  # the worker it runs on (name, address, host); None: this host

    @classmethod
    def of(cls, database: Postgres) -> "DatabaseMeter":
        return cls(database.tree_sampler(), f"PostgreSQL {database.version} (the lab database)", database.describe())

    def probing(self, probe: Callable[[], T]) -> Callable[[], tuple[T, TreeSample]]:
        """``probe`` and the database, read one after the other at each window edge."""
        return lambda: (probe(), self.sample())

    def row(self, start: TreeSample, end: TreeSample, requests: int) -> dict:
        """The database's entry of a probe's ``processes`` list (:mod:`archlab.report.processes`)."""
        cost = process_tree.tree_cost(start, end, requests, [])
        return {"process": "postgres", "what": self.what, "measured": "from /proc", "cost": vars(cost),
                **({"worker": self.worker} if self.worker is not None else {})}
