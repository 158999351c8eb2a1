"""Little's law on one measurement window of a closed-model load: does X (R + Z) equal N, the
users the load generator kept busy, within what sampling alone can explain? Every stored row
carries the answer (:class:`LittlesLaw`), so a row whose throughput and latency cannot both be
right says so in the table instead of passing silently into a model fit.

The law (Little 1961, "A proof for the queuing formula L = lambda W", Operations Research 9(3);
in its operational form for interactive systems, the response time law R = N / X - Z of
Lazowska, Zahorjan, Graham and Sevcik 1984, *Quantitative System Performance*, ch. 3.2.3):
N users each alternate a think time Z_k and a request of response time R_k, so over a window of
length D

    N D = sum over the C cycles that complete in the window of (R_k + Z_k)  +  B,

where B, the boundary term, is what the cycles in progress at the two edges of the window add
or remove. Dividing by N D, the stored ratio X (R + Z) / N (X = C / D, R the mean response time,
Z the planned mean think time) is 1 + (sum of (Z - Z_k) - B) / (N D) when the response times
account for the users' whole cycle. A ratio below 1 beyond the tolerance means the users spent
time the row's latency does not show: connection set-up or think-timer lag outside the measured
latency, or requests longer than the window, cut off by it (seed 000-style 1 s windows at
100 KB responses).

The tolerance is derived, not chosen. Two sums of independent zero-mean terms make the ratio
stray from 1, each bounded with Z_SCORE = 4 standard deviations (a normal tail of 6e-5 on each
side; the variances below are upper bounds):

* Boundary. Per user, B_u = A_end - A_start, the ages of the cycles in progress at the edges.
  For a stationary user they are identically distributed (E B_u = 0) in [0, c_max], with
  E A^2 = E c^3 / (3 E c) <= c_max E c^2 / (3 E c) (renewal theory: the cycle met at an instant
  is length-biased, its age uniform within it); the edges are independent when the window is
  much longer than a cycle, so Var B_u <= 2 c_max E c^2 / (3 E c) and Var B <= N times that.
  E c and E c^2 come from the mean and standard deviation of the
  response times and the think-time distribution (independent of them); c_max is the longest
  response seen plus the longest think time (for an exponential think time, the expected largest
  of C draws, Z (ln C + 1)).
* Think time. The C think times drawn have the distribution's variance sigma_Z^2 (constant: 0;
  uniform on [a, b]: (b - a)^2 / 12; exponential: Z^2), so Var sum (Z_k - Z) = C sigma_Z^2.
  With an exponential Z this term is 4 Z sqrt(C) / (N D) of the ratio: 14 % for 4 users thinking
  10 ms for 2 s, too wide to tell. The load generator knows the think times it drew; reporting
  their mean would remove the term.
* Resolution. HDR histograms keep 3 significant digits: a mean is within 2^-10 of the truth,
  added as is.

The normal approximation (the central limit theorem over the N users and the C think times) is
checked by simulation in ``tests/test_littles_law.py``: with windows many times longer than the
slowest request, 1 to 64 users, log-normal response times (sigma up to 1.5) and constant,
uniform or exponential think times, no consistent window is flagged and the tolerance is 5 to
20 times the spread the windows really show.

The bound assumes the requests in flight at the window's edges are no longer than the longest
it completed. A window only a few times longer than its slowest requests breaks that: its edges
alone move the ratio by up to about (slowest cycle / D), and it may close on a request longer
than any it completed. So a row whose tolerance exceeds :data:`MAX_TOLERANCE` (10 %: for a few
users, a window shorter than about 10 slowest requests) is flagged too, as too short for its
slowest requests; issue 20 of the project asks exactly that (a 1 s window at 100 KB responses
cut off requests longer than the window). Very heavy tails break it at any window length: with
log-normal response times of sigma = 1.5 to 2 (sigma = 2 is the shape of loopback latency at
one user: a standard deviation 8 times the mean), simulated 2 s windows of 1 to 16 users close
on a request far longer than any they completed about once in 100 (0.5 to 1.3 %), and are
flagged; the row's mean latency then really misses that request. The bound also assumes the
users independent, and the users of one load thread are not: a stall of the thread at the
window's end (milliseconds on a busy machine) ages every user's cycle in progress at once, a
departure N times one user's (4 users of 137 µs cycles, a 2 s window: 0.997 against a bound of
± 0.0019).

So the load generator reports B itself (``closed_boundary_s``, from the start of each user's
first cycle that ended in the window and of its cycle in progress at the end), and with it the
law is an identity of its accounting: X (R + Z) / N + B / (N D) = 1, up to the think times'
randomness and the histogram's resolution, whatever the machine's load. A departure then means
time outside the measured latency, and only that. What the bound's window-length test caught is
asked of B directly: a row whose edges hold more than :data:`MAX_TOLERANCE` of the users' time
(|B| / (N D)) is flagged as too short for its slowest requests, since its mean latency misses
the cycles cut off. Summaries without B (other tools', older versions) keep the bound.

The open and partly-open models have no fixed population: their law is L = X R with L the mean
number of requests in the system, which the load generator does not measure, so their rows
carry no check (shown "n/a").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archlab.stats import HDR_RESOLUTION

__all__ = ["HDR_RESOLUTION", "MAX_TOLERANCE", "Z_SCORE", "Completions", "LittlesLaw", "Think", "check_closed_window"]

#: Standard deviations of each sum allowed: a normal tail of 6.3e-5 beyond, on each side.
Z_SCORE = 4.0
#: A check that cannot resolve a 10 % disagreement checks nothing worth a verdict: its window is
#: too short for its slowest requests, or for the randomness of its think times (see the module).
MAX_TOLERANCE = 0.10


@dataclass(frozen=True)
class Completions:
    """The requests completed in the window: how many, and the mean, standard deviation and
    maximum of their response times in seconds."""

    count: int
    mean_s: float
    stdev_s: float
    max_s: float

    def plus(self, other: "Completions") -> "Completions":
        """Both groups as one (pooled mean and variance, the larger maximum)."""
        n = self.count + other.count
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        mean = (self.count * self.mean_s + other.count * other.mean_s) / n
        second = (self.count * (self.stdev_s**2 + self.mean_s**2) + other.count * (other.stdev_s**2 + other.mean_s**2)) / n
        return Completions(n, mean, math.sqrt(max(second - mean**2, 0.0)), max(self.max_s, other.max_s))


@dataclass(frozen=True)
class Think:
    """The think-time distribution the users drew from: its mean, its standard deviation and
    its largest draw (None: unbounded, the exponential)."""

    mean_s: float
    stdev_s: float
    max_s: float | None

    @classmethod
    def constant(cls, z_s: float) -> "Think":
        return cls(z_s, 0.0, z_s)

    @classmethod
    def uniform(cls, low_s: float, high_s: float) -> "Think":
        return cls((low_s + high_s) / 2, (high_s - low_s) / math.sqrt(12.0), high_s)

    @classmethod
    def exponential(cls, mean_s: float) -> "Think":
        return cls(mean_s, mean_s, None)

    def largest_of(self, draws: int) -> float:
        """The largest of ``draws`` think times: the bound, or (exponential) its expectation,
        Z (H_n) <= Z (ln n + 1)."""
        return self.max_s if self.max_s is not None else self.mean_s * (math.log(max(draws, 1)) + 1.0)


@dataclass(frozen=True)
class LittlesLaw:
    """Little's law on one closed-model row. ``ratio`` is X (R + Z) / N with R the row's mean
    latency (the closed model's service time, from the actual send); ``planned_ratio`` the same
    with R measured from each request's planned send time (previous completion + think time),
    which also holds the think-timer's lag and any wait for a connection; ``tolerance`` is the
    largest |ratio - 1| sampling and HDR resolution explain (see the module)."""

    ratio: float
    tolerance: float
    planned_ratio: float | None = None
    #: B / (N D): the share of the users' time the window's edges add (reported by the load
    #: generator; None: not reported, and the tolerance bounds it instead).
    boundary_share: float | None = None

    @property
    def holds(self) -> bool:
        """|ratio - 1| within the tolerance."""
        return abs(self.ratio - 1.0) <= self.tolerance

    @property
    def conclusive(self) -> bool:
        """The window is long enough for the check to mean something: tolerance <= 10 %, and the
        cycles in progress at its edges hold at most 10 % of the users' time."""
        edges_ok = self.boundary_share is None or abs(self.boundary_share) <= MAX_TOLERANCE
        return self.tolerance <= MAX_TOLERANCE and edges_ok

    @property
    def ok(self) -> bool:
        """The row passes: the law holds, and the window could have shown otherwise."""
        return self.holds and self.conclusive

    @property
    def planned_holds(self) -> bool | None:
        """Whether the law holds with R from the planned send (None: not measured)."""
        return None if self.planned_ratio is None else abs(self.planned_ratio - 1.0) <= self.tolerance

    def explanation(self) -> str:
        """What a flagged row's numbers say: where the users' missing (or extra) time went."""
        if self.ok:
            return "X (R + Z) = N within the sampling tolerance"
        if not self.conclusive and self.tolerance <= MAX_TOLERANCE:
            return (f"the requests in progress at the window's edges hold {abs(self.boundary_share or 0.0):.0%} of the "
                    "users' time, which the mean latency misses: lengthen the window and the warm-up to many times the "
                    "slowest response")
        if not self.conclusive:
            return (f"the window is too short to tell: the requests in progress at its edges and the think times drawn "
                    f"could alone move X (R + Z) / N by ± {self.tolerance:.0%}; lengthen it (and the warm-up) to many "
                    "times the slowest response and to many more completions per user")
        if self.ratio < 1.0 and self.planned_holds:
            return ("the missing time lies between each request's planned and actual send (think-timer lag, "
                    "or waiting for a connection when the server closed the previous one): the load generator's "
                    "time, outside the measured latency")
        # Without the reported boundary term, a stall of the load generator at an edge moves every
        # user's cycle at once, beyond a bound for independent users (see the module).
        stall = "" if self.boundary_share is not None else " (summaries without closed_boundary_s only)"
        if self.ratio < 1.0:
            return ("users spent time in no completed request: requests longer than the window (cut off by it; "
                    "lengthen the window and the warm-up beyond the slowest request), a request at the window's end "
                    "far longer than any it completed (a heavy tail), requests that failed without a response time"
                    + ("" if self.boundary_share is not None else f", or a load-generator stall at the window's end{stall}"))
        if self.boundary_share is None:
            return ("the response times add up to more than the users' time: a load-generator stall at the window's "
                    f"start, its users' cycles then counted whole{stall}, or an inconsistent accounting")
        return "the response times add up to more than the users' time: the window's accounting is inconsistent"


def check_closed_window(
    users: int,
    window_s: float,
    completions: Completions,
    think: Think,
    planned: Completions | None = None,
    boundary_s: float | None = None,
) -> LittlesLaw:
    """Little's law on a closed-model window of ``window_s`` seconds in which ``users`` users
    completed ``completions`` (every completion with a response time: 2xx and other statuses;
    a timeout counts with the timeout as its time). ``planned`` are the same completions timed
    from their planned send, when measured; ``boundary_s`` the boundary term B when the load
    generator reported it (the ratios then include B / (N D), and the tolerance has no boundary
    part). Raises ValueError on inputs no window can have."""
    if users < 1 or not window_s > 0 or completions.count < 1:
        raise ValueError(f"users >= 1, window_s > 0 and at least one completion expected; got {users}, {window_s}, "
                         f"{completions.count}")
    n, z = completions.count, think.mean_s
    population_time = users * window_s

    edges = 0.0 if boundary_s is None else boundary_s / population_time

    def ratio(c: Completions) -> float:
        return c.count * (c.mean_s + z) / population_time + edges

    # The boundary term is made of the users' real cycles: timed from the planned send when
    # measured (it holds the time outside the headline latency too), else the headline's.
    lived = planned if planned is not None else completions
    r = lived.mean_s
    cycle_mean = r + z
    cycle_square = lived.stdev_s**2 + r * r + 2.0 * r * z + think.stdev_s**2 + z * z
    cycle_max = lived.max_s + think.largest_of(n)
    # Var B_u <= 2 c_max E c^2 / (3 E c); a window of zero-length cycles has no boundary.
    boundary_variance = users * 2.0 * cycle_max * cycle_square / (3.0 * cycle_mean) if cycle_mean > 0 else 0.0
    boundary = Z_SCORE * math.sqrt(boundary_variance) if boundary_s is None else 0.0
    thinking = Z_SCORE * math.sqrt(n) * think.stdev_s
    tolerance = (boundary + thinking) / population_time + HDR_RESOLUTION
    return LittlesLaw(ratio(completions), tolerance, ratio(planned) if planned is not None else None,
                      None if boundary_s is None else edges)
