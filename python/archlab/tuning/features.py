"""Features of a service program, read from the tree the server executes (the analogue of seed
003's walk of the Ballerina syntax tree, §3.2.4, Table 3.2).

The seed's six features are static counts over the syntax tree: F1-F3 the number of HTTP
connector calls (our ``call`` steps), database calls (``db``) and non-blocking gRPC calls (the
calls of ``fanout`` steps, one per entry), each counted once where it is written; F4-F6 the
number of loops (``repeat`` steps, at any nesting) that contain at least one call of that kind,
as Table 3.2 words them. (The seed's pseudo-code increments a counter per call found inside a
loop instead; the two agree on the seed's programs, which have one call per loop.) They ignore
how often a loop runs and how long a call takes, which is why archlab adds what its programs say
exactly: calls executed per request (loops unrolled), the widest fan-out, and the expected time a
request holds its thread on each resource -- CPU, PostgreSQL, waiting for the downstream,
sleeping -- from :class:`StepCosts` (measured per step, or the rough defaults below), and one
derived from them, the blocking ratio: log2(1 + time off the CPU / time on it). The ratio is
the one figure the textbook sizing rule reads (threads = cores x (1 + wait / compute), Goetz et
al., *Java Concurrency in Practice*, 2006, §8.2), and a tree cannot form a ratio of two
features from splits on each. Those
per-resource demands are what the model-based tuner (:mod:`archlab.tuning.model_based`) feeds to
a queueing network."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from archlab.errors import InvalidValue
from archlab.tuning.programs import Program, Step, StepKind


@dataclass(frozen=True)
class StepCosts:
    """Expected cost of each step kind on the server, in seconds, for the derived features.

    The defaults are order-of-magnitude figures for one core of a current x86 server (trial
    division ~1 ns per candidate divisor, merge sort ~5 ns per element per level, a loopback
    PostgreSQL primary-key lookup ~100 us); measure them (a program run at pool size 1) when the
    absolute values matter. Calls and sleeps cost what the program says, plus
    ``call_overhead_s`` per downstream round trip."""

    prime_s_per_n: float = 1e-9
    sort_s_per_element_level: float = 5e-9
    db_s: float = 100e-6
    call_overhead_s: float = 50e-6

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InvalidValue(f"StepCosts.{f.name}", "a finite number of seconds >= 0", v)


@dataclass(frozen=True)
class Demands:
    """Expected seconds one request holds its thread on each resource (loops unrolled)."""

    cpu_s: float
    db_s: float
    wait_s: float  # downstream calls (blocking ones summed, a fan-out counted for its slowest call)
    sleep_s: float

    @property
    def total_s(self) -> float:
        return self.cpu_s + self.db_s + self.wait_s + self.sleep_s


@dataclass(frozen=True)
class Features:
    """The seed's six features (first six fields) and archlab's additions."""

    http_calls: int
    db_calls: int
    grpc_calls: int
    loops_with_http: int
    loops_with_db: int
    loops_with_grpc: int
    http_calls_executed: int
    db_calls_executed: int
    grpc_calls_executed: int
    max_fanout: int
    cpu_s: float
    db_s: float
    wait_s: float
    sleep_s: float

    SEED_FEATURES = ("http_calls", "db_calls", "grpc_calls", "loops_with_http", "loops_with_db", "loops_with_grpc")
    # Derived from the fields (properties below), after them in a vector.
    DERIVED_FEATURES = ("blocking_ratio_log2",)

    @classmethod
    def names(cls, seed_only: bool = False) -> tuple[str, ...]:
        return cls.SEED_FEATURES if seed_only else tuple(f.name for f in fields(cls)) + cls.DERIVED_FEATURES

    def vector(self, seed_only: bool = False) -> list[float]:
        d = asdict(self)
        d.update((n, getattr(self, n)) for n in self.DERIVED_FEATURES)
        return [float(d[n]) for n in self.names(seed_only)]

    @property
    def blocking_ratio_log2(self) -> float:
        """log2(1 + off-CPU seconds / CPU seconds) per request; a program with no CPU demand at
        all is priced at 1 us of CPU (the ratio is then large, as it is)."""
        off = self.db_s + self.wait_s + self.sleep_s
        return math.log2(1.0 + off / max(self.cpu_s, 1e-6))

    @property
    def demands(self) -> Demands:
        return Demands(self.cpu_s, self.db_s, self.wait_s, self.sleep_s)


@dataclass
class _Tally:
    static: dict[StepKind, int]
    executed: dict[StepKind, int]
    loops_with: dict[StepKind, int]
    max_fanout: int = 0
    cpu_s: float = 0.0
    db_s: float = 0.0
    wait_s: float = 0.0
    sleep_s: float = 0.0


_CALL_KINDS = (StepKind.CALL, StepKind.DB, StepKind.FANOUT)


def extract(program: Program, costs: StepCosts | None = None) -> Features:
    """The features of ``program``; ``costs`` prices the steps (defaults: :class:`StepCosts`)."""
    costs = costs or StepCosts()
    t = _Tally({k: 0 for k in _CALL_KINDS}, {k: 0 for k in _CALL_KINDS}, {k: 0 for k in _CALL_KINDS})
    _walk(program.steps, 1, t, costs)
    return Features(
        http_calls=t.static[StepKind.CALL],
        db_calls=t.static[StepKind.DB],
        grpc_calls=t.static[StepKind.FANOUT],
        loops_with_http=t.loops_with[StepKind.CALL],
        loops_with_db=t.loops_with[StepKind.DB],
        loops_with_grpc=t.loops_with[StepKind.FANOUT],
        http_calls_executed=t.executed[StepKind.CALL],
        db_calls_executed=t.executed[StepKind.DB],
        grpc_calls_executed=t.executed[StepKind.FANOUT],
        max_fanout=t.max_fanout,
        cpu_s=t.cpu_s,
        db_s=t.db_s,
        wait_s=t.wait_s,
        sleep_s=t.sleep_s,
    )


def _walk(steps: tuple[Step, ...], runs: int, t: _Tally, c: StepCosts) -> set[StepKind]:
    """Tally ``steps``, executed ``runs`` times per request; returns the call kinds they contain."""
    kinds: set[StepKind] = set()
    for s in steps:
        if s.kind is StepKind.REPEAT:
            inner = _walk(s.steps, runs * s.times, t, c)
            for k in inner:
                t.loops_with[k] += 1
            kinds |= inner
            continue
        if s.kind is StepKind.PRIME:
            t.cpu_s += runs * s.n * c.prime_s_per_n
        elif s.kind is StepKind.SORT:
            t.cpu_s += runs * s.n * max(1.0, math.log2(max(s.n, 1))) * c.sort_s_per_element_level
        elif s.kind is StepKind.SLEEP:
            t.sleep_s += runs * s.ms[0] / 1000
        else:
            # One static call per written call (a fan-out writes len(ms) of them).
            width = len(s.ms) if s.kind is StepKind.FANOUT else 1
            t.static[s.kind] += width
            t.executed[s.kind] += runs * width
            kinds.add(s.kind)
            if s.kind is StepKind.DB:
                t.db_s += runs * c.db_s
            else:
                # A blocking call waits its own time; a fan-out waits for its slowest call.
                t.wait_s += runs * (max(s.ms) / 1000 + c.call_overhead_s)
                if s.kind is StepKind.FANOUT:
                    t.max_fanout = max(t.max_fanout, width)
    return kinds
