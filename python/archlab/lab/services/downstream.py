"""The downstream service of ``/call?ms=M``: another ``archlab-engine serve`` process, with the
architecture ``sync`` (one thread per connection, so that requests sleeping in ``/delay?ms=M``
never wait for each other), answering ``GET /delay?ms=M`` after M ms. The measured server is
told its address with ``--downstream HOST:PORT``. It is pinned to the *client* CPUs: it mostly
sleeps, and on the server CPUs it would take time from the architecture being measured.

Reusing ``serve`` (rather than a dedicated subcommand) keeps one HTTP implementation in the
data plane: the downstream parses and answers exactly as every measured server does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from archlab.lab.processes import ManagedProcess, ProcessGroup
from archlab.spec.model import Cell, Placement

#: The architecture the downstream runs (see the module docstring).
DOWNSTREAM_ARCHITECTURE = "sync"


def needs_downstream(workload: str) -> bool:
    """Whether a cell's workload (a request target such as ``/call?ms=5``) calls a downstream:
    ``/call``, and a service program (``/program?name=P``), whose steps may call it (a program
    that does not only leaves the downstream idle)."""
    return workload.split("?", 1)[0] in ("/call", "/program")


def downstream_argv(engine_path: Path, placement: Placement) -> list[str]:
    return [
        str(engine_path), "serve",
        "--arch", DOWNSTREAM_ARCHITECTURE,
        "--host", "127.0.0.1",
        "--port", "0",
        "--cpus", placement.client_cpu_list,
    ]  # fmt: skip


@dataclass
class Downstream:
    process: ManagedProcess
    address: str  # HOST:PORT

    def stop(self, group: ProcessGroup) -> None:
        group.stop(self.process)


def start_for_cell(
    group: ProcessGroup, engine_path: Path, cell: Cell, placement: Placement, directory: Path, ready_timeout_s: float
) -> Downstream | None:
    """Start the downstream when ``cell``'s workload needs one (else ``None``) and wait for its
    ``listening HOST:PORT`` line. The caller stops it in ``finally``; on a failure to start it
    is stopped here before the error propagates."""
    if not needs_downstream(cell.workload):
        return None
    proc = group.start("downstream", downstream_argv(engine_path, placement), directory / "downstream.stderr")
    try:
        line = proc.expect("listening ", ready_timeout_s)
        address = line.split(" ", 1)[1].strip()
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise proc.failure(f"printed {line!r}; expected 'listening HOST:PORT'")
    except BaseException:
        group.stop(proc)
        raise
    return Downstream(proc, address)
