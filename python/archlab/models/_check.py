"""Argument checks shared by the model modules. Each returns the value converted to the type the
model computes with, or raises :class:`~archlab.models.errors.ModelError` naming the parameter;
keeping them here keeps every formula module free of validation noise."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from archlab.models.errors import ModelError


def positive(name: str, value: float) -> float:
    """A finite float > 0."""
    v = _finite(name, value, "a finite number > 0")
    if v <= 0:
        raise ModelError(name, "a finite number > 0", value)
    return v


def non_negative(name: str, value: float) -> float:
    """A finite float >= 0."""
    v = _finite(name, value, "a finite number >= 0")
    if v < 0:
        raise ModelError(name, "a finite number >= 0", value)
    return v


def count(name: str, value: int, minimum: int = 1, maximum: int | None = None, why: str = "") -> int:
    """An integer >= minimum (and <= maximum, for ``why``; bools refused: True is not a server count)."""
    allowed = f"an integer >= {minimum}" if maximum is None else f"an integer in {minimum}..={maximum:_}"
    if isinstance(value, bool):
        raise ModelError(name, allowed, value)
    try:
        v = operator.index(value)
    except TypeError:
        raise ModelError(name, allowed, value) from None
    if v < minimum or (maximum is not None and v > maximum):
        raise ModelError(name, allowed, value, why if maximum is not None and v > maximum else "")
    return v


def probability(name: str, value: float) -> float:
    """A float strictly between 0 and 1 (a quantile level or a confidence level)."""
    v = _finite(name, value, "a number in (0, 1)")
    if not 0.0 < v < 1.0:
        raise ModelError(name, "a number in (0, 1)", value)
    return v


def vector(name: str, values: Sequence[float] | np.ndarray, *, minimum_length: int = 1) -> np.ndarray:
    """A 1-D float array of finite values with at least ``minimum_length`` entries."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(name, "a sequence of numbers", values) from None
    if arr.ndim != 1 or arr.size < minimum_length:
        raise ModelError(name, f"a 1-D sequence of at least {minimum_length} numbers", values)
    if not np.all(np.isfinite(arr)):
        raise ModelError(name, "finite numbers (no NaN or inf)", values)
    return arr


def _finite(name: str, value: float, allowed: str) -> float:
    if isinstance(value, bool):
        raise ModelError(name, allowed, value)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ModelError(name, allowed, value) from None
    if not math.isfinite(v):
        raise ModelError(name, allowed, value)
    return v
