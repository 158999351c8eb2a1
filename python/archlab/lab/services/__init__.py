"""Services a cell's workload needs beside the measured server, started by the lab and always
stopped after use: the downstream HTTP service of ``/call?ms=M``
(:mod:`archlab.lab.services.downstream`, one per cell) and the PostgreSQL database of
``/db?id=N`` (:mod:`archlab.lab.services.postgres`, one per run: it takes seconds to make, and
the workload only reads it, so cells cannot change what later cells see; systems of a spec that
name it, ``{db_url}`` and the like, get the same database), with what it spent per cell
(:mod:`archlab.lab.services.database_cost`)."""

from archlab.lab.services.database_cost import DatabaseMeter
from archlab.lab.services.downstream import Downstream, needs_downstream, start_for_cell
from archlab.lab.services.postgres import Postgres, PostgresUnavailable, needs_postgres

__all__ = ["DatabaseMeter", "Downstream", "Postgres", "PostgresUnavailable", "needs_downstream", "needs_postgres", "start_for_cell"]
