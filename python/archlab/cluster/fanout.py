"""Independent computations fanned out over the cluster's workers: each item becomes one task
(any worker may run it; none needs the ``load`` resource), every task is submitted at once so
the workers share the work, and the results come back in the items' order, so a caller that
prints them prints what a local loop would. A computation that is a pure function of its item
(a simulation cell with its seeds, the analysis of one file or one cell of a run) therefore
gives output identical to the local run. A worker lost while it computed an item (the task
fails with ``KilledWorker``: a cluster opened by :func:`~archlab.cluster.connect.open_cluster`
retries no task) is a :class:`~archlab.cluster.connect.ClusterError` naming the item, one line
for the user; an error of the computation itself (an ``ArchlabError`` such as a file that cannot
be read, or any other) passes through unchanged, as it would locally."""

from __future__ import annotations

from typing import Callable, Generator, Sequence, TypeVar

from archlab.cluster.connect import Cluster, ClusterError
from archlab.errors import ArchlabError

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_in_order(cluster: Cluster, function: Callable[[Item], Result], items: Sequence[Item],
                 name: Callable[[Item], str] = str) -> Generator[Result, None, None]:
    """``function(item)`` of every item on the workers, yielded in order as each is ready;
    ``name(item)`` says which item a lost worker was computing. Closing the generator early
    cancels the tasks not yet collected."""
    futures = [cluster.client.submit(function, item, pure=False) for item in items]
    try:
        for item, future in zip(items, futures):
            try:
                yield future.result()
            except ArchlabError:
                raise
            except Exception as e:
                if not _of_the_cluster(e):  # the computation's own error, raised as a local run raises it
                    raise
                raise ClusterError(
                    f"--cluster {cluster.address}: {name(item)}: {_lost(e)}; nothing was written, run it again"
                ) from None
    finally:
        for future in futures:
            future.cancel()


def _of_the_cluster(e: BaseException) -> bool:
    """Dask's own failures (``KilledWorker``, ``CommClosedError``, a cancelled future), not the
    computation's."""
    return type(e).__module__.split(".")[0] in ("distributed", "dask", "asyncio", "concurrent")


def _lost(e: BaseException) -> str:
    kind = type(e).__name__
    if kind == "KilledWorker":
        return "the worker computing it was lost"
    return f"the cluster failed under it ({kind}: {str(e).splitlines()[0] if str(e) else 'no detail'})"


__all__ = ["map_in_order"]
