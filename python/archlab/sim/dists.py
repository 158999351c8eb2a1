"""Distributions of service times, think times and inter-arrival times, as small immutable
values that serialise to the simulator's model format. Each is parameterised by its mean where it
has one (performance models are written in mean demands); shape enters as the coefficient of
variation ``cv``. Sampling happens in the Rust core, from per-entity random streams."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class Distribution:
    """Base class: :meth:`to_spec` gives the model-format dict (``{"dist": ..., ...}``)."""

    def to_spec(self) -> dict:
        raise NotImplementedError


@dataclass(frozen=True)
class Deterministic(Distribution):
    """Always ``value``."""

    value: float

    def to_spec(self) -> dict:
        return {"dist": "deterministic", "value": float(self.value)}


@dataclass(frozen=True)
class Exponential(Distribution):
    """Exponential with mean ``mean`` (Poisson arrivals when used between arrivals)."""

    mean: float

    def to_spec(self) -> dict:
        return {"dist": "exponential", "mean": float(self.mean)}


@dataclass(frozen=True)
class LogNormal(Distribution):
    """Log-normal with mean ``mean`` and coefficient of variation ``cv``."""

    mean: float
    cv: float

    def to_spec(self) -> dict:
        return {"dist": "lognormal", "mean": float(self.mean), "cv": float(self.cv)}


@dataclass(frozen=True)
class Gamma(Distribution):
    """Gamma with mean ``mean`` and coefficient of variation ``cv`` (Erlang-k: cv = 1/sqrt(k))."""

    mean: float
    cv: float

    def to_spec(self) -> dict:
        return {"dist": "gamma", "mean": float(self.mean), "cv": float(self.cv)}


@dataclass(frozen=True)
class Uniform(Distribution):
    """Uniform on [low, high]."""

    low: float
    high: float

    def to_spec(self) -> dict:
        return {"dist": "uniform", "low": float(self.low), "high": float(self.high)}


@dataclass(frozen=True)
class Empirical(Distribution):
    """Resampled uniformly from measured ``samples`` (e.g. service times of a measured run)."""

    samples: tuple[float, ...]

    def __init__(self, samples: Sequence[float]):
        object.__setattr__(self, "samples", tuple(float(x) for x in samples))

    def to_spec(self) -> dict:
        return {"dist": "empirical", "samples": list(self.samples)}


def as_distribution(value: Distribution | float) -> Distribution:
    """A number means a deterministic time (``think=0`` is no think time)."""
    return value if isinstance(value, Distribution) else Deterministic(float(value))
