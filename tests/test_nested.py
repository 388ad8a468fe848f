"""Nested cross-validation of the interval's calibration (research.nested)."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from colopred.measurement.zoo.registry import ARCH_FAMILY
from research import nested
from research.interval_rules import size_exponent, slowdown_scale
from colopred.research.protocol import is_locked

from .conftest import shipped_dataset

ARCHS = ["alexnet", "convnext_tiny", "dlrm", "dqn", "gin", "googlenet", "gpt2_small", "graphsage", "lstm_lm", "nerf",
         "pixelcnn", "pointnet", "ppo_impala", "r3d_18", "regnetx_400mf", "resnet18", "resnet50", "s4d_lm", "se_resnet50",
         "shufflenet_v2", "squeezenet", "tcn_lm", "transformer_seq2seq", "unet", "vae", "vgg11", "vgg16", "wide_deep",
         "mobilenet_v2"]
LOCKED = ["alexnet", "dlrm", "resnet18", "se_resnet50", "transformer_seq2seq"]


def test_outer_folds_hold_out_every_architecture_once_the_locked_split_first_and_spread_each_family():
    folds = nested.outer_folds(ARCHS, LOCKED)
    assert len(folds) == nested.OUTER_FOLDS and folds[0] == LOCKED
    flat = [a for f in folds for a in f]
    assert sorted(flat) == sorted(ARCHS)  # a partition
    sizes = [len(f) for f in folds[1:]]
    assert max(sizes) - min(sizes) <= 1
    # a family of k development architectures lands in min(k, folds − 1) different folds
    dev = [a for a in ARCHS if a not in LOCKED]
    for fam in {ARCH_FAMILY.get(a, "cnn") for a in dev}:
        members = [a for a in dev if ARCH_FAMILY.get(a, "cnn") == fam]
        holding = {k for k, f in enumerate(folds) if set(f) & set(members)}
        assert len(holding) == min(len(members), nested.OUTER_FOLDS - 1)
    assert nested.outer_folds(list(reversed(ARCHS)), LOCKED) == folds  # the deal depends on the seed, not the order
    assert nested.outer_folds(ARCHS, LOCKED, seed=1) != folds
    assert nested.outer_folds(ARCHS, ["not_an_arch", "dlrm"])[0] == ["dlrm"]
    with pytest.raises(ValueError):
        nested.outer_folds(ARCHS, LOCKED, folds=1)


def _synthetic(seed=0, n=300):
    """Development predictions of both rules' splits at each c of the slowdown-scale grid: saturating targets whose log
    error grows with p̂ (c = 1 follows it), host-bound ones whose error does not (c = 0)."""
    rng = np.random.default_rng(seed)
    out = []
    for split in slowdown_scale.SPLITS:
        for busy, sd in ((1.0, lambda p: 0.04 * p), (0.5, lambda p: 0.08 + 0 * p)):
            pred = rng.uniform(1.0, 4.0, n)
            r = rng.normal(0.0, 1.0, n) * sd(pred)
            n_jobs = {"random": 2, "pairs->triples": 3, "pairs+triples->quads": 4}[split]
            window = np.arange(n) + 10_000 * len(out)
            for c, k in slowdown_scale_widths(busy).items():
                w = k * pred ** c
                out.append(pd.DataFrame({"mode": "mps", "c": c, "split": split, "t_busy": busy, "slowdown": pred * np.exp(r),
                                         "pred": pred, "lo": pred * np.exp(-w), "hi": pred * np.exp(w), "n_jobs": n_jobs,
                                         "co_sum_busy": rng.uniform(0.5, n_jobs - 1.0, n), "window_id": window}))
    return pd.concat(out, ignore_index=True)


def slowdown_scale_widths(busy):
    """Each c's calibrated log half-width factor for the synthetic errors (90% of N(0, σ) within 1.645σ)."""
    return {-1.0: 0.33, -0.5: 0.25, 0.0: 0.165 if busy == 1.0 else 0.13, 0.5: 0.11, 1.0: 0.066 if busy == 1.0 else 0.05}


def test_choose_constants_scores_the_growth_from_each_class_at_its_chosen_slowdown_scale(monkeypatch):
    frame = _synthetic()
    seen = {}

    def fake_predictions(dev_by_mode, source, timeline, model_kw, keep, log):
        seen["model_kw"] = model_kw
        assert set(nested.NEEDED) <= set(frame.columns) and set(keep) == set(nested.NEEDED)
        return frame

    monkeypatch.setattr(slowdown_scale, "predictions", fake_predictions)
    real_coverage = size_exponent.coverage_by_exponent

    def spy_coverage(pred, *args):
        seen["scored"] = pred
        return real_coverage(pred, *args)

    monkeypatch.setattr(size_exponent, "coverage_by_exponent", spy_coverage)
    got = nested.choose_constants({"mps": pd.DataFrame()})
    # the growth the slowdown scale is chosen under: the rule's default, not the shipped a's
    assert seen["model_kw"]["interval_scale"] == "beyond_size"
    assert set(seen["model_kw"]["size_exponents"].values()) == {nested.INTERVAL_SIZE_EXPONENT}
    c_of, _ = slowdown_scale.choose(slowdown_scale.cells(frame))
    assert c_of == {"mps": {"saturating": 1.0, "host_bound": 0.0}}
    assert got["mps"]["slowdown_exponents"] == c_of["mps"]
    # the growth's rules score the extrapolating rows of each class at its own chosen c, and nothing else
    scored = seen["scored"]
    assert set(scored["split"]) == {"pairs->triples", "pairs+triples->quads"}
    assert (scored.loc[scored["t_busy"] >= 0.8, "c"] == 1.0).all() and (scored.loc[scored["t_busy"] < 0.8, "c"] == 0.0).all()
    assert len(scored) == 2 * 2 * 300  # two splits, two classes, one c each
    a_of = size_exponent.choose(real_coverage(scored))
    assert got["mps"]["interval_scale"] in size_exponent.SCALES
    assert got["mps"]["size_exponents"] == a_of[got["mps"]["interval_scale"]]["mps"]


@pytest.fixture(scope="module")
def small():
    """The time-sliced rows of the sets of eight architectures, as a dataset."""
    ds = shipped_dataset()
    keep = {"resnet18", "gpt2_small", "dqn", "vgg16", "lstm_lm", "unet", "dlrm", "pointnet"}
    df = ds.for_mode("timeslice")
    df = df[df["set_archs"].map(lambda a: set(a) <= keep)].reset_index(drop=True)
    return SimpleNamespace(for_mode=lambda mode: df if mode == "timeslice" else df.iloc[:0], profile_source="ncu",
                           timeline=True, frame=df)


@pytest.mark.data
def test_fold_predictions_test_each_fold_row_once_from_the_sets_without_its_architectures(small, monkeypatch, few_trees):
    fold = ["dqn", "unet"]
    df = small.frame
    fitted = []
    real_new_model = nested.new_model

    def spy(*args, **kw):
        m = real_new_model(*args, **kw)
        real_fit = m.fit

        def fit(X, y, **fit_kw):
            fitted.append(set(fit_kw["groups"]))
            return real_fit(X, y, **fit_kw)

        m.fit = fit
        return m

    monkeypatch.setattr(nested, "new_model", spy)
    params = real_new_model("timeslice").get_params()  # the shipped constants, given explicitly
    same = {"timeslice": {k: params[k] for k in ("slowdown_exponents", "size_exponents", "interval_scale")}}
    p = nested.fold_predictions(small, fold, same, ["timeslice", "mps"])
    assert set(p["arch"]) == set(fold) and set(p["mode"]) == {"timeslice"}
    assert not p.duplicated(["split", "training", "window_id", "job"]).any()
    own = df["arch"].isin(fold)
    groups = p.groupby(["split", "training"]).size()
    for kind, sizes in (("leave-arch", (2, 3, 4)), ("pairs->triples", (3,)), ("pairs+triples->quads", (4,))):
        want = len(df[own & df["n_jobs"].isin(sizes)])
        assert want == groups.get((kind, "split"), 0) >= groups.get((kind, "fold-out"), 0)
    assert groups[("pairs->triples", "fold-out")] > 0
    # two models (the fold's constants, the shipped ones) per fit: fold-out and the extrapolating splits one fit each,
    # the report's leave-arch one per architecture of the fold
    assert len(fitted) == 2 * (len(groups) - 1 + len(fold))
    lk = is_locked(df, fold)
    everything = set(df["arch"])
    # the groups of a model's training rows are their architectures
    assert fitted.count(set(df.loc[~lk, "arch"])) >= 2 * 2  # fold-out: no set of the fold's architectures
    for i, a in enumerate(fold):  # leave-arch first: no set of the row's own architecture, the fold's other one kept
        assert fitted[2 * i] == fitted[2 * i + 1] == set(df.loc[~is_locked(df, [a]), "arch"])
        assert a not in fitted[2 * i] and fold[1 - i] in fitted[2 * i]
    assert fitted.count(everything) == 2 * groups.index.isin([("pairs->triples", "split"), ("pairs+triples->quads", "split")]).sum()
    # an unseen job in a larger set and the report's pairs → triples predict the same rows differently
    tri = p[p["split"] == "pairs->triples"].pivot_table(index=["window_id", "job"], columns="training", values="pred").dropna()
    assert len(tri) and not np.allclose(tri["split"], tri["fold-out"])
    # the shipped constants given explicitly: the same model as the default one
    np.testing.assert_allclose(p["pred"], p["pred_shipped"])
    np.testing.assert_allclose(p[["lo", "hi"]].to_numpy(), p[["lo_shipped", "hi_shipped"]].to_numpy())
    # another slowdown scale moves the interval and not the point
    other = {"timeslice": {**same["timeslice"], "slowdown_exponents": {"saturating": 1.0, "host_bound": 1.0}}}
    q = nested.fold_predictions(small, fold, other, ["timeslice"])
    np.testing.assert_allclose(q["pred"], p["pred"])
    assert not np.allclose(q["hi"], p["hi"])
    s = nested.summary(q.assign(fold=0))
    assert set(s["split"]) == set(p["split"]) and (s["rows"].sum() == len(q))
    la = q[(q["split"] == "leave-arch") & (q["training"] == "split")]
    inside = (la["slowdown"] >= la["lo"]) & (la["slowdown"] <= la["hi"])
    row = s.set_index(["split", "training"]).loc[("leave-arch", "split")]
    assert row["coverage_pct"] == pytest.approx(100 * inside.mean())
    assert row["slowdown_mape_pct"] == pytest.approx(100 * ((la["pred"] - la["slowdown"]).abs() / la["slowdown"]).mean())
    assert row["architectures"] == 2 and row["coverage_se_pct"] >= 0


def test_coverage_se_resamples_architectures_not_rows():
    # two architectures, one always covered and one never: the rows' binomial SE would shrink with their number,
    # the architectures' does not
    few = pd.DataFrame({"arch": ["a"] * 10 + ["b"] * 10, "slowdown": 1.0, "lo": [0.9] * 10 + [1.1] * 10, "hi": 1.2})
    many = pd.concat([few] * 50, ignore_index=True)
    assert nested.coverage_se(few) == pytest.approx(nested.coverage_se(many), rel=1e-9)
    assert 30 < nested.coverage_se(few) < 40  # ~ 50·√2/2 … a draw of 2 of 2 architectures
    assert nested.coverage_se(few.assign(lo=0.9)) == 0
    assert np.isnan(nested.coverage_se(few[few["arch"] == "a"]))


def _committed_folds(source):
    from .conftest import ROOT

    folder = ROOT / "reports" / ("h100" if source == "ncu" else "h100-nvml") / "nested" / "folds"
    return pd.concat([pd.read_csv(f) for f in sorted(folder.glob("fold*.csv.gz"))], ignore_index=True)


@pytest.mark.data
@pytest.mark.parametrize("source", ["ncu", "nvml"])
def test_the_unseen_width_rule_chooses_the_shipped_factors_from_the_development_folds_alone(source):
    """constants.INTERVAL_UNSEEN_WIDTHS is what the rule chooses on the committed fold-out rows of the development
    folds (the locked fold 0 left out); each κ's coverage is the share of rows whose |log error| is within κ times
    their half-width, and a wider κ never covers less."""
    from colopred.constants import INTERVAL_UNSEEN_WIDTHS
    from research.interval_rules import target_class, unseen_width

    rows = unseen_width.unseen_rows(_committed_folds(source))
    assert set(rows["training"]) == {"fold-out"} and set(rows["split"]) == set(unseen_width.EXTRAPOLATING)
    dev = rows[rows["fold"] != unseen_width.LOCKED_FOLD]
    cov = unseen_width.coverage_by_factor(dev)
    assert unseen_width.choose(cov) == INTERVAL_UNSEEN_WIDTHS[source]
    sat = dev[(dev["mode"] == "timeslice") & (target_class(dev["t_busy"]) == "saturating")]
    err = np.abs(np.log(sat["slowdown"] / sat["pred_shipped"]))
    got = cov.set_index(["mode", "jobs", "kappa"])["coverage_pct"]
    assert got[("timeslice", "saturating", 1.5)] == pytest.approx(100 * np.mean(err <= 1.5 * np.log(sat["hi_shipped"] / sat["pred_shipped"])))
    for (_mode, _cls), g in cov.groupby(["mode", "jobs"]):
        assert np.all(np.diff(g.sort_values("kappa")["coverage_pct"].to_numpy()) >= 0)
    # changing the locked fold's rows changes nothing the rule sees
    moved = rows.assign(slowdown=np.where(rows["fold"] == unseen_width.LOCKED_FOLD, rows["slowdown"] * 3, rows["slowdown"]))
    assert unseen_width.choose(unseen_width.coverage_by_factor(moved[moved["fold"] != 0])) == INTERVAL_UNSEEN_WIDTHS[source]


def test_the_unseen_width_rule_keeps_one_unless_a_factor_is_closer_by_a_standard_error():
    from research.interval_rules import unseen_width

    rows = 400  # SE 1.5 points
    table = pd.DataFrame([{"mode": "mps", "jobs": "saturating", "kappa": k, "rows": rows, "coverage_pct": c}
                          for k, c in zip((1.0, 1.05, 1.1, 1.15), (88.0, 89.0, 91.0, 93.0))])
    assert unseen_width.choose(table)["mps"] == {"saturating": 1.0, "host_bound": 1.0}  # 2 -> 1 point: not a whole SE
    table["coverage_pct"] = (80.0, 85.0, 89.0, 91.0)
    assert unseen_width.choose(table)["mps"]["saturating"] == 1.1  # 89 and 91 tie: the smaller


@pytest.mark.data
def test_nested_unseen_widths_choose_each_folds_factor_without_its_rows_and_widen_only_unseen_jobs_in_larger_sets():
    from colopred.constants import INTERVAL_UNSEEN_WIDTHS
    from research.interval_rules import target_class, unseen_width

    pred = _committed_folds("ncu")
    rows = unseen_width.unseen_rows(pred)
    _, kappa_of = unseen_width.nested_covered(rows)
    assert set(kappa_of) == set(range(nested.OUTER_FOLDS))
    for k in (0, 3):  # a fold's own rows never choose its κ (nor do the locked fold's)
        moved = rows.assign(slowdown=np.where(rows["fold"].isin([k, 0]), rows["slowdown"] * 3, rows["slowdown"]))
        assert unseen_width.nested_covered(moved)[1][k] == kappa_of[k]
    out, kappa_again = nested.with_unseen_widths(pred, "ncu")
    assert kappa_again == kappa_of
    widened = ((pred["training"] == "fold-out") & pred["split"].isin(unseen_width.EXTRAPOLATING)).to_numpy()
    for col in ("lo", "hi", "lo_shipped", "hi_shipped", "pred", "pred_shipped", "slowdown"):
        np.testing.assert_array_equal(out.loc[~widened, col], pred.loc[~widened, col])
    w = pred[widened]
    cls = target_class(w["t_busy"])
    shipped = np.array([INTERVAL_UNSEEN_WIDTHS["ncu"][m][c] for m, c in zip(w["mode"], cls)])
    np.testing.assert_allclose(np.log(out.loc[widened, "hi_shipped"] / w["pred_shipped"]),
                               shipped * np.log(w["hi_shipped"] / w["pred_shipped"]), rtol=1e-9)
    own = np.array([kappa_of[f][m][c] for f, m, c in zip(w["fold"], w["mode"], cls)])
    np.testing.assert_allclose(np.log(w["pred"] / out.loc[widened, "lo"]), own * np.log(w["pred"] / w["lo"]), rtol=1e-9)
    assert (own > 1).any() and (out.loc[widened, "hi"] >= w["hi"]).all()
