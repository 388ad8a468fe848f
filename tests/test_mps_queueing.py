"""The pure functions of the load-dependent MPS wait study (research/mps_queueing_study.py), on the H100 MPS rows."""

import numpy as np
import pytest

from colopred.research.dataset import load_profiles_dir
from colopred.runtime.baseline import baseline_terms
from colopred.runtime.features import FEATURES

from .conftest import DATA, load_study, shipped_dataset

study = load_study("mps_queueing_study")


@pytest.fixture(scope="module")
def mps():
    """The measured MPS rows of a few windows of each set size (2, 3, 4), and their co-runner values."""
    rows = shipped_dataset().for_mode("mps")
    keep = [w for n in (2, 3, 4) for w in rows.loc[rows["n_jobs"] == n, "window_id"].unique()[:5]]
    df = rows[rows["window_id"].isin(keep)].reset_index(drop=True)
    return df, study.co_runner_values(df)


def test_co_runner_values_are_the_other_members_rows(mps):
    df, co = mps
    assert co.shape == (len(df), 3, len(study.CO_COLS))
    for i in (0, len(df) // 2, len(df) - 1):
        others = df[(df["window_id"] == df["window_id"][i]) & (df.index != i)]
        n = len(others)
        assert n == df["n_jobs"][i] - 1
        assert np.allclose(np.sort(co[i, :n, 0]), np.sort(others["t_busy"]))
        assert np.isnan(co[i, n:]).all()
    # their waits sum to the feature rows' co-runner sum, the column the shipped wait load reads
    assert np.allclose(np.nansum(co[..., study.CO_COLS.index("t_busy_mps_wait_us")], axis=1), df["co_sum_busy_mps_wait_us"])


def test_shipped_factors_give_the_shipped_baseline_terms(mps):
    df, co = mps
    q = study.wait_factors("shipped", co, df["t_busy"].to_numpy(), df["t_sm_fill"].to_numpy(),
                           own_launch_fill=df["t_launch_fill"].to_numpy())
    assert np.array_equal(np.isnan(q), np.isnan(co[..., 0]))
    got = study.variant_terms(df, q, co)
    assert np.allclose(got, baseline_terms(df[list(FEATURES)].to_numpy(), "mps_share"), rtol=1e-12, atol=0)


def test_queueing_factors_follow_their_formulas(mps):
    df, co = mps
    busy, fill = df["t_busy"].to_numpy(), df["t_sm_fill"].to_numpy()
    rho = np.nansum(co[..., 0] * co[..., 1] / 100, axis=1)
    first = lambda v, **kw: study.wait_factors(v, co, busy, fill, **kw)[:, 0]  # noqa: E731  (every row has a first co-runner)
    assert np.allclose(first("mg1_fill"), 1 + rho)
    assert np.allclose(first("mg1_idle"), 1 + (1 - busy) * rho)
    assert np.allclose(first("power", power=0.5), np.sqrt(1 + rho))
    pairs = (df["n_jobs"] == 2).to_numpy()
    assert np.allclose(first("stretch")[pairs], 1.0)  # no other co-runner to share the SMs with
    assert (first("stretch")[~pairs] > 1).all()
    # the idle-stream factor never exceeds the M/G/1 one and vanishes for a saturating target
    assert (first("mg1_idle") <= first("mg1_fill") + 1e-12).all()
    full = busy >= 1
    assert np.allclose(first("mg1_idle")[full], 1.0)
    with pytest.raises(ValueError):
        study.wait_factors("nonsense", co, busy, fill)


def test_mva_of_a_closed_processor_sharing_set():
    """Two jobs of demand d: each finds the other at the GPU d of the time, so R = d (1 + d) and s = 1 + d²;
    one job alone: s = 1. Demands from real profiles (busy · SM fill)."""
    prof = load_profiles_dir(DATA / "profiles" / "ncu")
    d = np.array([study.demand(np.array(min(p.busy_fraction, 1.0)), np.array(p.sm_fill_pct)) for p in
                  (prof["resnet50-b32-bf16"], prof["gpt2_small-b8-bf16"], prof["vgg16-b256-fp32"])], float)
    sigma, s = study.mva_closed(d[:1])
    assert sigma == pytest.approx([1.0]) and s == pytest.approx([1.0])
    sigma, s = study.mva_closed(np.array([d[0], d[0]]))
    assert s == pytest.approx([1 + d[0] ** 2] * 2)
    assert sigma == pytest.approx([1 + d[0]] * 2)
    # a third job slows both: a closed network's slowdowns grow with every member, and each stays below the set size
    s2 = study.mva_closed(d[:2])[1]
    s3 = study.mva_closed(d)[1]
    assert (s3[:2] > s2).all() and (s3 < 3).all() and (s3 >= 1).all()


def test_in_set_utilisation_exceeds_the_solo_busy(mps):
    df, co = mps
    util = study.in_set_utilisation(df, co)
    assert (util > df["t_busy"].clip(upper=1)).all()
