"""The data plane's option contracts, as the control plane uses them. Every option of a
data-plane process is defined once, in Rust (a server's in ``crates/server/src/options.rs``, the
reverse proxy's in ``crates/proxy/src/http/options.rs``, a load run's in
``crates/load/src/config/params.rs``); Python asks ``archlab._native``, built from
that same code, what the options are (names, documentation, allowed values, defaults) and
whether a set of them is valid, and keeps no copy of a name, range, default or syntax: durations,
think times and CPU lists are read by the data plane too. A checked set comes back normalised, as
the JSON the engine reads (``archlab-engine serve --options FILE``, ``load --params FILE``). A
refusal is an :class:`OptionRefused` naming the option's key in the data plane (``ring_size``);
the spec shows it against its own TOML key.

``archlab._native`` is a required part of the package: without it (or with one built from older
sources) every call here raises :class:`~archlab.errors.NativeMissing` saying how to build it."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Mapping

from archlab.errors import InvalidValue, NativeMissing

# What this package calls in the extension; an extension without one of them is out of date.
_REQUIRED = (
    "architectures", "check_workload", "check_server", "server_options_schema", "check_load", "load_params_schema",
    "parse_duration", "think_time", "cpu_list", "check_proxy", "proxy_options_schema", "OptionError", "mix",
    "check_link", "link_keys", "link_missing_privilege",
)  # fmt: skip
_BUILD_HINT = "run `make build` (or `maturin develop --release` in the package's environment)"


def native() -> ModuleType:
    """The ``archlab._native`` extension, checked to be as recent as this package."""
    try:
        from archlab import _native
    except ImportError as e:
        raise NativeMissing(f"archlab._native, the package's data-plane extension, is not built ({e}): {_BUILD_HINT}") from None
    missing = [name for name in _REQUIRED if not hasattr(_native, name)]
    if missing:
        raise NativeMissing(f"archlab._native is older than the package (it lacks {', '.join(missing)}): {_BUILD_HINT}")
    return _native


@dataclass(frozen=True)
class OptionInfo:
    """One option of a data-plane process, as its Rust declaration says."""

    name: str  # JSON key and spec key, e.g. "ring_size"
    flag: str  # e.g. "--ring-size"
    doc: str
    allowed: str  # e.g. "a power of two in 2..=16777216"
    default: Any  # None when the option is unset unless given


class OptionRefused(InvalidValue):
    """The data plane refused an option: ``parameter`` is its key there (``ring_size``, or ``""``
    for the set as a whole), ``received`` the value as the data plane printed it."""


def _call(function, *args: object) -> Any:
    try:
        return function(*args)
    except native().OptionError as e:
        raise OptionRefused(e.field, e.allowed, e.received, hint=e.hint) from None


def _dumps(options: Mapping[str, object]) -> str:
    # Values the data plane cannot take (a TOML date, say) go as text and are refused there.
    return json.dumps(dict(options), default=str)


@functools.cache
def server_options() -> tuple[OptionInfo, ...]:
    """Every option of ``archlab-engine serve``, in declaration order."""
    return tuple(OptionInfo(**o) for o in json.loads(native().server_options_schema()))


def server_option(name: str) -> OptionInfo:
    return next(o for o in server_options() if o.name == name)


def check_server(architecture: str, options: Mapping[str, object]) -> dict[str, Any]:
    """The options of a server of ``architecture``, checked and normalised (every option with
    a fixed default filled in), as the JSON object ``archlab-engine serve --options`` reads."""
    return json.loads(_call(native().check_server, architecture, _dumps(options)))


@functools.cache
def load_params() -> tuple[OptionInfo, ...]:
    """Every parameter of ``archlab-engine load``, in declaration order."""
    return tuple(OptionInfo(**o) for o in json.loads(native().load_params_schema()))


def load_param(name: str) -> OptionInfo:
    return next(o for o in load_params() if o.name == name)


def check_load(params: Mapping[str, object]) -> dict[str, Any]:
    """The parameters of a load run, checked and normalised: what the run would do, every
    default resolved (``seed`` only when something is drawn at random), as the JSON object
    ``archlab-engine load --params`` reads. ``target`` may be left out (then it is left out)."""
    return json.loads(_call(native().check_load, _dumps(params)))


def parse_duration(value: object) -> float:
    """Seconds of a duration (``"500ms"``, ``"2m"``, or a number of seconds): the number times
    its unit, exactly as the data plane computes it."""
    return float(_call(native().parse_duration, value))


def think_time(value: object) -> tuple[str, float, float | None]:
    """A think time (``"5ms"``, ``"exp:5ms"``, ``"uniform:2ms-8ms"`` or a number of seconds):
    its distribution (``constant``, ``exponential`` or ``uniform``), its constant, mean or
    minimum in seconds, and the uniform's maximum (else None)."""
    kind, low, high = _call(native().think_time, value)
    return kind, low, high


def mix(value: object) -> tuple[str, tuple[tuple[str, float], ...]]:
    """A request mix (``"/a:2,/b:98"`` or a list of ``{path, weight}`` tables): its canonical
    text and its classes as (path, weight), in order, read by the data plane."""
    text, classes = _call(native().mix, json.dumps(value, default=str))
    return text, tuple((str(p), float(w)) for p, w in classes)


def cpu_list(text: str) -> tuple[int, ...]:
    """The CPUs of a CPU list (``"0,2-3"``), sorted and distinct."""
    return tuple(_call(native().cpu_list, text))


def proxy_options() -> tuple[OptionInfo, ...]:
    """Every option of the reverse proxy (``archlab-engine proxy`` takes them beside the
    server's), in declaration order."""
    return tuple(OptionInfo(**o) for o in json.loads(native().proxy_options_schema()))


def check_proxy(architecture: str, options: Mapping[str, object]) -> dict[str, Any]:
    """The options of ``architecture`` running the reverse proxy (server and proxy keys in one
    mapping), checked and normalised, as the JSON object ``archlab-engine proxy --options``
    reads."""
    return json.loads(_call(native().check_proxy, architecture, _dumps(options)))


@functools.cache
def link_keys() -> tuple[str, ...]:
    """The parameters of an emulated link (``archlab-engine link --params``): ``mtu``,
    ``delay``, ``delay_up``, ... ``seed``."""
    return tuple(native().link_keys())


def check_link(params: Mapping[str, object]) -> dict[str, Any]:
    """A link's parameters, checked: what it applies (``mtu``, ``up`` and ``down`` with
    ``delay_us``, ``jitter_us``, ``rate``, ``loss``, ``reorder``, and ``seed``), as the link's
    ``ready`` line says it. A refusal names the parameter's key."""
    return json.loads(_call(native().check_link, _dumps(params)))


def link_missing_privilege(scheduling: str = "realtime") -> str | None:
    """What this process (and so the children it starts) lacks to create a link whose threads
    are scheduled as ``scheduling``, as one line naming it (e.g. CAP_NET_ADMIN); None if
    nothing."""
    return native().link_missing_privilege(scheduling)
