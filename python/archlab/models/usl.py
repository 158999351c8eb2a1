"""Scalability laws fitted to measured throughput: the Universal Scalability Law
X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1)) (Gunther; seed 000 eq. 7.5 with
alpha = sigma, beta = kappa) and Amdahl's law, its kappa = 0 case (seed 000 eq. 7.4).

The fit is bounded nonlinear least squares (sigma in [0, 1], kappa >= 0, lambda >= 0; scipy's
trust-region-reflective method, which handles active bounds), started from the best point of a
variable-projection grid: for fixed (sigma, kappa) the optimal lambda is linear, so the grid
search over two parameters cannot be trapped the way a single start can. Confidence intervals
use the t quantile with n - p degrees of freedom (not R usl's qt(level, n - 1), which gives a
two-sided 90 % interval; notes/modeling.md §1.5), and predictions carry a delta-method band.
Data that cannot identify the parameters is refused with the reason."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Self

import numpy as np
from scipy import optimize, stats

from archlab.models import _check
from archlab.models.errors import ModelError, UnidentifiableError

PARAMETERS = ("sigma", "kappa", "lambda")
# Beyond this condition number of the column-normalised Jacobian the data cannot separate the
# parameters: the covariance matrix would be numerical noise.
MAX_CONDITION = 1e10


def usl_throughput(n: float | np.ndarray, sigma: float, kappa: float, lam: float) -> np.ndarray:
    """X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1))."""
    n = np.asarray(n, dtype=float)
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def amdahl_speedup(n: float | np.ndarray, sigma: float) -> np.ndarray:
    """S(N) = N / (1 + sigma (N-1)) (seed 000 eq. 7.4), bounded by 1/sigma."""
    return usl_throughput(n, sigma, 0.0, 1.0)


def gustafson_speedup(n: float | np.ndarray, sigma: float) -> np.ndarray:
    """Scaled speed-up S(N) = N - sigma (N - 1): the problem grows with N, the serial part does not."""
    n = np.asarray(n, dtype=float)
    return n - sigma * (n - 1.0)


@dataclass(frozen=True)
class Prediction:
    """Predicted throughput at ``n`` with a band (NaN when no interval was asked for)."""

    n: np.ndarray
    throughput: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    interval: str
    confidence: float


class USL:
    """Universal Scalability Law estimator.

    >>> model = USL().fit(n, x)             # doctest: +SKIP
    >>> model.sigma_, model.kappa_, model.lambda_, model.n_star_   # doctest: +SKIP

    Learned attributes: ``sigma_``, ``kappa_``, ``lambda_``; ``stderr_`` and ``confint_`` (dicts
    by parameter name), ``cov_`` (free parameters, in ``free_parameters_`` order), ``dof_``,
    ``residual_std_``, ``sse_``, ``fitted_``, ``residuals_``, ``active_bounds_`` (parameters
    that ended on a bound: their Wald interval is one-sided in truth and is clipped to the bound),
    ``n_star_`` (sqrt((1-sigma)/kappa), inf when kappa = 0) with ``n_star_confint_``,
    ``peak_throughput_`` X(N*), ``limit_throughput_`` lambda/sigma (the Amdahl asymptote),
    ``n_opt_`` 1/sigma, ``efficiency_`` X_i/(lambda N_i).

    ``weighting="relative"`` fits the relative errors (X_i - x_i) / x_i instead of the absolute
    ones: use it when the noise is a percentage of the throughput. ``sse_`` and
    ``residual_std_`` are then relative (a fraction), and the prediction band scales with the
    level.
    """

    fixed: ClassVar[dict[str, float]] = {}
    name: ClassVar[str] = "USL"

    def __init__(self, confidence: float = 0.95, weighting: Literal["none", "relative"] = "none"):
        self.confidence = confidence
        self.weighting = weighting

    # ------------------------------------------------------------------ fit
    def fit(self, n: Sequence[float] | np.ndarray, x: Sequence[float] | np.ndarray) -> Self:
        conf = _check.probability("confidence", self.confidence)
        n_arr, x_arr = self._validate(n, x)
        if self.weighting not in ("none", "relative"):
            raise ModelError("weighting", "'none' or 'relative'", self.weighting)
        # Relative weighting minimises sum ((X_i - x_i) / x_i)^2: the error model where the
        # noise is a percentage of the throughput (run-to-run spread usually is).
        w = 1.0 / x_arr if self.weighting == "relative" else np.ones_like(x_arr)
        free = [p for p in PARAMETERS if p not in self.fixed]
        theta = self._least_squares(n_arr, x_arr, free, w)
        params = dict(self.fixed)
        params.update(zip(free, theta))
        _snap_to_bounds(params, float(n_arr.max()))
        resid = x_arr - usl_throughput(n_arr, params["sigma"], params["kappa"], params["lambda"])
        dof = n_arr.size - len(free)
        sse = float((w * resid) @ (w * resid))
        jac = _gradient(n_arr, params, free)
        cov = self._covariance(jac * w[:, None], sse / dof, n_arr)
        t = float(stats.t.ppf(0.5 + conf / 2.0, dof))
        se = np.sqrt(np.diag(cov))

        self.sigma_, self.kappa_, self.lambda_ = params["sigma"], params["kappa"], params["lambda"]
        self.free_parameters_ = tuple(free)
        self.cov_ = cov
        self.dof_ = dof
        self.t_quantile_ = t
        self.sse_ = sse
        self.residual_std_ = math.sqrt(sse / dof)
        self.fitted_ = x_arr - resid
        self.residuals_ = resid
        self.n_ = n_arr
        self.stderr_ = {p: float(s) for p, s in zip(free, se)} | {p: 0.0 for p in self.fixed}
        self.active_bounds_ = tuple(p for p in free if _at_bound(p, params[p]))
        self.confint_ = {p: _clip(p, params[p] - t * self.stderr_[p], params[p] + t * self.stderr_[p]) for p in free}
        self.confint_ |= {p: (v, v) for p, v in self.fixed.items()}
        self.efficiency_ = x_arr / (self.lambda_ * n_arr)
        self._scalability_bounds(t)
        return self

    def _least_squares(self, n: np.ndarray, x: np.ndarray, free: list[str], w: np.ndarray) -> np.ndarray:
        start = _grid_start(n, x, "kappa" not in free, w)
        lower = np.zeros(len(free))
        upper = np.array([1.0 if p == "sigma" else np.inf for p in free])
        x0 = np.clip([start[p] for p in free], lower, upper)

        def residuals(theta: np.ndarray) -> np.ndarray:
            p = dict(self.fixed) | dict(zip(free, theta))
            return w * (usl_throughput(n, p["sigma"], p["kappa"], p["lambda"]) - x)

        def jacobian(theta: np.ndarray) -> np.ndarray:
            return _gradient(n, dict(self.fixed) | dict(zip(free, theta)), free) * w[:, None]

        result = optimize.least_squares(
            residuals, x0, jac=jacobian, bounds=(lower, upper), method="trf", x_scale="jac",
            xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=10_000,
        )
        return result.x

    def _validate(self, n: Sequence[float] | np.ndarray, x: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n_arr = _check.vector("n", n)
        x_arr = _check.vector("x", x)
        if n_arr.size != x_arr.size:
            raise ModelError("x", f"one throughput per concurrency level ({n_arr.size})", f"{x_arr.size} values")
        if np.any(n_arr < 1):
            raise ModelError("n", "concurrency levels >= 1", float(n_arr.min()))
        if np.any(x_arr <= 0):
            raise ModelError("x", "throughputs > 0", float(x_arr.min()))
        needed = len(PARAMETERS) - len(self.fixed) + 1
        distinct = np.unique(n_arr).size
        if distinct < needed:
            raise UnidentifiableError(
                "n", f"at least {needed} distinct concurrency levels", f"{distinct} ({np.unique(n_arr).tolist()})",
                f"{self.name} has {needed - 1} parameters and needs at least one residual degree of freedom",
            )
        return n_arr, x_arr

    def _covariance(self, jac: np.ndarray, s2: float, n: np.ndarray) -> np.ndarray:
        scale = np.linalg.norm(jac, axis=0)
        scale[scale == 0] = 1.0
        normalised = jac / scale
        cond = np.linalg.cond(normalised)
        if not np.isfinite(cond) or cond > MAX_CONDITION:
            raise UnidentifiableError(
                "n", "concurrency levels spread widely enough to separate the parameters",
                f"levels {np.unique(n).tolist()}",
                f"the Jacobian at the fit has condition number {cond:.3g} > {MAX_CONDITION:g}: "
                "contention and coherency cannot be told apart from these points",
            )
        inv = np.linalg.inv(normalised.T @ normalised)
        return s2 * inv / np.outer(scale, scale)

    def _scalability_bounds(self, t: float) -> None:
        s, k, lam = self.sigma_, self.kappa_, self.lambda_
        self.limit_throughput_ = lam / s if s > 0 else math.inf
        self.n_opt_ = 1.0 / s if s > 0 else math.inf
        if k > 0 and s < 1:
            n_star = math.sqrt((1.0 - s) / k)
            self.n_star_ = n_star
            self.peak_throughput_ = float(usl_throughput(n_star, s, k, lam))
            # Delta method on N* = sqrt((1 - sigma)/kappa) over the free parameters.
            grad = {"sigma": -1.0 / (2.0 * n_star * k), "kappa": -n_star / (2.0 * k), "lambda": 0.0}
            g = np.array([grad[p] for p in self.free_parameters_])
            half = t * math.sqrt(float(g @ self.cov_ @ g))
            self.n_star_confint_ = (max(n_star - half, 1.0), n_star + half)
        else:
            self.n_star_ = math.inf
            self.peak_throughput_ = self.limit_throughput_
            self.n_star_confint_ = (math.inf, math.inf)

    # -------------------------------------------------------------- predict
    def predict(
        self, n: float | Sequence[float] | np.ndarray, interval: Literal["none", "confidence", "prediction"] = "none"
    ) -> Prediction:
        """Throughput at ``n``; ``confidence`` bands the mean curve (delta method),
        ``prediction`` also adds the residual variance of one new measurement."""
        self._require_fitted()
        if interval not in ("none", "confidence", "prediction"):
            raise ModelError("interval", "'none', 'confidence' or 'prediction'", interval)
        n_arr = np.atleast_1d(np.asarray(n, dtype=float))
        params = {"sigma": self.sigma_, "kappa": self.kappa_, "lambda": self.lambda_}
        mean = usl_throughput(n_arr, self.sigma_, self.kappa_, self.lambda_)
        if interval == "none":
            nan = np.full_like(mean, np.nan)
            return Prediction(n_arr, mean, nan, nan, interval, self.confidence)
        g = _gradient(n_arr, params, list(self.free_parameters_))
        var = np.einsum("ij,jk,ik->i", g, self.cov_, g)
        if interval == "prediction":
            # One new measurement: its own noise, absolute or (relative weighting) a fraction
            # of the level.
            scale = mean if self.weighting == "relative" else 1.0
            var = var + (self.residual_std_ * scale) ** 2
        half = self.t_quantile_ * np.sqrt(var)
        return Prediction(n_arr, mean, mean - half, mean + half, interval, self.confidence)

    def response_time(self, n: float | Sequence[float], think_time: float = 0.0) -> np.ndarray:
        """R(N) = N / X(N) - Z (interactive response-time law on the fitted curve)."""
        self._require_fitted()
        n_arr = np.asarray(n, dtype=float)
        return n_arr / usl_throughput(n_arr, self.sigma_, self.kappa_, self.lambda_) - think_time

    def summary(self) -> str:
        """Coefficient table with standard errors and intervals, plus the scalability bounds."""
        self._require_fitted()
        pct = f"{self.confidence * 100:g}%"
        lines = [f"{self.name} fit on {self.n_.size} points, {self.dof_} residual degrees of freedom",
                 f"{'parameter':<10}{'estimate':>14}{'std. error':>14}{pct + ' CI':>32}"]
        for p in PARAMETERS:
            value = {"sigma": self.sigma_, "kappa": self.kappa_, "lambda": self.lambda_}[p]
            lo, hi = self.confint_[p]
            note = " (fixed)" if p in self.fixed else (" (at bound)" if p in self.active_bounds_ else "")
            lines.append(f"{p:<10}{value:>14.6g}{self.stderr_[p]:>14.4g}{f'[{lo:.6g}, {hi:.6g}]':>32}{note}")
        unit = " (relative)" if self.weighting == "relative" else ""
        lines.append(f"residual standard error {self.residual_std_:.4g}{unit}")
        lines.append(f"N* = {self.n_star_:.6g}, peak X(N*) = {self.peak_throughput_:.6g}, "
                     f"limit lambda/sigma = {self.limit_throughput_:.6g}, N_opt = 1/sigma = {self.n_opt_:.6g}")
        return "\n".join(lines)

    def _require_fitted(self) -> None:
        if not hasattr(self, "lambda_"):
            raise ModelError("model", "a fitted model (call fit first)", "an unfitted " + self.name)


class Amdahl(USL):
    """Amdahl's law: the USL with kappa = 0 (no coherency delay); throughput rises
    monotonically towards lambda/sigma."""

    fixed: ClassVar[dict[str, float]] = {"kappa": 0.0}
    name: ClassVar[str] = "Amdahl"


@dataclass(frozen=True)
class ScalabilityComparison:
    """Amdahl (kappa = 0) against the USL on the same points. ``f_statistic`` is the extra sum
    of squares test of the one extra parameter, ``p_value`` its boundary-corrected p (kappa = 0
    lies on the edge of kappa >= 0, so under Amdahl the statistic is 0 half of the time: the
    usual F tail probability is halved, Self and Liang 1987); ``aicc_*`` are the corrected
    Akaike criteria of the least-squares fits (lower is better). ``preferred`` is the USL when
    p < 1 - confidence, else Amdahl, the simpler model."""

    usl: USL
    amdahl: Amdahl
    f_statistic: float
    p_value: float
    aicc_usl: float
    aicc_amdahl: float
    preferred: str

    @classmethod
    def from_fits(cls, usl: USL, amdahl: Amdahl) -> ScalabilityComparison:
        """The comparison of two fits of the same points (same weighting and confidence)."""
        if usl.n_.size != amdahl.n_.size or usl.weighting != amdahl.weighting:
            raise ModelError("amdahl", "a fit of the same points with the same weighting as the USL", amdahl.weighting)
        dof = usl.dof_
        extra = max(amdahl.sse_ - usl.sse_, 0.0)
        if usl.sse_ <= 0:
            f = math.inf if extra > 0 else 0.0
        else:
            f = extra / (usl.sse_ / dof)
        p = 1.0 if f == 0 else 0.5 * float(stats.f.sf(f, 1, dof))
        size = usl.n_.size
        preferred = "USL" if p < 1.0 - _check.probability("confidence", usl.confidence) else "Amdahl"
        return cls(usl, amdahl, f, p, _aicc(usl.sse_, size, 3), _aicc(amdahl.sse_, size, 2), preferred)

    def summary(self) -> str:
        return (f"Amdahl vs USL: F = {self.f_statistic:.4g} (1, {self.usl.dof_} dof), p = {self.p_value:.3g}; "
                f"AICc Amdahl {self.aicc_amdahl:.4g}, USL {self.aicc_usl:.4g}; preferred: {self.preferred}")


def compare_scalability(
    n: Sequence[float], x: Sequence[float], confidence: float = 0.95, weighting: Literal["none", "relative"] = "none"
) -> ScalabilityComparison:
    """Fit both laws and test whether the coherency term kappa is needed (needs at least 4
    distinct levels, as the USL does)."""
    return ScalabilityComparison.from_fits(USL(confidence, weighting).fit(n, x), Amdahl(confidence, weighting).fit(n, x))


def _aicc(sse: float, n: int, p: int) -> float:
    """AICc of a Gaussian least-squares fit with p parameters plus the variance."""
    k = p + 1
    if sse <= 0 or n - k - 1 <= 0:
        return -math.inf if sse <= 0 else math.nan
    return n * math.log(sse / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


def _gradient(n: np.ndarray, params: dict[str, float], free: Sequence[str]) -> np.ndarray:
    """d X(N) / d theta for the free parameters, one row per N."""
    s, k, lam = params["sigma"], params["kappa"], params["lambda"]
    denom = 1.0 + s * (n - 1.0) + k * n * (n - 1.0)
    cols = {
        "sigma": -lam * n * (n - 1.0) / denom**2,
        "kappa": -lam * n * n * (n - 1.0) / denom**2,
        "lambda": n / denom,
    }
    return np.column_stack([cols[p] for p in free])


def _grid_start(n: np.ndarray, x: np.ndarray, amdahl: bool, w: np.ndarray) -> dict[str, float]:
    """Best (sigma, kappa) on a log grid, with lambda projected out (it is linear); residuals
    weighted by ``w``."""
    sigmas = np.concatenate(([0.0], np.logspace(-5, 0, 41)))
    kappas = np.array([0.0]) if amdahl else np.concatenate(([0.0], np.logspace(-9, 0, 55)))
    s, k = np.meshgrid(sigmas, kappas, indexing="ij")
    f = w * n[None, None, :] / (1.0 + s[..., None] * (n - 1.0) + k[..., None] * n * (n - 1.0))
    xw = w * x
    lam = (f * xw).sum(axis=-1) / (f * f).sum(axis=-1)
    sse = ((lam[..., None] * f - xw) ** 2).sum(axis=-1)
    i, j = np.unravel_index(np.argmin(sse), sse.shape)
    return {"sigma": float(s[i, j]), "kappa": float(k[i, j]), "lambda": float(lam[i, j])}


def _snap_to_bounds(params: dict[str, float], n_max: float) -> None:
    """Set sigma or kappa to exactly 0 when its whole effect over the measured range is below
    rounding (the solver stops at 1e-30-ish, which would report N* = 1e16 instead of "none")."""
    if params["sigma"] * (n_max - 1.0) < 1e-12:
        params["sigma"] = 0.0
    if params["kappa"] * n_max * (n_max - 1.0) < 1e-12:
        params["kappa"] = 0.0


def _at_bound(name: str, value: float) -> bool:
    return value == 0.0 or (name == "sigma" and value >= 1.0 - 1e-12)


def _clip(name: str, lo: float, hi: float) -> tuple[float, float]:
    upper = 1.0 if name == "sigma" else math.inf
    return max(lo, 0.0), min(hi, upper)
