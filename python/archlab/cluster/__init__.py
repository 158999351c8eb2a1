"""archlab on a Dask distributed cluster: load shards on tagged load workers merged exactly
(:class:`ShardedLoad`, the runner's load executor), simulation sweeps fanned out over workers
(:func:`simulate_cells`), and the cluster itself (:func:`open_cluster`). Imported only when a
cluster is asked for, so a local run never loads Dask."""

from archlab.cluster.clock import ClockOffset, check_offsets, measure_offsets
from archlab.cluster.connect import LOAD_RESOURCE, Cluster, ClusterAddress, ClusterError, open_cluster
from archlab.cluster.sharded import ClusterFault, ShardedLoad
from archlab.cluster.simulate import simulate_cells

__all__ = [
    "LOAD_RESOURCE", "ClockOffset", "Cluster", "ClusterAddress", "ClusterError", "ClusterFault", "ShardedLoad",
    "check_offsets", "measure_offsets", "open_cluster", "simulate_cells",
]  # fmt: skip
