"""Bottleneck reading, done the way seed 002 §3 reasons by hand. Once throughput stops growing
with load, the component whose time grows is the saturated one: if the wait in a stage's input
queue grows (linearly, in a closed system) while the service time behind it stays flat, the
threads draining that queue are the bottleneck; if the service time grows while the queue wait
stays flat, the component downstream is; if neither grows, nobody in the measured path is
saturated and the load generator is (it cannot offer more). Utilisations, when measured or
predicted, give the same answer more directly: the component nearest 100 % is saturated."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from archlab.models import _check
from archlab.models.errors import ModelError


@dataclass(frozen=True)
class BottleneckReading:
    """The saturated component (None when none is), from which load level on, and why."""

    component: str | None
    saturation_level: float | None
    reason: str


def read_time_decomposition(
    levels: Sequence[float],
    throughput: Sequence[float],
    queue_wait: Sequence[float],
    service_time: Sequence[float],
    *,
    queue_owner: str = "middleware",
    downstream: str = "server",
    upstream: str = "clients",
    plateau: float = 0.95,
    flat: float = 0.10,
) -> BottleneckReading:
    """Read a sweep over load ``levels`` (e.g. number of clients): measured throughput, mean
    wait in ``queue_owner``'s queue and mean service time behind it (which includes the time
    spent in ``downstream``). Saturation starts at the first level reaching ``plateau`` of the
    peak throughput; a time "grows" when it rises by more than ``flat`` of the response time
    there."""
    lv = _check.vector("levels", levels, minimum_length=3)
    arrays = [_check.vector(name, v, minimum_length=3) for name, v in
              (("throughput", throughput), ("queue_wait", queue_wait), ("service_time", service_time))]
    if any(a.size != lv.size for a in arrays):
        raise ModelError("throughput/queue_wait/service_time", f"one value per level ({lv.size})", [a.size for a in arrays])
    order = np.argsort(lv)
    lv = lv[order]
    x, w, s = (a[order] for a in arrays)
    plateau = _check.probability("plateau", plateau)
    start = int(np.argmax(x >= plateau * x.max()))
    if start >= lv.size - 1:
        return BottleneckReading(None, None, f"throughput still rises at the largest level ({lv[-1]:g}): "
                                             "the system is not saturated in the tested range")
    response = w[start] + s[start]
    dw, ds = w[-1] - w[start], s[-1] - s[start]
    span = f"from {lv[start]:g} to {lv[-1]:g}"
    if max(dw, ds) <= flat * response:
        return BottleneckReading(upstream, lv[start], f"throughput is flat {span} while queue wait and service time "
                                                      f"stay flat: nothing measured saturates, {upstream} cannot offer more load")
    if dw >= ds:
        return BottleneckReading(queue_owner, lv[start], f"throughput is flat {span} while the queue wait grows by "
                                                         f"{dw:.3g} and the service time by {ds:.3g}: the threads "
                                                         f"draining {queue_owner}'s queue are saturated")
    return BottleneckReading(downstream, lv[start], f"throughput is flat {span} while the service time grows by "
                                                    f"{ds:.3g} and the queue wait by {dw:.3g}: {downstream} is saturated")


def read_utilisations(utilisations: Mapping[str, float], threshold: float = 0.9) -> BottleneckReading:
    """The component with the highest utilisation (busy fraction per server), saturated when
    at or above ``threshold``. NaN entries (delay centres) are ignored."""
    valid = {k: float(v) for k, v in utilisations.items() if v == v}
    if not valid:
        raise ModelError("utilisations", "at least one utilisation that is not NaN", dict(utilisations))
    name = max(valid, key=valid.__getitem__)
    u = valid[name]
    if u >= threshold:
        return BottleneckReading(name, None, f"{name} is busy {u:.1%} of the time (>= {threshold:.0%})")
    return BottleneckReading(None, None, f"the busiest component, {name}, is busy only {u:.1%} (< {threshold:.0%})")
