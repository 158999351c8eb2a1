"""Services a cell's workload needs beside the measured server, started by the lab and always
stopped after use: the downstream HTTP service of ``/call?ms=M``
(:mod:`archlab.lab.services.downstream`, one per cell) and the PostgreSQL database of
``/db?id=N`` (:mod:`archlab.lab.services.postgres`, one per run: it takes seconds to make, and
the workload only reads it, so cells cannot change what later cells see)."""

from archlab.lab.services.downstream import Downstream, needs_downstream, start_for_cell
from archlab.lab.services.postgres import Postgres, PostgresUnavailable, needs_postgres

__all__ = ["Downstream", "Postgres", "PostgresUnavailable", "needs_downstream", "needs_postgres", "start_for_cell"]
