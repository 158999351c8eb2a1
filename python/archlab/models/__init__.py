"""archlab.models: analytic performance models to set beside measured runs.

Scalability laws (USL, Amdahl, Gustafson), single-station queueing formulas (M/M/1, M/M/m,
M/M/m/B, M/M/inf, machine repairman), closed queueing networks (exact and approximate MVA,
bounds, operational laws), 2^k r factorial designs, bottleneck reading and predicted-vs-measured
comparisons. Formulas are pure functions returning typed results; fitted models follow the
estimator style (construct, ``fit``, learned attributes ending in ``_``, ``predict``).
"""

from archlab.models.amva import linearizer_mva, schweitzer_mva
from archlab.models.bottleneck import BottleneckReading, read_time_decomposition, read_utilisations
from archlab.models.bounds import Bounds, asymptotic_bounds, balanced_job_bounds
from archlab.models.compare import Comparison, compare, comparison_table
from archlab.models.convolution import convolution
from archlab.models.errors import ModelError, UnidentifiableError, UnstableError
from archlab.models.factorial import Effect, FactorialDesign, ResidualChecks, design_from_records, sign_table
from archlab.models.fromrun import (
    GroupFit,
    LevelComparison,
    RowLawCheck,
    RunDesign,
    check_run_laws,
    design_from_run,
    fit_group,
    fit_run,
    scalability_points,
)
from archlab.models.mva import MVACurve, exact_mva, exact_mva_curve
from archlab.models.network import Centre, CentreKind, ClosedNetwork, NetworkSolution
from archlab.models.oplaws import (
    LawCheck,
    check_interactive_law,
    check_utilisation_law,
    forced_flow_law,
    general_response_time,
    interactive_response_time,
    littles_law,
    utilisation_law,
)
from archlab.models.queueing import erlang_b, erlang_c, machine_repairman, mm1, mminf, mmm, mmmb
from archlab.models.opennet import mixed_network, open_network
from archlab.models.report import report_section
from archlab.models.station import MetricsTable, StationMetrics, metrics_table
from archlab.models.usl import (
    USL,
    Amdahl,
    Prediction,
    ScalabilityComparison,
    amdahl_speedup,
    compare_scalability,
    gustafson_speedup,
    usl_throughput,
)

__all__ = [
    "GroupFit",
    "LevelComparison",
    "RowLawCheck",
    "RunDesign",
    "check_run_laws",
    "design_from_run",
    "fit_group",
    "fit_run",
    "report_section",
    "mixed_network",
    "open_network",
    "scalability_points",
    "BottleneckReading",
    "Comparison",
    "compare",
    "comparison_table",
    "read_time_decomposition",
    "read_utilisations",
    "Effect",
    "FactorialDesign",
    "ResidualChecks",
    "design_from_records",
    "sign_table",
    "USL",
    "ScalabilityComparison",
    "compare_scalability",
    "Amdahl",
    "Prediction",
    "amdahl_speedup",
    "gustafson_speedup",
    "usl_throughput",
    "Bounds",
    "Centre",
    "CentreKind",
    "ClosedNetwork",
    "LawCheck",
    "MVACurve",
    "NetworkSolution",
    "asymptotic_bounds",
    "balanced_job_bounds",
    "check_interactive_law",
    "check_utilisation_law",
    "convolution",
    "exact_mva",
    "exact_mva_curve",
    "forced_flow_law",
    "general_response_time",
    "interactive_response_time",
    "littles_law",
    "linearizer_mva",
    "schweitzer_mva",
    "utilisation_law",
    "MetricsTable",
    "ModelError",
    "StationMetrics",
    "UnidentifiableError",
    "UnstableError",
    "erlang_b",
    "erlang_c",
    "machine_repairman",
    "metrics_table",
    "mm1",
    "mminf",
    "mmm",
    "mmmb",
]
