"""The methods colopred is compared with in the evaluation (``colopred evaluate``).

Fixed baselines map the feature frame of a test split to predicted slowdowns; fitted ones follow
scikit-learn's ``fit``/``predict`` on FEATURES rows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from ..runtime.baseline import baseline_slowdown, baseline_terms, fit_coefs


def no_interference(df: pd.DataFrame) -> np.ndarray:
    return np.ones(len(df))


def pure_timeslice(df: pd.DataFrame) -> np.ndarray:
    """Every job gets 1/n of the GPU: s = n."""
    return df["n_jobs"].to_numpy(float)


def busy_analytic(df: pd.DataFrame) -> np.ndarray:
    """GPU work of the set serialised: s = max(1, Σ busy fraction)."""
    return np.maximum(1.0, df["t_busy"].to_numpy() + df["co_sum_busy"].to_numpy())


def tabrizian_heuristic(df: pd.DataFrame) -> np.ndarray:
    """Memory-bandwidth contention (Tabrizian §4.2.4): s = max(1, Σ M_k / 100)."""
    return np.maximum(1.0, (df["t_dram_util"].to_numpy() + df["co_sum_dram_util"].to_numpy()) / 100.0)


class LinearBaseline:
    """Ridge regression of log slowdown on the standardised features; missing values (SM fill of
    profiles without it) take the training mean; a feature missing everywhere becomes a constant 0."""

    def fit(self, X, s):
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        self.m = make_pipeline(SimpleImputer(keep_empty_features=True), StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))).fit(X, np.log(s))
        return self

    def predict(self, X):
        return np.exp(self.m.predict(X))


class ContentionBaseline:
    """The model's own baseline alone: s = 1 + α · L + β_full · W · φ + β_small · W · (1 − φ)
    (``features.baseline_terms``), coefficients fitted by non-negative least squares (no trees);
    L of the mode's kind (``features.load_kind``)."""

    def __init__(self, load: str = "symmetric"):
        self.load = load

    def fit(self, X, s):
        self.coefs = fit_coefs(baseline_terms(X, self.load), np.asarray(s, float))
        return self

    def predict(self, X):
        return baseline_slowdown(self.coefs, baseline_terms(X, self.load))


FIXED_BASELINES: dict[str, Callable[[pd.DataFrame], np.ndarray]] = {
    "no interference": no_interference,
    "time-slicing (s=n)": pure_timeslice,
    "busy-fraction analytic": busy_analytic,
    "Tabrizian M heuristic": tabrizian_heuristic,
}
