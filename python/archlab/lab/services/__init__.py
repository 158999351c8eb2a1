"""Services a cell's workload needs beside the measured server, started by the lab for the cell
and always stopped after it. Today one: the downstream HTTP service of ``/call?ms=M``
(:mod:`archlab.lab.services.downstream`)."""

from archlab.lab.services.downstream import Downstream, needs_downstream, start_for_cell

__all__ = ["Downstream", "needs_downstream", "start_for_cell"]
