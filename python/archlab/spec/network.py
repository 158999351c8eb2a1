"""The ``[network]`` section of a spec: the emulated link a cell's client and server talk over
(``archlab-engine link``, see ``docs/link.md``) instead of loopback. Its keys are the link's own
(``mtu``, ``delay``, ``jitter``, ``rate``, ``queue``, ``burst``, ``loss``, each also per
direction as ``delay_up`` / ``delay_down``..., ``reorder``, ``seed``, ``congestion``), read from the data plane
(``archlab._native``), which also checks every value and every combination the spec makes:
this module keeps no range, default or syntax of its own. A scalar is fixed for every cell; a
list makes a factor named ``network.KEY`` whose levels cross the others like ``concurrency``'s.
A section with nothing but ``mtu = 1500`` (or even empty) still moves the cells onto the link:
a plain path with a realistic MTU, free of loopback's 64 KiB MTU (issue 18)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Mapping

from archlab import contract
from archlab.contract import OptionRefused
from archlab.errors import SpecError

SECTION = "network"
# Factor names of varied keys: ``network.delay``; they never clash with [factors]' names
# (``rate`` is the open model's arrival rate there, the link's bit rate here).
FACTOR_PREFIX = SECTION + "."

Value = str | int | float | bool


@functools.cache
def keys() -> tuple[str, ...]:
    """Every key of ``[network]``, as the data plane names the link's parameters."""
    return contract.link_keys()


def factor_name(key: str) -> str:
    return FACTOR_PREFIX + key


def is_network_factor(name: str) -> bool:
    return name.startswith(FACTOR_PREFIX)


@dataclass(frozen=True)
class LinkSetting:
    """The link of one cell: the ``[network]`` values that apply to it, as the spec writes them
    (keys in the data plane's order). :meth:`params` is what ``archlab-engine link --params``
    reads; :meth:`applied` what the data plane makes of it (per direction, defaults filled in)."""

    values: tuple[tuple[str, Value], ...]

    def params(self) -> dict[str, Value]:
        return dict(self.values)

    def applied(self) -> dict:
        return contract.check_link(self.params())

    @property
    def label(self) -> str:
        """``delay=5ms mtu=1500``, or ``mtu default`` for an empty section."""
        return " ".join(f"{k}={v}" for k, v in self.values) or "default link"


@dataclass(frozen=True)
class NetworkSpec:
    """The section as given: the fixed values, and the keys given as lists (levels in the
    spec's order)."""

    fixed: tuple[tuple[str, Value], ...]
    varied: tuple[tuple[str, tuple[Value, ...]], ...]

    def setting(self, levels: Mapping[str, object]) -> LinkSetting:
        """The link of a cell whose factor levels are ``levels`` (keyed ``network.KEY``)."""
        given = dict(self.fixed)
        given.update({k: levels[factor_name(k)] for k, _ in self.varied})  # type: ignore[misc]
        return LinkSetting(tuple((k, given[k]) for k in keys() if k in given))

    def to_dict(self) -> dict:
        """The fixed values and the varied keys' levels, for the spec hash and the manifest."""
        return {**dict(self.fixed), **{k: list(v) for k, v in self.varied}}


def parse(table: Mapping[str, object]) -> NetworkSpec:
    """The section's values, type-checked (the shape is checked by :mod:`archlab.spec.raw`);
    each combination of levels is then checked by the data plane, and a refusal names the key
    (and the level) the data plane names."""
    fixed: list[tuple[str, Value]] = []
    varied: list[tuple[str, tuple[Value, ...]]] = []
    for key in keys():
        if key not in table:
            continue
        value = table[key]
        if isinstance(value, list):
            if not value:
                raise SpecError(f"{SECTION}.{key}", "a value, or a non-empty list of levels", value)
            for i, v in enumerate(value):
                _scalar(v, f"{SECTION}.{key}[{i}]")
            if len({str(v) for v in value}) != len(value):
                raise SpecError(f"{SECTION}.{key}", "levels that differ from each other", value)
            varied.append((key, tuple(value)))
        else:
            fixed.append((key, _scalar(value, f"{SECTION}.{key}")))
    spec = NetworkSpec(tuple(fixed), tuple(varied))
    _check_combinations(spec)
    return spec


def _scalar(value: object, field: str) -> Value:
    if not isinstance(value, (str, int, float, bool)):
        raise SpecError(field, "a string, a number or a boolean (a list makes a factor)", value)
    return value


def _check_combinations(spec: NetworkSpec) -> None:
    """Every link the cells will use, checked by the data plane (a jitter must not exceed the
    delay it is combined with, a queue needs a rate...)."""
    names = [k for k, _ in spec.varied]
    for combo in itertools.product(*(range(len(levels)) for _, levels in spec.varied)):
        chosen = {factor_name(k): levels[i] for (k, levels), i in zip(spec.varied, combo)}
        setting = spec.setting(chosen)
        try:
            setting.applied()
        except OptionRefused as e:
            key = e.parameter
            if key in names:
                i = combo[names.index(key)]
                raise SpecError(f"{SECTION}.{key}[{i}]", e.allowed, dict(spec.varied)[key][i], hint=_with(setting, key)) from None
            value = setting.params().get(key, e.received)
            raise SpecError(f"{SECTION}.{key}" if key else SECTION, e.allowed, value, hint=_with(setting, key)) from None


def _with(setting: LinkSetting, key: str) -> str:
    """The rest of the link a refused value was combined with, when there is a rest."""
    others = [f"{k}={v}" for k, v in setting.values if k != key]
    return f"with {' '.join(others)}" if others else ""
