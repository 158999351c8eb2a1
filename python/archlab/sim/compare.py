"""Published values beside simulated ones. A published figure from a single run is compared
with the prediction interval of a single run of the same experiment (mean +- t s sqrt(1 + 1/n)
over our n replications), not with the narrower interval of the mean: the question is whether
the published run could be one of ours."""

from __future__ import annotations

from dataclasses import dataclass

from archlab.sim.results import Estimate, SimulationResult
from archlab.sim.spec import Reference, ReferenceRow

# Reference keys and where the value lives in a result; times are scaled, throughput too.
_METRICS = {
    "throughput": (lambda r: r.response.throughput, "throughput"),
    "mean_response": (lambda r: r.response.mean, "time"),
    "p50": (lambda r: r.response.p50, "time"),
    "p90": (lambda r: r.response.p90, "time"),
    "p99": (lambda r: r.response.p99, "time"),
}


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    published: float  # in the publication's units
    simulated: Estimate  # in model units
    scale: float  # published units per model unit
    interval: tuple[float, float]  # prediction interval, in the publication's units

    @property
    def inside(self) -> bool:
        return self.interval[0] <= self.published <= self.interval[1]


def compare_cell(result: SimulationResult, reference: Reference, row: ReferenceRow,
                 level: float = 0.99) -> list[MetricComparison]:
    """Every published metric of ``row`` against ``result``."""
    out = []
    for metric, published in row.values.items():
        if metric not in _METRICS:
            raise KeyError(f"reference metric {metric!r}: expected one of {sorted(_METRICS)}")
        get, kind = _METRICS[metric]
        est = get(result)
        scale = reference.throughput_scale if kind == "throughput" else reference.time_scale
        lo, hi = est.prediction_interval(level)
        out.append(MetricComparison(metric, published, est, scale, (lo * scale, hi * scale)))
    return out
