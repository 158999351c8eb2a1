"""Experiment specs: TOML in, a validated, typed, frozen :class:`Experiment` out.

Validation has two stages: :func:`archlab.spec.raw.parse_toml` checks the shape (sections, keys),
:func:`archlab.spec.validate.validate` checks values against each other, the data plane's
registry and this machine's CPUs. Every error is a :class:`~archlab.errors.SpecError` naming the
field, the allowed values and the value received. The spec's vocabulary:

``[experiment]`` name, description, repetitions (>= 1, default 1; or ``{min, max, extra_time}``, repetitions
added until comparisons separate: :mod:`archlab.spec.repetitions`), warmup (default "1s"), duration
(default "3s"); ``[factors]`` architecture, workload (required), the load level of the model
(concurrency for "closed", rate for "open", session_rate for "partly-open"), threads, loops,
think_time (optional), each a non-empty list, crossed in a full factorial design; ``[server]``
any option of the data plane's servers (``archlab-engine serve --help``: threads, loops,
ring_size, wait, ...; all but the CPUs, services and pool the lab sets itself), fixed for every
cell and checked by the data plane per architecture; ``[load]`` model ("closed", "open" or "partly-open"),
timeout, records, seed (whenever something is drawn at random), and each model's own keys:
think_time (closed, partly-open; "5ms" constant, "exp:5ms" exponential with that mean or
"uniform:2ms-8ms", also as factor levels); schedule, connections, max_connections (open,
partly-open); requests_per_session, session_connection (partly-open). A key of another model is
refused; ``[placement]`` server_cpus, client_cpus (default: server on the last CPU, client on the
others); ``[db]`` pool (the server's ``db_pool``), wait (a duration in whole ms, the server's
``db_wait_ms``) and rows (default 10,000) of the ``/db`` workload's connection pool and table,
refused when no workload is ``/db``; ``[[systems]]`` systems under test the lab starts from a
command or loads at a remote target, each a level ``system:NAME`` of the architecture factor
(:mod:`archlab.spec.systems`); ``[network]`` the emulated link every cell then runs over
instead of loopback (``mtu``, ``delay``, ``jitter``, ``rate``, ``queue``, ``burst``, ``loss``,
each also ``_up``/``_down``, ``reorder``, ``seed``, ``congestion``; a list makes a factor
``network.KEY``; :mod:`archlab.spec.network`); ``[cluster]`` address (``tcp://HOST:PORT`` or
``local:N``), shards, load_hosts: the Dask cluster the load runs on as shards, as ``--cluster``
and ``--shards`` (which win; :mod:`archlab.spec.cluster`). Ranges and defaults of the server's options are the data
plane's, read through ``archlab._native`` (see :mod:`archlab.contract`).
"""

from __future__ import annotations

from pathlib import Path

from archlab import documents
from archlab.errors import SpecError
from archlab.spec.model import FACTOR_NAMES, Cell, Experiment, Factor, LoadSettings, Placement, ServerOptions
from archlab.spec.raw import RawSpec, parse_toml
from archlab.spec.registry import ArchitectureInfo, DataPlaneRegistry, FixedRegistry, Registry
from archlab.spec.validate import SpecEnvironment, validate

__all__ = [
    "FACTOR_NAMES",
    "ArchitectureInfo",
    "DataPlaneRegistry",
    "Cell",
    "Experiment",
    "Factor",
    "FixedRegistry",
    "LoadSettings",
    "Placement",
    "RawSpec",
    "Registry",
    "ServerOptions",
    "SpecEnvironment",
    "SpecError",
    "load_spec",
    "parse_spec",
]


def parse_spec(text: str, source: str = "<spec>", env: SpecEnvironment | None = None) -> Experiment:
    """Validate spec text. Without ``env``, checks against the data plane of this checkout
    (``archlab._native``) and the CPUs this process may use."""
    raw = parse_toml(text, source)
    if env is None:
        env = SpecEnvironment.local(DataPlaneRegistry())
    return validate(raw, env)


def load_spec(path: str | Path, env: SpecEnvironment | None = None) -> tuple[Experiment, str]:
    """Read and validate a spec file; returns the experiment and the raw text (kept in the run)."""
    p = Path(path)
    try:
        text = documents.read_text(p)
    except FileNotFoundError:
        raise SpecError("spec", "a path to an existing TOML file", str(path)) from None
    except OSError as e:
        raise SpecError("spec", "a readable UTF-8 TOML file", str(path), hint=e.strerror or str(e)) from None
    except UnicodeDecodeError as e:
        raise SpecError("spec", "a readable UTF-8 TOML file", str(path), hint=str(e)) from None
    return parse_spec(text, source=p.name, env=env), text
