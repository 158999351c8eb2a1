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


def measure_offsets(client: Client, workers: list[str], exchanges: int = 3) -> dict[str, ClockOffset]:
    """The offset of each of ``workers`` (addresses), from ``exchanges`` round trips that ask
    all of them at once (each worker's answer still lies inside the round trip, so the bound
    holds for every one of them)."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(exchanges):
        t0 = time.time()
        answers = client.run(_wall_clock, workers=list(workers))
        t3 = time.time()
        for worker, t1 in answers.items():
            delay = t3 - t0
            if worker not in best or delay < best[worker][1]:
                best[worker] = (t1 - (t0 + t3) / 2, delay)
    missing = sorted(set(workers) - set(best))
    if missing:
        raise ClusterError(f"workers {missing} did not answer a clock reading (lost?)")
    now = time.time()
    return {w: ClockOffset(w, best[w][0], best[w][1] / 2, now) for w in workers}


def check_offsets(offsets: dict[str, ClockOffset], max_offset_s: float = DEFAULT_MAX_OFFSET_S) -> None:
    """Refuse clocks too far apart to merge the shards' time lines: an offset whose size (plus
    its uncertainty) exceeds ``max_offset_s``."""
    for o in offsets.values():
        if abs(o.offset_s) + o.uncertainty_s > max_offset_s:
            raise ClusterError(
                f"worker {o.worker}: its clock is {o.offset_s * 1e3:+.1f} ms (± {o.uncertainty_s * 1e3:.1f} ms) from this host's, "
                f"beyond the {max_offset_s * 1e3:g} ms the shards' time lines may differ by; synchronise the hosts' clocks (NTP, chrony)"
            )
