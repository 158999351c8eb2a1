"""The learned pool-size tuner of seed 003 (§3.2.4-3.2.5, Chapter 5): a model maps a program's
features to its best pool size, learned from sweeps. The seed's four models (decision tree,
random forest, SVM, XGBoost), as regression (scored by MAPE and MSE) or as classification over
the few sizes that occur (F1 and accuracy), in scikit-learn style: construct, :meth:`fit`,
learned attributes ending in ``_``, :meth:`predict`.

Things the seed does not do, because a pool size learned from programs is only useful on
programs it has not seen: hyper-parameters (and, with ``model="auto"``, the model itself) are
chosen by cross-validation grouped by program (``GroupKFold``: the repetitions of one program are
never split between training and validation, which would let a model memorise the program),
scored by the figure a user cares about -- the mean regret of the validation programs, latency
at the predicted size over latency at their measured best -- rather than by the size's squared
error (a wrong size on a flat curve costs nothing, on a steep one a lot); regression learns
log2 of the size, since sizes are swept in octaves and a miss by one octave costs about the
same whether it is 2 for 4 or 16 for 32; and :func:`cross_validate` nests all of it inside an
outer grouped split, so a held-out program is never seen by the search that tunes the model
which predicts it."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

from archlab.errors import InvalidValue
from archlab.tuning.dataset import Dataset, Objective
from archlab.tuning.fanout import Mapper, here
from archlab.tuning.features import Features


class ModelKind(enum.Enum):
    DECISION_TREE = "decision-tree"
    RANDOM_FOREST = "random-forest"
    SVM = "svm"
    XGBOOST = "xgboost"


#: ``model="auto"``: the model kind is one more hyper-parameter of the grouped search.
AUTO = "auto"


class Task(enum.Enum):
    REGRESSION = "regression"
    CLASSIFICATION = "classification"


def _estimator(kind: ModelKind, task: Task, random_state: int):
    """The untrained estimator and its hyper-parameter grid."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, SVR
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    reg = task is Task.REGRESSION
    if kind is ModelKind.DECISION_TREE:
        cls = DecisionTreeRegressor if reg else DecisionTreeClassifier
        return cls(random_state=random_state), {"max_depth": [2, 3, 4, 6, None], "min_samples_leaf": [1, 2, 4]}
    if kind is ModelKind.RANDOM_FOREST:
        cls = RandomForestRegressor if reg else RandomForestClassifier
        return cls(n_estimators=100, random_state=random_state), {"max_depth": [3, 6, None]}
    if kind is ModelKind.SVM:
        # Features differ in scale by orders of magnitude (counts vs seconds): standardise first.
        est = make_pipeline(StandardScaler(), SVR() if reg else SVC())
        # A linear kernel beside the RBF: with few programs and several uninformative features,
        # the RBF's distances are dominated by the noise dimensions.
        name = "svr" if reg else "svc"
        return est, {f"{name}__C": [1.0, 10.0, 100.0], f"{name}__kernel": ["rbf", "linear"]}
    from xgboost import XGBRegressor

    cls = XGBRegressor if reg else _XGBClasses
    est = cls(n_estimators=100, random_state=random_state, n_jobs=1, verbosity=0)
    return est, {"max_depth": [2, 4], "learning_rate": [0.1, 0.3]}


def _xgb_classes():
    """XGBClassifier insists on labels 0..k-1 in every fit, which a grouped fold that lacks one
    size breaks; this subclass encodes the labels of each fit and decodes its predictions."""
    from xgboost import XGBClassifier

    class XGBClasses(XGBClassifier):
        def fit(self, x, y, **kwargs):
            self.labels_, codes = np.unique(y, return_inverse=True)
            return super().fit(x, codes, **kwargs)

        def predict(self, x, **kwargs):
            return self.labels_[np.asarray(super().predict(x, **kwargs), dtype=int)]

    return XGBClasses


def _XGBClasses(**params):  # noqa: N802 - a class factory, called like a class
    return _xgb_classes()(**params)


def grouped_folds(groups: list[str], n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index arrays of ``GroupKFold``: every group (program) in exactly one test
    fold and never on both sides of a split. ``n_splits`` is capped by the number of groups."""
    from sklearn.model_selection import GroupKFold

    n_groups = len(set(groups))
    if n_groups < 2:
        raise InvalidValue("programs", "at least 2 programs to cross-validate", n_groups)
    k = min(n_splits, n_groups)
    idx = np.zeros(len(groups))
    return [(tr, te) for tr, te in GroupKFold(n_splits=k).split(idx, groups=groups)]


class LearnedTuner:
    """A model of the best pool size from program features.

    ``model``: a :class:`ModelKind`, its name, or ``"auto"`` (every kind competes in the
    search); ``task``: regression or classification; ``seed_features_only``: use the seed's six
    features (else archlab's as well); ``n_splits``: folds of the grouped cross-validation that
    picks the hyper-parameters by the validation programs' mean regret.
    """

    def __init__(self, model: ModelKind | str = ModelKind.DECISION_TREE, task: Task | str = Task.REGRESSION,
                 *, seed_features_only: bool = False, n_splits: int = 5, random_state: int = 0):
        self.model = AUTO if model == AUTO else _enum(ModelKind, "model", model)
        self.task = _enum(Task, "task", task)
        self.seed_features_only = seed_features_only
        self.n_splits = n_splits
        self.random_state = random_state

    def fit(self, dataset: Dataset, objective: Objective = Objective.MEAN_LATENCY) -> LearnedTuner:
        from sklearn.base import clone
        from sklearn.model_selection import ParameterGrid

        groups, _, y = dataset.labels(objective)
        x = np.array([dataset.features[g].vector(self.seed_features_only) for g in groups])
        self.sizes_ = np.array(sorted(set(int(v) for v in y)))
        if len(self.sizes_) == 1 and self.task is Task.CLASSIFICATION:
            raise InvalidValue("dataset", "at least 2 distinct best sizes to classify", self.sizes_.tolist())
        target = np.log2(y) if self.task is Task.REGRESSION else np.searchsorted(self.sizes_, y)
        kinds = list(ModelKind) if not isinstance(self.model, ModelKind) else [self.model]
        folds = grouped_folds(groups, self.n_splits)
        best_score = math.inf
        chosen = None
        for kind in kinds:
            estimator, grid = _estimator(kind, self.task, self.random_state)
            for params in ParameterGrid(grid):
                regrets: list[float] = []
                for tr, te in folds:
                    fitted = clone(estimator).set_params(**params).fit(x[tr], target[tr])
                    picks = self._sizes(fitted.predict(x[te]))
                    regrets.extend(dataset.regret(groups[i], int(m), objective) for i, m in zip(te, picks))
                score = float(np.mean(regrets))
                # Ties keep the first candidate: the grids list the simplest models first.
                if chosen is None or score < best_score:
                    best_score = score
                    self.model_kind_, self.best_params_, chosen = kind, dict(params), clone(estimator).set_params(**params)
        assert chosen is not None  # every grid has at least one point, and regrets are finite
        self.cv_regret_ = best_score
        self.estimator_ = chosen.fit(x, target)
        return self

    def _raw(self, out: np.ndarray) -> np.ndarray:
        if self.task is Task.CLASSIFICATION:
            return self.sizes_[np.asarray(out, dtype=int)]
        # The models regress log2 of the size; an extrapolating model (an SVM far from its
        # support) can predict thousands of octaves, which exp2 would overflow to inf, and inf
        # is equally far from every size. Clipped, it stays finite and maps to the nearest end.
        return np.exp2(np.clip(np.asarray(out, dtype=float), -60.0, 60.0))

    def _sizes(self, out: np.ndarray) -> np.ndarray:
        """An estimator's output as sizes seen in training (regression: nearest in octaves)."""
        raw = self._raw(out)
        logs = np.log2(self.sizes_)
        return np.array([self.sizes_[np.argmin(np.abs(logs - np.log2(max(v, 1e-9))))] for v in raw])

    def predict_raw(self, features: list[Features]) -> np.ndarray:
        """The model's output: a real size (regression) or a swept size (classification)."""
        x = np.array([f.vector(self.seed_features_only) for f in features])
        return self._raw(self.estimator_.predict(x))

    def predict(self, features: list[Features]) -> np.ndarray:
        """Pool sizes: the regression output snapped to the nearest size seen in training (in
        octaves: the log2 distance)."""
        x = np.array([f.vector(self.seed_features_only) for f in features])
        return self._sizes(self.estimator_.predict(x))


@dataclass(frozen=True)
class Fold:
    train_programs: tuple[str, ...]
    test_programs: tuple[str, ...]


@dataclass(frozen=True)
class CVReport:
    """Held-out scores of one model: the seed's metrics and the regret per held-out program."""

    model: ModelKind | str  # or AUTO
    task: Task
    folds: tuple[Fold, ...]
    mape: float  # regression: mean |predicted - best| / best, in percent
    mse: float  # regression: mean (predicted - best)^2, sizes^2
    accuracy: float  # fraction of held-out programs whose size is exactly the best
    f1_macro: float
    regret: dict[str, float]  # program -> latency at the predicted size / at the best - 1
    default_regret: dict[str, float]  # the same at the default size
    picks: dict[str, int] = field(default_factory=dict)  # program -> the size predicted for it

    @property
    def median_regret(self) -> float:
        return float(np.median(list(self.regret.values())))

    @property
    def median_default_regret(self) -> float:
        return float(np.median(list(self.default_regret.values())))


def cross_validate(dataset: Dataset, model: ModelKind | str = ModelKind.DECISION_TREE,
                   task: Task | str = Task.REGRESSION, *, default_size: int, n_splits: int = 5,
                   objective: Objective = Objective.MEAN_LATENCY, seed_features_only: bool = False,
                   random_state: int = 0, inner_splits: int | None = None, mapper: Mapper = here) -> CVReport:
    """Nested, grouped cross-validation: each of ``n_splits`` outer folds holds some programs
    out (``n_splits`` = the number of programs: leave one program out), a tuner is fitted on the
    others with its own grouped search of ``inner_splits`` folds (default ``n_splits``) over
    them alone, and the held-out programs are scored against their measured best size and the
    ``default_size``. The outer folds are independent: ``mapper`` runs them (a loop here, or one
    task per fold on a cluster's workers) and they are gathered in order, so the report is the
    same either way."""
    from sklearn.metrics import accuracy_score, f1_score

    programs = dataset.programs
    best = {p: dataset.best_size(p, objective) for p in programs}
    folds: list[Fold] = []
    truth: list[int] = []
    raw: list[float] = []
    snapped: list[int] = []
    regret: dict[str, float] = {}
    default_regret: dict[str, float] = {}
    picks: dict[str, int] = {}
    jobs = []
    for tr, te in grouped_folds(programs, n_splits):
        train = [programs[i] for i in tr]
        test = [programs[i] for i in te]
        folds.append(Fold(tuple(train), tuple(test)))
        jobs.append(_OuterFold(
            fold=folds[-1], training=_subset(dataset, train), held_out=tuple(dataset.features[p] for p in test),
            model=model, task=task, seed_features_only=seed_features_only, n_splits=inner_splits or n_splits,
            random_state=random_state, objective=objective,
        ))  # fmt: skip
    for job, (fold_raw, sizes) in zip(jobs, mapper(_fit_outer_fold, jobs, _fold_name)):
        raw.extend(fold_raw)
        snapped.extend(sizes)
        for p, m in zip(job.fold.test_programs, sizes):
            truth.append(best[p])
            picks[p] = int(m)
            regret[p] = dataset.regret(p, int(m), objective)
            default_regret[p] = dataset.regret(p, default_size, objective)
    t, r, s = (np.asarray(v, dtype=np.float64) for v in (truth, raw, snapped))
    return CVReport(
        model=AUTO if model == AUTO else _enum(ModelKind, "model", model),
        task=_enum(Task, "task", task),
        folds=tuple(folds),
        mape=float(np.mean(np.abs(r - t) / t) * 100),
        mse=float(np.mean((r - t) ** 2)),
        accuracy=float(accuracy_score(t, s)),
        f1_macro=float(f1_score(t, s, average="macro", zero_division=0)),
        regret=regret,
        default_regret=default_regret,
        picks=picks,
    )


@dataclass(frozen=True)
class _OuterFold:
    """One outer fold of :func:`cross_validate`, self-contained so that it can be computed in
    another process: the training programs' rows and features, and the held-out programs'
    features."""

    fold: Fold
    training: Dataset
    held_out: tuple[Features, ...]
    model: ModelKind | str
    task: Task | str
    seed_features_only: bool
    n_splits: int
    random_state: int
    objective: Objective


def _fit_outer_fold(job: _OuterFold) -> tuple[np.ndarray, np.ndarray]:
    """A tuner fitted (its grouped search included) on the fold's training programs alone: its
    raw outputs and its sizes for the held-out programs."""
    tuner = LearnedTuner(job.model, job.task, seed_features_only=job.seed_features_only, n_splits=job.n_splits,
                         random_state=job.random_state)
    tuner.fit(job.training, job.objective)
    feats = list(job.held_out)
    return tuner.predict_raw(feats), tuner.predict(feats)


def _fold_name(job: _OuterFold) -> str:
    return "learned tuner, outer fold holding out " + ", ".join(job.fold.test_programs)


def _subset(dataset: Dataset, programs: list[str]) -> Dataset:
    keep = set(programs)
    return Dataset((r for r in dataset.rows if r.program in keep), {p: dataset.features[p] for p in keep})


def _enum(cls, name: str, value):
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        extra = f", or {AUTO} (chosen by the grouped search)" if cls is ModelKind else ""
        raise InvalidValue(name, "one of " + ", ".join(m.value for m in cls) + extra, value) from None
