"""The ncu CSV parser and the duration-weighted metrics, on real H100 reports."""

import csv
import io

import numpy as np
import pytest

from colopred.errors import InputError
from colopred.measurement.profiling.ncu_csv import read_ncu_csv
from colopred.measurement.profiling.ncu_profile import (
    kernel_metrics,
    profile_from_ncu,
    weighted_percentiles,
)

from .conftest import FIXTURES, FULL_REPORT, MINIMAL_REPORT, SAMPLE, with_cell


def independent_M(path):
    """Tabrizian's M computed with the csv module only, as a check on the parser."""
    import gzip

    lines = gzip.open(path, "rt").read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    rows = list(csv.reader(lines[start:]))
    h = rows[0]
    it, ip, io_ = h.index("gpu__time_duration.sum"), h.index("dram__throughput.avg.pct_of_peak_sustained_elapsed"), h.index("sm__warps_active.avg.pct_of_peak_sustained_active")
    assert rows[1][it] == "ns"
    t = np.array([float(r[it].replace(",", "")) for r in rows[2:]])
    p = np.array([float(r[ip]) for r in rows[2:]])
    o = np.array([float(r[io_]) for r in rows[2:]])
    return (p * t).sum() / t.sum(), (o * t).sum() / t.sum(), len(t), t.sum()


@pytest.mark.parametrize("path", [SAMPLE, FULL_REPORT, MINIMAL_REPORT], ids=["shared-sample", "full", "minimal"])
def test_weighted_metrics_match_thesis_formula(path):
    if not path.exists():
        pytest.fail(f"fixture missing: {path}")
    M, occ, n, t_ns = independent_M(path)
    rep = read_ncu_csv(path)
    assert len(rep.kernels) == n
    p = profile_from_ncu(rep, name="x", iteration_ms=t_ns / 1e6 * 1.1)
    assert abs(p.dram_util_pct - M) < 0.1
    assert abs(p.achieved_occupancy_pct - occ) < 0.1
    assert p.kernels_per_iteration == n
    assert p.busy_fraction == pytest.approx(1 / 1.1, rel=1e-6)
    assert rep.gpu_name == "NVIDIA H100 80GB HBM3" and rep.sm_count == 132


def test_full_report_has_optional_metrics():
    rep = read_ncu_csv(FULL_REPORT)
    p = profile_from_ncu(rep, name="r18", iteration_ms=20.0)
    assert p.sm_throughput_pct is not None and 0 < p.sm_throughput_pct < 100
    assert p.theoretical_occupancy_pct is not None and p.theoretical_occupancy_pct >= p.achieved_occupancy_pct
    assert p.l2_hit_rate_pct is not None
    d = p.distributions["dram_pct"]
    assert d["p10"] <= d["p50"] <= d["p90"]
    assert sum(v for k, v in d.items() if k.startswith("hist")) == pytest.approx(1.0)


def test_thousands_separators_and_units(report_text, write):
    rep = read_ncu_csv(SAMPLE)  # first kernel's duration is printed as "137,376" ns
    assert rep.kernels["duration_ns"].iloc[0] == 137376.0
    assert rep.kernels["grid_size"].iloc[0] == 100352  # "100,352"
    # Same report with durations in microseconds: same kernel times in ns.
    lines = report_text.splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    hdr = next(csv.reader([lines[h]]))
    col = hdr.index("gpu__time_duration.sum")
    units = next(csv.reader([lines[h + 1]]))
    units[col] = "us"
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(units)
    body = []
    for r in csv.reader(lines[h + 2 :]):
        r[col] = str(float(r[col].replace(",", "")) / 1000)
        body.append(r)
    w.writerows(body)
    us = write("us.csv", "\n".join(lines[: h + 1]) + "\n" + buf.getvalue())
    a, b = read_ncu_csv(write("ns.csv", report_text)).kernels["duration_ns"], read_ncu_csv(us).kernels["duration_ns"]
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-9)


def test_kernel_names_with_commas_and_quotes(write, report_text):
    rep = read_ncu_csv(write("r.csv", report_text))
    assert rep.kernels["kernel_name"].str.contains(",").any()


def _mutate(report_text, f):
    lines = report_text.splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    return f(lines, h)


@pytest.mark.parametrize(
    "case, expect",
    [
        ("no_header", "no ncu CSV header"),
        ("missing_metric", "required metric dram__throughput.avg.pct_of_peak_sustained_elapsed is missing"),
        ("non_numeric", "is not a finite number"),
        ("nan", "is not a finite number"),
        ("empty_window", "no kernels"),
        ("truncated", "truncated"),
        ("header_only", "truncated"),
        ("bad_unit", "expected '%'"),
    ],
)
def test_malformed_reports(case, expect, report_text, write):
    def no_header(lines, h):
        return "\n".join(lines[:h] + lines[h + 2 :])

    def missing_metric(lines, h):
        return "\n".join(lines).replace("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram__something_else")

    def cell(value):
        def f(lines, h):
            return with_cell("\n".join(lines), "sm__warps_active.avg.pct_of_peak_sustained_active", value, 5)

        return f

    def empty_window(lines, h):
        return "\n".join(lines[: h + 2]) + "\n"

    def truncated(lines, h):
        text = "\n".join(lines[: h + 10])
        return text[: len(text) - len(lines[h + 9]) // 2]

    def header_only(lines, h):
        return "\n".join(lines[: h + 1])

    def bad_unit(lines, h):
        u = next(csv.reader([lines[h + 1]]))
        hdr = next(csv.reader([lines[h]]))
        u[hdr.index("dram__throughput.avg.pct_of_peak_sustained_elapsed")] = "byte/second"
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="").writerow(u)
        lines[h + 1] = buf.getvalue()
        return "\n".join(lines)

    fns = {"no_header": no_header, "missing_metric": missing_metric, "non_numeric": cell("abc"), "nan": cell("nan"),
           "empty_window": empty_window, "truncated": truncated, "header_only": header_only, "bad_unit": bad_unit}
    path = write(f"{case}.csv", _mutate(report_text, fns[case]))
    with pytest.raises(InputError) as e:
        read_ncu_csv(path)
    msg = str(e.value)
    assert expect in msg and str(path) in msg and "\n" not in msg


def test_real_failed_application_replay_output_is_a_clear_error():
    with pytest.raises(InputError, match="no ncu CSV header"):
        read_ncu_csv(FIXTURES / "ncu_app_replay_error.csv.gz")


def test_missing_metric_error_names_the_ncu_flag(report_text, write):
    p = write("m.csv", report_text.replace("gpu__time_duration.sum", "gpu__time_duration.max_renamed"))
    with pytest.raises(InputError, match=r"--metrics gpu__time_duration\.sum"):
        read_ncu_csv(p)


def test_several_processes_need_a_pick(report_text, write):
    lines = report_text.splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    pid = int(read_ncu_csv(write("one.csv", report_text)).kernels["process_id"].iloc[0])
    body = [l.replace(f'"{pid}"', '"999"', 1) if i % 2 else l for i, l in enumerate(lines[h + 2 :])]
    path = write("two.csv", "\n".join(lines[: h + 2] + body))
    pids = set(read_ncu_csv(path, process_id=999).kernels["process_id"])
    assert pids == {999}
    with pytest.raises(InputError, match="pick one with --process"):
        read_ncu_csv(path)


def test_weighted_percentiles_by_duration():
    v = np.array([10.0, 90.0])
    t = np.array([9.0, 1.0])
    q = weighted_percentiles(v, t)
    assert q["p50"] == 10.0 and q["p90"] == 10.0
    q2 = weighted_percentiles(v, np.array([1.0, 9.0]))
    assert q2["p50"] == 90.0 and q2["p10"] == 10.0


def test_iteration_time_units_sanity(report_text, write):
    rep = read_ncu_csv(write("r.csv", report_text))
    km = kernel_metrics(rep.kernels)
    with pytest.raises(InputError, match="milliseconds"):
        profile_from_ncu(rep, name="x", iteration_ms=km["kernel_ms_total"] / 1000)  # seconds by mistake


def test_bad_row_error_names_its_line_in_the_file(report_text, write):
    lines = report_text.splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    lines.insert(h + 7, '"garbage","x"')
    path = write("g.csv", "\n".join(lines) + "\n")
    with pytest.raises(InputError, match=f"malformed line {h + 8} "):
        read_ncu_csv(path)
    assert path.read_text().splitlines()[h + 7] == '"garbage","x"'


WAIT_METRICS = ("gpu__time_duration.sum", "launch__waves_per_multiprocessor", "sm__warps_active.avg.pct_of_peak_sustained_active")


def _raw_columns(path, *metrics):
    """(values of each metric as an array, units row) of a gzipped ncu report, read with csv only (not the
    parser under test)."""
    import gzip

    lines = gzip.open(path, "rt").read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    rows = list(csv.reader(lines[start:]))
    h, units = rows[0], rows[1]
    values = [np.array([float(r[h.index(m)].replace(",", "")) for r in rows[2:]]) for m in metrics]
    return values, {m: units[h.index(m)] for m in metrics}


@pytest.mark.parametrize("path", [FULL_REPORT, MINIMAL_REPORT], ids=["full", "minimal"])
def test_sm_fill_is_the_duration_weighted_share_of_sms_a_grid_fills(path):
    """sm_fill_pct = Σ tᵢ·min(1, wavesᵢ) / Σ tᵢ and launch_fill_pct = Σ min(1, wavesᵢ) / N (in %), checked against the raw CSV read with csv only."""
    (t, w), _ = _raw_columns(path, "gpu__time_duration.sum", "launch__waves_per_multiprocessor")
    expect = 100 * (t * np.minimum(1, w)).sum() / t.sum()
    p = profile_from_ncu(read_ncu_csv(path), name="x", iteration_ms=t.sum() / 1e6 * 1.1)
    assert p.sm_fill_pct == pytest.approx(expect, rel=1e-9)
    assert 0 < p.sm_fill_pct < 100 and (w < 1).any()  # some grids leave SMs free
    # per launch, unweighted: short kernels of small grids count as much as long full ones
    assert p.launch_fill_pct == pytest.approx(100 * np.minimum(1, w).mean(), rel=1e-9)
    assert 0 < p.launch_fill_pct < 100 and p.launch_fill_pct != pytest.approx(p.sm_fill_pct, abs=1)


@pytest.mark.parametrize("path", [FULL_REPORT, MINIMAL_REPORT], ids=["full", "minimal"])
def test_blocking_wait_is_the_fill_and_occupancy_weighted_residual_kernel_time(path):
    """blocking_wait_us = Σ tᵢ²·min(1, wavesᵢ)·(occᵢ/100) / (2 Σ tᵢ), in µs (durations in ns in the
    report), checked against the raw CSV read with csv only; GPM profiles have none."""
    (t, w, occ), units = _raw_columns(path, *WAIT_METRICS)
    assert units["gpu__time_duration.sum"] == "ns"
    expect_us = (t**2 * np.minimum(1, w) * occ / 100).sum() / (2 * t.sum()) / 1e3
    p = profile_from_ncu(read_ncu_csv(path), name="x", iteration_ms=t.sum() / 1e6 * 1.1)
    assert p.blocking_wait_us == pytest.approx(expect_us, rel=1e-9)
    # below half the time-weighted kernel duration: grids that leave SMs free, or run at low occupancy, hold less
    assert 0 < p.blocking_wait_us < (t**2).sum() / (2 * t.sum()) / 1e3


@pytest.mark.parametrize("path", [FULL_REPORT, MINIMAL_REPORT], ids=["full", "minimal"])
def test_mps_wait_counts_grids_of_half_a_wave_and_shortens_multi_wave_residuals(path):
    """mps_wait_us = Σ tᵢ·tᵢ^0.7·bᵢ^0.3·[wavesᵢ ≥ ½]·(occᵢ/100) / (2 Σ tᵢ) µs, bᵢ = tᵢ/⌈wavesᵢ⌉, from
    the raw CSV read with csv only. It is below blocking_wait_us for this job: kernels under half a
    wave drop out and multi-wave kernels' residuals shrink."""
    (t, w, occ), units = _raw_columns(path, *WAIT_METRICS)
    assert units["gpu__time_duration.sum"] == "ns"
    t_us = t / 1e3
    b = t_us / np.maximum(1, np.ceil(w))
    expect_us = (t_us * t_us**0.7 * b**0.3 * (w >= 0.5) * occ / 100).sum() / (2 * t_us.sum())
    p = profile_from_ncu(read_ncu_csv(path), name="x", iteration_ms=t.sum() / 1e6 * 1.1)
    assert p.mps_wait_us == pytest.approx(expect_us, rel=1e-9)
    assert (w < 0.5).any() and (w > 1).any()  # both effects occur in this report
    assert 0 < p.mps_wait_us < p.blocking_wait_us


def test_shipped_ncu_profiles_rebuild_from_their_raw_reports():
    """Every shipped ncu profile comes out of its shipped raw report unchanged with the current
    profiler (scripts/reprofile_ncu.py --check), sm_fill_pct included."""
    import subprocess
    import sys

    from .conftest import ROOT

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "reprofile_ncu.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_real_reports_put_thousands_separators_only_in_time_and_count_columns():
    """Durations and launch counts carry thousands separators in every shipped H100 report (raw csv read), their
    percentages none (ncu prints one only past 999 %, an L2 hit rate on an H200:
    test_a_percentage_past_999_carries_ncu_thousands_separator); and every shipped report reads."""
    import gzip

    from colopred.measurement.profiling.ncu_csv import (
        OPTIONAL_METRICS,
        REQUIRED_METRICS,
    )

    from .conftest import DATA

    kinds = {**REQUIRED_METRICS, **OPTIONAL_METRICS}
    files = sorted((DATA / "ncu_reports").glob("*.csv.gz")) + sorted((DATA / "profiling_cost").glob("*.csv.gz"))
    assert len(files) >= 40
    with_sep: set[str] = set()
    for f in files:
        lines = gzip.open(f, "rt").read().splitlines()
        h = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
        hdr = next(csv.reader([lines[h]]))
        cols = {m: hdr.index(m) for m in kinds if m in hdr}
        for row in csv.reader(lines[h + 2:]):
            if row and row[0].isdigit():
                with_sep |= {m for m, c in cols.items() if "," in row[c]}
        assert len(read_ncu_csv(f).kernels) > 0
    assert with_sep and all(kinds[m][1] in ("time", "count") for m in with_sep)
    assert "gpu__time_duration.sum" in with_sep


def test_a_kernel_of_duration_zero_is_allowed(report_text, write):
    rep = read_ncu_csv(write("z.csv", with_cell(report_text, "gpu__time_duration.sum", "0", 4)))
    assert rep.kernels["duration_ns"].iloc[2] == 0 and (rep.kernels["duration_ns"].drop(index=2) > 0).all()
    assert len(rep.kernels) == len(read_ncu_csv(FULL_REPORT).kernels)


# ---------------------------------------------------------------------------------- what ncu prints on an H200
H200_FULL = FIXTURES / "ncu_resnet50_b64_h200_full.csv.gz"  # copy of shared/samples: resnet50 b64 fp32, full metric set
L2 = "lts__t_sector_hit_rate.pct"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"


def _column(path, metric):
    """(durations in ns, the metric's cells as text) of a real report, read with the csv module only."""
    import gzip

    lines = gzip.open(path, "rt").read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = [r for r in csv.reader(lines[start:]) if r]
    h = rows[0]
    body = [r for r in rows[2:] if r[0].isdigit()]
    return np.array([float(r[h.index("gpu__time_duration.sum")].replace(",", "")) for r in body]), [r[h.index(metric)] for r in body]


def test_real_h200_full_report_becomes_a_profile():
    """The full-metric report of resnet50 on an H200 that the parser refused (L2 hit rates up to 577.51 % on 105 of 737
    kernels) becomes a profile with every metric, without a warning; its L2 hit rate is the duration-weighted mean of
    what ncu printed, kernels above 100 % included."""
    import warnings

    t, l2_text = _column(H200_FULL, L2)
    l2 = np.array([float(v) for v in l2_text])
    assert (l2 > 100.5).sum() == 105 and l2.max() == 577.51  # what the report holds
    M, occ, n, t_ns = independent_M(H200_FULL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = read_ncu_csv(H200_FULL)
        p = profile_from_ncu(rep, name="resnet50-b64-fp32", iteration_ms=t_ns / 1e6 * 1.1)
    assert rep.gpu_name == "NVIDIA H200" and rep.sm_count == 132 and rep.left_out == {}
    assert p.gpu.name == "NVIDIA H200" and p.kernels_per_iteration == n == 737
    assert abs(p.dram_util_pct - M) < 0.1 and abs(p.achieved_occupancy_pct - occ) < 0.1
    assert p.l2_hit_rate_pct == pytest.approx((l2 * t).sum() / t.sum(), rel=1e-12) and p.l2_hit_rate_pct < 100
    assert None not in (p.sm_throughput_pct, p.theoretical_occupancy_pct, p.sm_fill_pct, p.mps_wait_us)
    assert "ncu_left_out" not in p.meta


def test_a_percentage_past_999_carries_ncu_thousands_separator(write):
    """ncu prints "1,340.18" for an L2 hit rate past 999 % (other H200 reports of the same run): read as 1340.18."""
    text = with_cell(gzip_text(H200_FULL), L2, "1,340.18", 3)
    rep = read_ncu_csv(write("h200.csv", text))
    assert rep.kernels["l2_hit_pct"].iloc[1] == 1340.18
    assert len(rep.kernels) == 737 and rep.left_out == {}


def gzip_text(path):
    import gzip

    return gzip.open(path, "rt").read()


@pytest.mark.parametrize("value, problem", [("1,5", "misplaced thousands separator"), ("12,34.5", "misplaced thousands separator"),
                                            ("1,340.18", "outside 0..100.5 %")])
def test_a_required_percentage_stays_strict(value, problem, report_text, write):
    """A decimal comma is never read as a separator ("1,5" is not 15), and a required metric out of range refuses the
    report, separators or not."""
    path = write("r.csv", with_cell(report_text, "sm__warps_active.avg.pct_of_peak_sustained_active", value, 5))
    with pytest.raises(InputError, match=problem):
        read_ncu_csv(path)


def test_an_optional_metric_out_of_range_costs_that_metric_only(report_text, write):
    """An SM throughput of 300 % on two kernels of a real H100 report: the profile is made without sm_throughput_pct
    (a warning and the meta name the metric and how many kernels); every other field is what the intact report gives."""
    text = with_cell(with_cell(report_text, SM, "300", 5), SM, "250.5", 9)
    with pytest.warns(UserWarning, match=r"metric sm__throughput.avg.pct_of_peak_sustained_elapsed: 2 of 353 kernels outside "
                                         r"0..100.5 %.*left out of the profile"):
        rep = read_ncu_csv(write("r.csv", text))
    assert "sm_pct" not in rep.kernels and list(rep.left_out) == [SM]
    p = profile_from_ncu(rep, name="r18", iteration_ms=20.0)
    intact = profile_from_ncu(read_ncu_csv(write("intact.csv", report_text)), name="r18", iteration_ms=20.0)
    assert p.sm_throughput_pct is None and "sm_pct" not in p.distributions
    assert p.meta["ncu_left_out"][SM].startswith("2 of 353 kernels outside 0..100.5 %")
    same = {k: v for k, v in p.to_dict().items() if k not in ("sm_throughput_pct", "distributions", "meta")}
    assert same == {k: v for k, v in intact.to_dict().items() if k in same}
    assert p.distributions == {k: v for k, v in intact.distributions.items() if k != "sm_pct"}


def test_an_l2_hit_rate_whose_mean_is_no_percentage_is_left_out(report_text, write):
    """Per kernel ncu's L2 hit rate has no upper bound; a profile's duration-weighted hit rate above 100 % is left out
    with a warning (how many kernels lie above 100) instead of refusing the profile."""
    import io as _io

    lines = report_text.splitlines()
    h = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    col = next(csv.reader([lines[h]])).index(L2)
    out = []
    for line in lines[h + 2:]:
        cells = next(csv.reader([line]))
        if cells and cells[0].isdigit():
            cells[col] = "1,234.5"
            buf = _io.StringIO()
            csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="").writerow(cells)
            line = buf.getvalue()
        out.append(line)
    rep = read_ncu_csv(write("r.csv", "\n".join(lines[: h + 2] + out) + "\n"))
    with pytest.warns(UserWarning, match=r"lts__t_sector_hit_rate.pct: duration-weighted mean 1234 % \(353 of 353 kernels above "
                                         r"100\).*l2_hit_rate_pct left out"):
        p = profile_from_ncu(rep, name="r18", iteration_ms=20.0)
    assert p.l2_hit_rate_pct is None and p.sm_throughput_pct is not None
    assert "353 of 353 kernels above 100" in p.meta["ncu_left_out"][L2]


def test_profile_ncu_says_what_it_left_out(report_text, tmp_path):
    """The command writes the profile and prints the warning once, on stderr, as `colopred: warning: ...`."""
    import subprocess
    import sys

    (tmp_path / "r.csv").write_text(with_cell(report_text, SM, "300", 5))
    r = subprocess.run([sys.executable, "-m", "colopred", "profile", "ncu", str(tmp_path / "r.csv"), "--name", "x", "--iter-ms", "20",
                        "-o", str(tmp_path / "p.json")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if line.startswith("colopred: warning:")]
    assert len(warned) == 1 and SM in warned[0] and "1 of 353 kernels" in warned[0]
    assert "Traceback" not in r.stderr and (tmp_path / "p.json").exists()


def test_h100_profiles_are_unchanged_by_the_bounds():
    """The H100 fixtures give the profiles they gave before the bounds followed the H200 (recorded with the parser
    that refused the H200 report): the same fields, every value the same to 1e-12 (bit for bit with the versions of
    numpy and pandas they were recorded with; the last bit of a weighted sum may differ between versions)."""
    import json

    from .conftest import load_script

    same = load_script("reprofile_ncu").same
    expected = json.loads((FIXTURES / "ncu_profiles_before_h200.json").read_text())
    assert len(expected) == 3
    for name, doc in expected.items():
        path = {"sample": SAMPLE, "full": FULL_REPORT, "minimal": MINIMAL_REPORT}[name]
        rep = read_ncu_csv(path)
        got = json.loads(json.dumps(profile_from_ncu(rep, name="x", iteration_ms=rep.total_kernel_ms * 1.1).to_dict()))
        assert same(got, doc, rel=1e-12), name


def test_models_read_nothing_the_full_metric_set_adds(report_text, write):
    """The default metric set is the minimal one because no shipped model reads what the full set adds: a real
    full-set report, and the same report without the full set's extra metrics (SM throughput, L2 hit rate), give the
    same feature vector and the same prediction from every shipped ncu model; the profiles differ only in those
    fields."""
    import glob

    from colopred.measurement.profiling.ncu_csv import NCU_METRICS, REQUIRED_METRICS
    from colopred.measurement.profiling.runner import DEFAULT_METRIC_SET, METRIC_SETS
    from colopred.profile import JobProfile
    from colopred.runtime.features import base_vector
    from colopred.runtime.predictor import Predictor

    extra = [m for m in NCU_METRICS if m not in REQUIRED_METRICS]
    assert METRIC_SETS[DEFAULT_METRIC_SET] == list(REQUIRED_METRICS) and set(extra) == {SM, L2, "sm__maximum_warps_per_active_cycle_pct"}
    lines = report_text.splitlines()
    h = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    for m in (SM, L2):  # the minimal set's report of the same kernels (theoretical occupancy comes with it: see below)
        lines[h] = lines[h].replace(f'"{m}"', f'"{m}_not_collected"')
    meta = {"ncu_report": "resnet18-b64-fp32.csv"}
    full = profile_from_ncu(read_ncu_csv(write("full.csv", report_text)), name="a", iteration_ms=20.0, meta=meta)
    minimal = profile_from_ncu(read_ncu_csv(write("min.csv", "\n".join(lines) + "\n")), name="a", iteration_ms=20.0, meta=meta)
    differ = {k for k, v in full.to_dict().items() if minimal.to_dict()[k] != v}
    assert differ == {"sm_throughput_pct", "l2_hit_rate_pct", "distributions"}
    assert full.distributions["dram_pct"] == minimal.distributions["dram_pct"]
    np.testing.assert_array_equal(base_vector(full), base_vector(minimal))
    # a real minimal-set report holds the theoretical occupancy too (ncu collects it for sm__warps_active)
    assert read_ncu_csv(MINIMAL_REPORT).kernels["theo_occupancy_pct"].notna().all()
    partner = JobProfile.from_json(sorted(glob.glob(str(FIXTURES.parent.parent / "datasets/h100/profiles/ncu/*.json")))[0])
    for mode in ("mps", "timeslice"):
        pred = Predictor.default(mode)
        assert pred.predict([full, partner]).slowdown == pred.predict([minimal, partner]).slowdown
