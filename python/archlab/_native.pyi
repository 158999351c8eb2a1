"""Type stub of ``archlab._native``, the PyO3 module built from ``crates/py``: conversions
only, the work is done by the Rust crates. Invalid input raises ``ValueError``; for the
simulator its args are ``(field, allowed, received)``, which :mod:`archlab.sim` re-raises as
:class:`archlab.errors.SpecError`; the option contracts raise :class:`OptionError`, a
``ValueError`` that says the same with attributes (see :mod:`archlab.contract`)."""

import os
from typing import TypedDict, final

__all__ = [
    "OptionError",
    "PoolClimber",
    "architectures",
    "check_link",
    "check_load",
    "check_proxy",
    "check_server",
    "check_simulation",
    "check_workload",
    "cpu_list",
    "interval_log",
    "load_params_schema",
    "jtl_counts",
    "link_keys",
    "link_missing_privilege",
    "load_programs",
    "mix",
    "mser",
    "parse_duration",
    "parse_programs",
    "proxy_options_schema",
    "server_options_schema",
    "simulate",
    "think_time",
    "version",
]

class _Architecture(TypedDict):
    name: str
    description: str
    options: list[str]
    proxy: str

class _Truncation(TypedDict):
    batch_size: int
    batches: int
    batches_deleted: int
    observations_deleted: int
    statistic: float
    at_limit: bool

class _JtlCounts(TypedDict):
    rows: int
    failed: int
    other_labels: int
    trimmed: int
    malformed: int
    first_problem: str | None
    values: list[float]
    counts: list[int]

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

def check_proxy(arch: str, options_json: str) -> str:
    """Check architecture ``arch`` running the reverse proxy with ``options_json`` (server and
    proxy keys in one object); returns them normalised as JSON (what ``archlab-engine proxy
    --options`` reads) or raises :class:`OptionError`."""

def proxy_options_schema() -> str:
    """The options of the reverse proxy as JSON, listed as ``server_options_schema`` lists them."""

def server_options_schema() -> str:
    """The options of a server as JSON: a list of objects with name, flag, doc, allowed, default."""

def check_load(params_json: str) -> str:
    """Check the parameters of a load run (JSON; the target may be left out); returns what the
    run would do, every default resolved, as JSON (what ``archlab-engine load --params`` reads)
    or raises :class:`OptionError`."""

def load_params_schema() -> str:
    """The parameters of a load run as JSON: a list of objects with name, flag, doc, allowed, default."""

def parse_duration(value: str | float) -> float:
    """Seconds of a duration ("500ms", or a number of seconds): the exact product of number and unit."""

def think_time(value: str | float) -> tuple[str, float, float | None]:
    """A think time: (distribution, constant/mean/minimum in seconds, uniform maximum or None)."""

def cpu_list(text: str) -> list[int]:
    """The CPUs of a CPU list ("0,2-3"), sorted and distinct."""

def mix(value_json: str) -> tuple[str, list[tuple[str, float]]]:
    """A request mix (``"/a:2,/b:98"`` or a list of ``{path, weight}``, given as JSON text): its
    canonical text and its classes as (path, weight), in order; raises :class:`OptionError`
    naming ``mix``."""

def check_link(params_json: str) -> str:
    """Check the link emulator's parameters (one JSON object keyed like its flags); returns what
    each direction applies as JSON, or raises :class:`OptionError` whose field is the key."""

def link_keys() -> list[str]:
    """The keys :func:`check_link` accepts."""

def link_missing_privilege(scheduling: str) -> str | None:
    """What this process lacks to create a link whose threads are scheduled as ``scheduling``
    (realtime, high, normal), as one line; None when nothing is missing."""

def version() -> str:
    """Version of the data-plane crates this module was built from."""

def simulate(model_json: str, run_json: str) -> str:
    """Simulate a model (JSON, the core's model format) under a run configuration (JSON);
    returns the outcome as JSON. Runs with the GIL released; Ctrl-C stops it (KeyboardInterrupt)."""

def check_simulation(model_json: str, run_json: str) -> None:
    """Validate a model and a run configuration as ``simulate`` does, without running them."""

def mser(series: list[float], batch_size: int = 5) -> _Truncation | None:
    """MSER truncation of ``series`` in batches of ``batch_size``; None with fewer than two batches."""

def jtl_counts(path: str | os.PathLike[str], columns: int, header: bool, measure: int, success: int | None,
               failed: str, labels: tuple[int, list[str]] | None = None,
               trim: tuple[int, float, float] | None = None, end: int | None = None) -> _JtlCounts:
    """Exact counts of column ``measure`` of a JMeter CSV file of ``columns`` fields per row, by
    category (see ``crates/jtl``); reads the first ``end`` bytes only when given. Runs with the
    GIL released; an unreadable file raises OSError."""
def interval_log(histogram: str, start_s: float, length_s: float, value_scale: float = 1.0,
                 comment: str | None = None) -> bytes:
    """An HDR interval log (written by ``crates/metrics``) of one interval holding ``histogram``
    (base64 V2 deflate, values in ns) with every value times ``value_scale``, from ``start_s``
    to ``start_s + length_s`` after the log's base time. ValueError((field, allowed, received))."""

def load_programs(path: str) -> str:
    """Read and check a program file (TOML); returns the programs as JSON. A refused file raises
    ``ValueError(source, field, allowed, received)``."""

def parse_programs(source: str, text: str) -> str:
    """Check a program file's ``text`` (``source`` names it in errors); returns the programs as JSON."""

@final
class PoolClimber:
    """The server's pool-size hill climber (``crates/server/src/pool_control.rs``), decisions only:
    the same algorithm as :class:`archlab.tuning.HillClimber`."""
    def __new__(cls, initial: int, minimum: int, maximum: int, step: int, min_step: int, max_step: int,
                threshold: float, change_band: float) -> PoolClimber: ...
    @property
    def size(self) -> int: ...
    @property
    def current(self) -> int: ...
    @property
    def changes_detected(self) -> int: ...
    def observe(self, throughput: float) -> int: ...
