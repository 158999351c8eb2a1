"""Errors of :mod:`archlab.models`: every refusal of a model names the parameter, the values it
allows and the value it received, so a caller can fix the input without reading the code.
:class:`UnstableError` marks the one refusal users meet most (an open queue driven at or above
its capacity has no steady state), :class:`UnidentifiableError` a fit the data cannot support."""

from __future__ import annotations

from archlab.errors import InvalidValue


class ModelError(InvalidValue):
    """A model's input is outside its domain.

    The message names the parameter, the allowed values and the value received.
    """


class UnstableError(ModelError):
    """An open queue's utilisation is >= 1: no steady state exists, so no metric does."""


class UnidentifiableError(ModelError):
    """The data cannot identify the model's parameters (too few points, a flat Jacobian...)."""
