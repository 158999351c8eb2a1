"""archlab: a performance lab for server architectures.

The control plane of archlab: experiment specs, orchestration of real processes, the result
store, statistics, models and reports. The data plane (servers, load generator) lives in the
Rust workspace and is reached through the ``archlab-engine`` binary and the ``archlab._native``
extension module.
"""

from archlab.errors import ArchlabError

__all__ = ["ArchlabError", "__version__"]

try:
    from importlib.metadata import version as _version

    __version__ = _version("archlab")
except Exception:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"
