"""Type stub of ``archlab._native``, the PyO3 module built from ``crates/py``: conversions
only, the work is done by the Rust crates. Invalid input raises ``ValueError``; for the
simulator its args are ``(field, allowed, received)``, which :mod:`archlab.sim` re-raises as
:class:`archlab.errors.SpecError`; the option contracts raise :class:`OptionError`, a
``ValueError`` that says the same with attributes (see :mod:`archlab.contract`)."""

from typing import TypedDict

__all__ = [
    "OptionError",
    "architectures",
    "check_server",
    "check_simulation",
    "check_workload",
    "interval_log",
    "mser",
    "server_options_schema",
    "simulate",
    "version",
]

class _Architecture(TypedDict):
    name: str
    description: str
    options: list[str]

class _Truncation(TypedDict):
    batch_size: int
    batches: int
    batches_deleted: int
    observations_deleted: int
    statistic: float
    at_limit: bool

class OptionError(ValueError):
    """An option refused by the data plane; ``args`` is ``(field, allowed, received, hint)``."""

    field: str
    allowed: str
    received: str
    hint: str

def architectures() -> list[_Architecture]:
    """The registered server architectures, each with its name, description and option names."""

def check_workload(target: str) -> None:
    """Validate a request target such as "/prime?n=27059"; raises ValueError if invalid."""

def check_server(arch: str, options_json: str) -> str:
    """Check architecture ``arch`` with the options of ``options_json``; returns them normalised
    as JSON (what ``archlab-engine serve --options`` reads) or raises :class:`OptionError`."""

def server_options_schema() -> str:
    """The options of a server as JSON: a list of objects with name, flag, doc, allowed, default."""

def version() -> str:
    """Version of the data-plane crates this module was built from."""

def simulate(model_json: str, run_json: str) -> str:
    """Simulate a model (JSON, the core's model format) under a run configuration (JSON);
    returns the outcome as JSON. Runs with the GIL released; Ctrl-C stops it (KeyboardInterrupt)."""

def check_simulation(model_json: str, run_json: str) -> None:
    """Validate a model and a run configuration as ``simulate`` does, without running them."""

def mser(series: list[float], batch_size: int = 5) -> _Truncation | None:
    """MSER truncation of ``series`` in batches of ``batch_size``; None with fewer than two batches."""

def interval_log(histogram: str, start_s: float, length_s: float, value_scale: float = 1.0,
                 comment: str | None = None) -> bytes:
    """An HDR interval log (written by ``crates/metrics``) of one interval holding ``histogram``
    (base64 V2 deflate, values in ns) with every value times ``value_scale``, from ``start_s``
    to ``start_s + length_s`` after the log's base time. ValueError((field, allowed, received))."""
