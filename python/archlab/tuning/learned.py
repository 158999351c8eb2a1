"""The learned pool-size tuner of seed 003 (§3.2.4-3.2.5, Chapter 5): a model maps a program's
features to its best pool size, learned from sweeps. The seed's four models (decision tree,
random forest, SVM, XGBoost), as regression (scored by MAPE and MSE) or as classification over
the few sizes that occur (F1 and accuracy), in scikit-learn style: construct, :meth:`fit`,
learned attributes ending in ``_``, :meth:`predict`.

Two things the seed does not do, because a pool size learned from programs is only useful on
programs it has not seen: hyper-parameters are chosen by cross-validation grouped by program
(``GroupKFold``: the repetitions of one program are never split between training and
validation, which would let a model memorise the program), and :func:`cross_validate` scores
each held-out program by the figure a user cares about -- its regret, latency at the predicted
size over latency at its measured best, beside the regret of the runtime's default size."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from archlab.errors import InvalidValue
from archlab.tuning.dataset import Dataset, Objective
from archlab.tuning.features import Features


class ModelKind(enum.Enum):
    DECISION_TREE = "decision-tree"
    RANDOM_FOREST = "random-forest"
    SVM = "svm"
    XGBOOST = "xgboost"


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
        return est, {"svr__C" if reg else "svc__C": [1.0, 10.0, 100.0]}
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

    ``model``: a :class:`ModelKind` or its name; ``task``: regression or classification;
    ``seed_features_only``: use the seed's six features (else archlab's as well);
    ``n_splits``: folds of the grouped cross-validation that picks the hyper-parameters.
    """

    def __init__(self, model: ModelKind | str = ModelKind.DECISION_TREE, task: Task | str = Task.REGRESSION,
                 *, seed_features_only: bool = False, n_splits: int = 5, random_state: int = 0):
        self.model = _enum(ModelKind, "model", model)
        self.task = _enum(Task, "task", task)
        self.seed_features_only = seed_features_only
        self.n_splits = n_splits
        self.random_state = random_state

    def fit(self, dataset: Dataset, objective: Objective = Objective.MEAN_LATENCY) -> LearnedTuner:
        from sklearn.model_selection import GridSearchCV

        groups, _, y = dataset.labels(objective)
        x = np.array([dataset.features[g].vector(self.seed_features_only) for g in groups])
        self.sizes_ = np.array(sorted(set(int(v) for v in y)))
        estimator, grid = _estimator(self.model, self.task, self.random_state)
        target = y if self.task is Task.REGRESSION else np.searchsorted(self.sizes_, y)
        if len(self.sizes_) == 1 and self.task is Task.CLASSIFICATION:
            raise InvalidValue("dataset", "at least 2 distinct best sizes to classify", self.sizes_.tolist())
        scoring = "neg_mean_squared_error" if self.task is Task.REGRESSION else "accuracy"
        search = GridSearchCV(estimator, grid, cv=grouped_folds(groups, self.n_splits), scoring=scoring)
        search.fit(x, target)
        self.estimator_ = search.best_estimator_
        self.best_params_ = search.best_params_
        self.cv_score_ = float(search.best_score_)
        return self

    def predict_raw(self, features: list[Features]) -> np.ndarray:
        """The model's output: a real size (regression) or a swept size (classification)."""
        x = np.array([f.vector(self.seed_features_only) for f in features])
        out = self.estimator_.predict(x)
        if self.task is Task.CLASSIFICATION:
            return self.sizes_[np.asarray(out, dtype=int)]
        return np.asarray(out, dtype=float)

    def predict(self, features: list[Features]) -> np.ndarray:
        """Pool sizes: the regression output snapped to the nearest size seen in training."""
        raw = self.predict_raw(features)
        return np.array([self.sizes_[np.argmin(np.abs(self.sizes_ - v))] for v in raw])


@dataclass(frozen=True)
class Fold:
    train_programs: tuple[str, ...]
    test_programs: tuple[str, ...]


@dataclass(frozen=True)
class CVReport:
    """Held-out scores of one model: the seed's metrics and the regret per held-out program."""

    model: ModelKind
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
                   random_state: int = 0) -> CVReport:
    """Nested, grouped cross-validation: each outer fold holds some programs out, a tuner is
    fitted (with its own grouped inner search) on the others, and the held-out programs are
    scored against their measured best size and the ``default_size``."""
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
    for tr, te in grouped_folds(programs, n_splits):
        train = [programs[i] for i in tr]
        test = [programs[i] for i in te]
        folds.append(Fold(tuple(train), tuple(test)))
        tuner = LearnedTuner(model, task, seed_features_only=seed_features_only,
                             n_splits=n_splits, random_state=random_state)
        tuner.fit(_subset(dataset, train), objective)
        feats = [dataset.features[p] for p in test]
        raw.extend(tuner.predict_raw(feats))
        sizes = tuner.predict(feats)
        snapped.extend(sizes)
        for p, m in zip(test, sizes):
            truth.append(best[p])
            picks[p] = int(m)
            regret[p] = dataset.regret(p, int(m), objective)
            default_regret[p] = dataset.regret(p, default_size, objective)
    t, r, s = (np.asarray(v, dtype=np.float64) for v in (truth, raw, snapped))
    return CVReport(
        model=_enum(ModelKind, "model", model),
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


def _subset(dataset: Dataset, programs: list[str]) -> Dataset:
    keep = set(programs)
    return Dataset((r for r in dataset.rows if r.program in keep), {p: dataset.features[p] for p in keep})


def _enum(cls, name: str, value):
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        raise InvalidValue(name, "one of " + ", ".join(m.value for m in cls), value) from None
