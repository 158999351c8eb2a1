"""The online pool-size controller: hill climbing on throughput, after the .NET thread pool
(Hellerstein, Morrison, Eilebrecht, "Optimizing concurrency levels in the .NET ThreadPool: a case
study of controller design and implementation", Feedback Control Implementation and Design in
Computing Systems and Networks, 2008). Like .NET's, it treats the server as a black box whose
throughput is a concave function of the pool size plus noise, and climbs it by comparing
measured control intervals; unlike .NET's (which injects a sinusoidal signal and fits its
response) it uses the simpler probe-and-compare form the paper starts from, which needs no
signal-processing state and is easy to host in a server.

The algorithm is a pure state machine with O(1) state and no clock or I/O: the host runs the pool
at :attr:`HillClimber.size` for one control interval, measures the completions per second, and
calls :meth:`HillClimber.observe`, which returns the size for the next interval. Each cycle is
two intervals: the current size, then a probe at ``size + direction * step``. A probe that beats
the current size by more than ``threshold`` (relative; set it above the interval's sampling noise)
is adopted, and two successes in a row in one direction double the step (so a shifted optimum,
e.g. after the program mix changes, is reached quickly); a probe that does not win reverses the
direction, and a failure on both sides halves the step, down to 1. The current size is
re-measured every cycle, so a change of the plant is seen within one cycle and never compared
against a stale figure."""

from __future__ import annotations

from dataclasses import dataclass

from archlab.errors import InvalidValue


@dataclass
class HillClimber:
    """``initial`` size, sizes kept in ``minimum..=maximum``, first step ``step`` (doubled up to
    ``max_step``), ``threshold`` the relative gain a probe needs to be adopted."""

    initial: int = 1
    minimum: int = 1
    maximum: int = 256
    step: int = 4
    max_step: int = 32
    threshold: float = 0.05

    def __post_init__(self) -> None:
        for name in ("minimum", "maximum", "step", "max_step"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidValue(f"HillClimber.{name}", "an integer >= 1", v)
        if self.minimum > self.maximum:
            raise InvalidValue("HillClimber.maximum", f"an integer >= minimum ({self.minimum})", self.maximum)
        if not self.minimum <= self.initial <= self.maximum:
            raise InvalidValue("HillClimber.initial", f"an integer in {self.minimum}..={self.maximum}", self.initial)
        if not 0 <= self.threshold < 1:
            raise InvalidValue("HillClimber.threshold", "a number in [0, 1)", self.threshold)
        self.current = self.initial
        self._step = min(self.step, self.max_step)
        self._direction = 1
        self._probe: int | None = None  # the size under test in this interval, if probing
        self._current_rate = 0.0
        self._wins = 0
        self._failed_sides = 0

    @property
    def size(self) -> int:
        """The pool size to run the next control interval with."""
        return self._probe if self._probe is not None else self.current

    def observe(self, throughput_rps: float) -> int:
        """Report the throughput of the interval just run at :attr:`size`; returns the next size."""
        if not throughput_rps >= 0:
            raise InvalidValue("throughput_rps", "a number >= 0", throughput_rps)
        if self._probe is None:
            self._current_rate = throughput_rps
            target = self._clamp(self.current + self._direction * self._step)
            if target == self.current:
                self._lost()
                target = self._clamp(self.current + self._direction * self._step)
            self._probe = target if target != self.current else None
            return self.size
        probe, self._probe = self._probe, None
        if throughput_rps > self._current_rate * (1 + self.threshold):
            self.current = probe
            self._failed_sides = 0
            self._wins += 1
            if self._wins >= 2:
                self._step = min(self._step * 2, self.max_step)
                self._wins = 0
        else:
            self._lost()
        return self.size

    def _lost(self) -> None:
        self._wins = 0
        self._direction = -self._direction
        self._failed_sides += 1
        if self._failed_sides >= 2:
            self._step = max(1, self._step // 2)
            self._failed_sides = 0

    def _clamp(self, m: int) -> int:
        return max(self.minimum, min(self.maximum, m))
