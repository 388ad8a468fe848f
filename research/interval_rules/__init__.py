"""The rules that choose the interval's constants on development rows, one module per rule: ``slowdown_scale`` (the
per-row scale p̂^c, ``constants.INTERVAL_SLOWDOWN_EXPONENTS``) and ``size_exponent`` (the growth beyond the trained
set sizes and its exponents a, ``constants.INTERVAL_SCALE_OF_SOURCE`` and ``INTERVAL_SIZE_EXPONENTS``) and
``unseen_width`` (the factor κ of an unseen job's width in a larger set, ``constants.INTERVAL_UNSEEN_WIDTHS``). The
scripts ``dev_slowdown_scale.py`` and ``dev_size_exponent.py`` run the first two on the locked split's development
architectures, and ``research.nested`` on each outer fold's complement; ``dev_unseen_width.py`` runs the third
on the nested cross-validation's development folds."""

import numpy as np

from colopred.constants import INTERVAL_COVERAGE
from colopred.runtime.estimator import INTERVAL_CLASS_NAMES, is_host_bound


def target_class(t_busy) -> np.ndarray:
    """Each row's class of target job as the interval's widths name it (``INTERVAL_CLASS_NAMES``): host_bound below
    ``constants.HOST_BOUND_BUSY`` (``estimator.is_host_bound``), else saturating."""
    return np.asarray(INTERVAL_CLASS_NAMES)[is_host_bound(t_busy).astype(int)]


def closer_by_a_standard_error(values, coverage_pct, rows: int, default: float) -> float:
    """The rules' shared choice among a grid's ``values`` (their pooled ``coverage_pct`` over ``rows`` rows): the value
    whose coverage is closest to the interval's level (ties: the smaller value) replaces ``default`` only if it is
    closer than ``default``'s by more than one binomial standard error of that coverage (100·√(p(1 − p)/rows))."""
    values, miss = np.asarray(values, float), np.abs(np.asarray(coverage_pct, float) - 100 * INTERVAL_COVERAGE)
    best = int(np.lexsort((values, miss))[0])
    se = 100 * np.sqrt(INTERVAL_COVERAGE * (1 - INTERVAL_COVERAGE) / rows)
    return float(values[best]) if miss[best] < float(miss[values == default][0]) - se else float(default)
