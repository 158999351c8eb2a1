"""The clock offset of each worker against the client, measured the way NTP does: the client
notes t0, asks the worker for its wall clock t1, notes t3 on the answer; the worker's clock is
ahead by t1 - (t0 + t3) / 2, with an error of at most (t3 - t0) / 2 (the answer was read
somewhere inside the round trip). Of several exchanges the one with the shortest round trip
bounds the error best and is kept. Offsets are measured when a run starts and when it ends, so
a clock that drifted during the run is seen too."""

from __future__ import annotations

import time
from dataclasses import dataclass

from distributed import Client

from archlab.cluster.connect import ClusterError

#: Offsets larger than this cannot be trusted to line shards up (fix the hosts' NTP/chrony).
DEFAULT_MAX_OFFSET_S = 1.0


@dataclass(frozen=True)
class ClockOffset:
    worker: str
    #: The worker's wall clock minus the client's.
    offset_s: float
    #: Half the shortest round trip: the offset is exact to within this.
    uncertainty_s: float
    #: When it was measured (client clock, seconds since the epoch).
    measured_at_s: float

    def to_dict(self) -> dict:
        return {"worker": self.worker, "offset_s": self.offset_s, "uncertainty_s": self.uncertainty_s, "measured_at_s": self.measured_at_s}


def _wall_clock() -> float:
    return time.time()


def measure_offsets(client: Client, workers: list[str], exchanges: int = 5) -> dict[str, ClockOffset]:
    """The offset of each of ``workers`` (addresses), from ``exchanges`` round trips each."""
    out = {}
    for worker in workers:
        best: tuple[float, float] | None = None
        for _ in range(exchanges):
            t0 = time.time()
            t1 = client.run(_wall_clock, workers=[worker])[worker]
            t3 = time.time()
            delay = t3 - t0
            if best is None or delay < best[1]:
                best = (t1 - (t0 + t3) / 2, delay)
        assert best is not None
        out[worker] = ClockOffset(worker, best[0], best[1] / 2, time.time())
    return out


def check_offsets(offsets: dict[str, ClockOffset], max_offset_s: float = DEFAULT_MAX_OFFSET_S) -> None:
    """Refuse clocks too far apart to merge the shards' time lines: an offset whose size (plus
    its uncertainty) exceeds ``max_offset_s``."""
    for o in offsets.values():
        if abs(o.offset_s) + o.uncertainty_s > max_offset_s:
            raise ClusterError(
                f"worker {o.worker}: its clock is {o.offset_s * 1e3:+.1f} ms (± {o.uncertainty_s * 1e3:.1f} ms) from this host's, "
                f"beyond the {max_offset_s * 1e3:g} ms the shards' time lines may differ by; synchronise the hosts' clocks (NTP, chrony)"
            )
