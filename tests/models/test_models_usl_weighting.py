"""USL with relative-error weighting (noise as a percentage of throughput, the usual shape of
run-to-run spread) and the Amdahl-vs-USL test. Synthetic data with known parameters and fixed
seeds; R usl's data sets (notes/modeling.md §1.3) for the cases whose answer R usl fixes."""

from __future__ import annotations

import numpy as np
import pytest

from archlab.models import USL, Amdahl, ModelError, amdahl_speedup, compare_scalability, usl_throughput

N = np.array([1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128], dtype=float)
TRUTH = (0.04, 1.5e-4, 500.0)
SPECSDM91 = ([1, 18, 36, 72, 108, 144, 216], [64.9, 995.9, 1652.4, 1853.2, 1828.9, 1775.0, 1702.2])
RAYTRACER = ([1, 4, 8, 12, 16, 20, 24, 28, 32, 48, 64], [20, 78, 130, 170, 190, 200, 210, 230, 260, 280, 310])


def test_relative_weighting_covers_under_multiplicative_noise():
    # 5 % multiplicative noise: with relative weighting each 95 % interval and the prediction
    # band for one new measurement at N = 160 cover the truth 91-99 % of the time. (Unweighted,
    # the kappa interval covered 88 % on the same data in a trial: the large-N points dominate.)
    rng = np.random.default_rng(2024)
    hits = {p: 0 for p in ("sigma", "kappa", "lambda", "band")}
    reps = 200
    for _ in range(reps):
        x = usl_throughput(N, *TRUTH) * (1 + 0.05 * rng.standard_normal(N.size))
        m = USL(weighting="relative").fit(N, x)
        for p, v in zip(("sigma", "kappa", "lambda"), TRUTH):
            lo, hi = m.confint_[p]
            hits[p] += lo <= v <= hi
        new = usl_throughput(160, *TRUTH) * (1 + 0.05 * rng.standard_normal())
        band = m.predict(160, "prediction")
        hits["band"] += band.lower[0] <= new <= band.upper[0]
    for p, h in hits.items():
        assert 0.91 <= h / reps <= 0.99, (p, h / reps)


def test_relative_fit_of_noise_free_data_and_refusal():
    x = usl_throughput(N, *TRUTH)
    x[0] *= 1 + 1e-12
    m = USL(weighting="relative").fit(N, x)
    assert (m.sigma_, m.kappa_, m.lambda_) == pytest.approx(TRUTH, rel=1e-6)
    assert "(relative)" in m.summary()
    with pytest.raises(ModelError, match="^weighting"):
        USL(weighting="log").fit(N, x)


def test_amdahl_data_rarely_needs_kappa():
    # Amdahl truth (kappa = 0): the boundary-corrected test at 95 % should pick the USL in
    # about 5 % of data sets.
    rng = np.random.default_rng(99)
    reps = 200
    wrong = sum(
        compare_scalability(N, 500 * amdahl_speedup(N, 0.04) * (1 + 0.03 * rng.standard_normal(N.size)),
                            weighting="relative").preferred == "USL"
        for _ in range(reps)
    )
    assert 0.01 <= wrong / reps <= 0.10


def test_usl_data_with_a_peak_needs_kappa():
    rng = np.random.default_rng(5)
    x = usl_throughput(N, *TRUTH) * (1 + 0.02 * rng.standard_normal(N.size))
    c = compare_scalability(N, x, weighting="relative")
    assert c.preferred == "USL" and c.p_value < 1e-6 and c.aicc_usl < c.aicc_amdahl
    assert isinstance(c.amdahl, Amdahl) and "preferred: USL" in c.summary()


def test_r_usl_data_sets():
    # raytracer: R usl's fit has beta = 0.0000 on its bound (tests/confint.Rout.save), so the
    # two laws coincide: F = 0, p = 1, Amdahl (the simpler) preferred.
    c = compare_scalability(*RAYTRACER)
    assert c.f_statistic == 0 and c.p_value == 1 and c.preferred == "Amdahl"
    # specsdm91: the USL's SSE is R usl's residual standard error 82.8 on 4 dof, squared
    # (tests/usl-nlxb.Rout.save); p = 0.00885 is this implementation's regression value, so the
    # choice flips between the 99 % and 99.5 % levels, and AICc (7 points) prefers Amdahl.
    c = compare_scalability(*SPECSDM91)
    assert c.usl.sse_ == pytest.approx(82.8**2 * 4, rel=2e-3)
    assert c.p_value == pytest.approx(0.00885, rel=1e-2) and c.preferred == "USL"
    assert compare_scalability(*SPECSDM91, confidence=0.995).preferred == "Amdahl"
    assert c.aicc_amdahl < c.aicc_usl
