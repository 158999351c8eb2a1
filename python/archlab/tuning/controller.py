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
calls :meth:`HillClimber.observe`, which returns the size for the next interval. One interval
measures the adopted size, the next probes ``size + direction * step``. A probe that beats the
adopted size by more than ``threshold`` (relative; set it above the interval's sampling noise) is
adopted and is followed at once by the next probe in the same direction, compared with the
probe's own fresh measurement, so a climb costs one interval per step; two wins in a row double
the step (up to ``max_step``); a probe that does not win reverses the direction, and a failure on
both sides halves the step, down to ``min_step``. A change of the plant (the program mix) is caught by the regime
detector: each measurement of the adopted size is compared with the previous one, and a shift
beyond ``change_band`` (relative to the larger of the two) restarts the climb with the step at
``max_step``, towards the side of the range with more room -- the change-point restart of the
.NET controller. It is the same algorithm as the server's ``crates/server/src/pool_control.rs``
(``archlab._native.PoolClimber`` wraps that one, and a test checks that both decide alike)."""

from __future__ import annotations

from dataclasses import dataclass

from archlab.errors import InvalidValue


@dataclass
class HillClimber:
    """``initial`` size, sizes kept in ``minimum..=maximum``, first step ``step`` (kept in
    ``min_step..=max_step``), ``threshold`` the relative gain a probe needs to be adopted,
    ``change_band`` the relative shift of the adopted size's throughput that restarts the climb."""

    initial: int = 1
    minimum: int = 1
    maximum: int = 256
    step: int = 4
    max_step: int = 32
    threshold: float = 0.05
    min_step: int = 1
    change_band: float = 0.4

    def __post_init__(self) -> None:
        for name in ("minimum", "maximum", "step", "min_step", "max_step"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidValue(f"HillClimber.{name}", "an integer >= 1", v)
        if self.minimum > self.maximum:
            raise InvalidValue("HillClimber.maximum", f"an integer >= minimum ({self.minimum})", self.maximum)
        if not self.minimum <= self.initial <= self.maximum:
            raise InvalidValue("HillClimber.initial", f"an integer in {self.minimum}..={self.maximum}", self.initial)
        if self.min_step > self.max_step:
            raise InvalidValue("HillClimber.min_step", f"an integer in 1..={self.max_step} (max_step)", self.min_step)
        if not 0 <= self.threshold < 1:
            raise InvalidValue("HillClimber.threshold", "a number in [0, 1)", self.threshold)
        if not 0 < self.change_band <= 1:
            raise InvalidValue("HillClimber.change_band", "a number in (0, 1]", self.change_band)
        self.current = self.initial
        self._step = max(self.min_step, min(self.step, self.max_step))
        self._direction = 1
        self._probe: int | None = None  # the size under test in this interval, if probing
        self._current_rate: float | None = None  # the adopted size's last measured throughput
        self._wins = 0
        self._failed_sides = 0
        self.changes_detected = 0  # changes of the plant detected (each restarted the climb)

    @classmethod
    def for_range(cls, minimum: int, maximum: int) -> "HillClimber":
        """The server's live settings for a pool of ``minimum..=maximum`` threads, starting at
        ``minimum`` (``ClimberSettings::for_range``): a first step of an eighth of the range,
        doubling up to half of it; a minimum step of a sixteenth, rounded up, so that a flat curve
        does not leave the climber probing one thread at a time."""
        span = max(1, maximum - minimum)
        min_step = max(1, -(-span // 16))
        return cls(initial=minimum, minimum=minimum, maximum=maximum, step=max(span // 8, min_step),
                   min_step=min_step, max_step=max(span // 2, min_step))

    @property
    def size(self) -> int:
        """The pool size to run the next control interval with."""
        return self._probe if self._probe is not None else self.current

    def observe(self, throughput_rps: float) -> int:
        """Report the throughput of the interval just run at :attr:`size`; returns the next size."""
        if not throughput_rps >= 0:
            raise InvalidValue("throughput_rps", "a number >= 0", throughput_rps)
        x = float(throughput_rps)
        if self._probe is None:
            previous = self._current_rate
            if previous is not None and abs(x - previous) > self.change_band * max(x, previous):
                self._restart()
            self._current_rate = x
            self._probe_next()
            return self.size
        probe, self._probe = self._probe, None
        if x > (self._current_rate or 0.0) * (1 + self.threshold):
            self.current = probe
            self._current_rate = x
            self._failed_sides = 0
            self._wins += 1
            if self._wins >= 2:
                self._step = min(self._step * 2, self.max_step)
                self._wins = 0
            # Chain: the probe was just measured, so the next probe compares with it.
            target = self._target()
            self._probe = target if target != self.current else None
        else:
            self._lost()
        return self.size

    def _restart(self) -> None:
        """The plant changed: probe widely again, towards the side of the range with more room."""
        self.changes_detected += 1
        self._step = self.max_step
        self._wins = 0
        self._failed_sides = 0
        self._direction = 1 if self.maximum - self.current >= self.current - self.minimum else -1

    def _probe_next(self) -> None:
        target = self._target()
        if target == self.current:
            self._lost()
            target = self._target()
        self._probe = target if target != self.current else None

    def _target(self) -> int:
        return max(self.minimum, min(self.maximum, self.current + self._direction * self._step))

    def _lost(self) -> None:
        self._wins = 0
        self._direction = -self._direction
        self._failed_sides += 1
        if self._failed_sides >= 2:
            self._step = max(self.min_step, self._step // 2)
            self._failed_sides = 0
