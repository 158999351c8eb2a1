"""How the tuners' independent computations are run: a :data:`Mapper` takes a function, the
items to apply it to and a name for each item, and yields the results in the items' order.
:func:`here` is a plain loop in this process (the default, and all a local run does); ``archlab
tune --cluster`` passes one made of :func:`archlab.cluster.fanout.map_in_order`, which runs each
item as a task on a Dask worker. Each item is a pure function of its data and seeds (the learned
tuner's outer folds, one per held-out program), and the results are gathered in order, so the
tuners' picks and scores are the same wherever they were computed. This module imports no Dask."""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

#: ``mapper(function, items, name)``: ``function(item)`` of every item, in the items' order;
#: ``name(item)`` says which item a failure concerns.
Mapper = Callable[[Callable[[Item], Result], Sequence[Item], Callable[[Item], str]], Iterable[Result]]


def here(function: Callable[[Item], Result], items: Sequence[Item], name: Callable[[Item], str] = str) -> Iterator[Result]:
    """``function(item)`` of every item, in a loop in this process."""
    return map(function, items)


__all__ = ["Mapper", "here"]
