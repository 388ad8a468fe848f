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
    """The strict reader refuses a separator in a percentage: no shipped H100 report (51, raw csv read) has one there,
    while durations and launch counts carry them; and every shipped report reads."""
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
