"""colopred: predict how much deep-learning training jobs slow each other down when they share one GPU.

Example::

    from colopred import JobProfile, Predictor

    a, b = JobProfile.from_json("a.json"), JobProfile.from_json("b.json")   # each job profiled once, alone
    p = Predictor.default("mps").predict([a, b])    # or "timeslice"; GPM profiles: Predictor.default(mode, "nvml")
    p.slowdown, p.interval, p.delta, p.throughput, p.pays_off

What it exports: ``JobProfile`` (one job's solo profile), ``Predictor`` (``predict``, ``predict_many``,
``rank_partners``, ``pack``, ``observe``), ``Prediction`` (its result), ``Observation`` (a measured collocation),
``Gpu`` (a GPU to ``pack`` onto), ``SlowdownModel`` (the scikit-learn estimator inside, to retrain), ``load_profiles``, and the errors ``ColopredError``
and ``InputError``. The package has three parts: :mod:`colopred.runtime`, what a scheduler imports;
:mod:`colopred.measurement`, profiling and measuring on a GPU; :mod:`colopred.research`, datasets, training,
evaluation and reports. The command line is :mod:`colopred.cli` (``colopred --help``). The source tree's README.md
and docs/ (model.md, formats.md, architecture.md) document the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ColopredError, InputError
from .gpu import GpuInfo
from .profile import JobProfile, load_profiles

__version__ = "0.3.0"

if TYPE_CHECKING:  # pragma: no cover
    from .runtime.estimator import SlowdownModel
    from .runtime.observed import Observation
    from .runtime.placement import Gpu
    from .runtime.predictor import Prediction, Predictor

_LAZY = {"Predictor": "colopred.runtime.predictor", "Prediction": "colopred.runtime.predictor",
         "SlowdownModel": "colopred.runtime.estimator", "Observation": "colopred.runtime.observed",
         "Gpu": "colopred.runtime.placement"}


def __getattr__(name: str) -> Any:
    """``Predictor``, ``Prediction``, ``Observation`` and ``SlowdownModel`` are imported on first use (they bring numpy,
    and XGBoost once a model loads; the GPU side imports ``colopred`` without needing them)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'colopred' has no attribute {name!r}")


__all__ = [
    "ColopredError",
    "Gpu",
    "GpuInfo",
    "InputError",
    "JobProfile",
    "Observation",
    "Prediction",
    "Predictor",
    "SlowdownModel",
    "__version__",
    "load_profiles",
]
