"""What the lab database spent during a cell's measurement window, so that a ``/db`` cell (or a
system that uses the database) shows where its CPU went: the server's or system's own cost beside
PostgreSQL's, per request. PostgreSQL is a process tree (the postmaster forks one backend per
connection, plus its background workers), read from ``/proc`` at the same instants as the
measured server (the probe at the window's edges calls both), so its figures are measured from
outside and its socket calls are unavailable, never zero. The backends of a pool opened at the
server's start live through the whole window, so their CPU time is counted whole."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable, TypeVar

from archlab.lab import process_tree
from archlab.lab.process_tree import ProcessTree, TreeSample
from archlab.lab.services.postgres import Postgres

T = TypeVar("T")


@dataclass
class DatabaseMeter:
    """Samples the database's process tree alongside another probe."""

    tree: ProcessTree
    what: str

    @classmethod
    def of(cls, database: Postgres) -> "DatabaseMeter":
        # The token finds members that left the tree; PostgreSQL's never do, so a fresh one is enough.
        return cls(ProcessTree(database.process.pid, uuid.uuid4().hex), f"PostgreSQL {database.version} (the lab database)")

    def probing(self, probe: Callable[[], T]) -> Callable[[], tuple[T, TreeSample]]:
        """``probe`` and the database, read one after the other at each window edge."""
        return lambda: (probe(), process_tree.sample(self.tree))

    def row(self, start: TreeSample, end: TreeSample, requests: int) -> dict:
        """The database's entry of a probe's ``processes`` list (:mod:`archlab.report.processes`)."""
        cost = process_tree.tree_cost(start, end, requests, [])
        return {"process": "postgres", "what": self.what, "measured": "from /proc", "cost": vars(cost)}
