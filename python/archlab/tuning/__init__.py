"""archlab.tuning: what thread-pool size a service should run with (seed 003), answered three
ways side by side. Service programs (:mod:`~archlab.tuning.programs`, parsed by the server's own
parser) give features (:mod:`~archlab.tuning.features`); sweeps give a
:class:`~archlab.tuning.dataset.Dataset`; the learned tuner (:mod:`~archlab.tuning.learned`, the
seed's models under grouped cross-validation), the model-based tuner
(:mod:`~archlab.tuning.model_based`, MVA from demands measured once) and the online controller
(:mod:`~archlab.tuning.controller`, hill climbing on throughput) each pick a size, and
:meth:`Dataset.regret <archlab.tuning.dataset.Dataset.regret>` says how far each is from the
measured best. :mod:`~archlab.tuning.plant` is a simulated pool server to test them on."""

from archlab.tuning.controller import HillClimber
from archlab.tuning.dataset import Dataset, Objective, SweepRow
from archlab.tuning.features import Demands, Features, StepCosts, extract
from archlab.tuning.learned import CVReport, LearnedTuner, ModelKind, Task, cross_validate, grouped_folds
from archlab.tuning.model_based import ModelBasedTuner
from archlab.tuning.programs import Program, Step, StepKind, load_programs, parse_programs

__all__ = [
    "CVReport",
    "Dataset",
    "Demands",
    "Features",
    "HillClimber",
    "LearnedTuner",
    "ModelBasedTuner",
    "ModelKind",
    "Objective",
    "Program",
    "Step",
    "StepCosts",
    "StepKind",
    "SweepRow",
    "Task",
    "cross_validate",
    "extract",
    "grouped_folds",
    "load_programs",
    "parse_programs",
]
