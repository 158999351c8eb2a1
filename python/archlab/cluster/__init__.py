"""archlab on a Dask distributed cluster: load shards on tagged load workers merged exactly
(:class:`ShardedLoad`, the runner's load executor), simulation sweeps fanned out over workers
(:func:`simulate_cells`), and the cluster itself (:func:`open_cluster`). Imported only when a
cluster is asked for, so a local run never loads Dask."""

from archlab.errors import ArchlabError

try:
    import distributed  # noqa: F401  (only to learn whether Dask is there)
except ImportError as e:
    # A one-line answer instead of a traceback from deep inside the first module that needs it.
    raise ArchlabError(
        f"--cluster needs Dask distributed, which is not installed ({e}): install the package's `cluster` extra "
        "(pip install 'archlab[cluster]'; `make setup` installs it)"
    ) from None

from archlab.cluster.clock import ClockOffset, check_offsets, measure_offsets  # noqa: E402
from archlab.cluster.connect import LOAD_RESOURCE, Cluster, ClusterAddress, ClusterError, open_cluster  # noqa: E402
from archlab.cluster.sharded import ClusterFault, ShardedLoad  # noqa: E402
from archlab.cluster.simulate import simulate_cells  # noqa: E402

__all__ = [
    "LOAD_RESOURCE", "ClockOffset", "Cluster", "ClusterAddress", "ClusterError", "ClusterFault", "ShardedLoad",
    "check_offsets", "measure_offsets", "open_cluster", "simulate_cells",
]  # fmt: skip
