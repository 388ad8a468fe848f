"""Solo timelines: torch's trace reduced to an event table, and the stream overlap computed from it,
on real traces recorded on our H100 (datasets/h100/timelines, tests/fixtures)."""

import gzip
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from colopred.errors import InputError
from colopred.measurement.profiling.timeline import (
    COLUMNS,
    LAUNCH_COLUMNS,
    device_properties,
    read_timeline,
    reduce_trace,
    resident_blocks_per_sm,
    stream_overlap,
    timeline_fields,
)
from colopred.profile import JobProfile

from .conftest import DATA, FIXTURES

TIMELINES = DATA / "timelines"


def test_reducing_the_raw_trace_gives_the_table_written_on_the_gpu():
    """The device reduced gin-b1024-fp32's trace with reduce_trace and also kept the raw trace: the
    two agree event for event (to the 3 decimals the table keeps)."""
    raw = json.loads(gzip.open(FIXTURES / "gin-b1024-fp32.trace.json.gz", "rt").read())
    mine = reduce_trace(raw)
    shipped = read_timeline(TIMELINES / "gin-b1024-fp32.timeline.csv.gz")
    assert list(mine.columns) == [*COLUMNS, *LAUNCH_COLUMNS] and len(mine) == len(shipped)
    assert (mine["kind"].to_numpy() == shipped["kind"].to_numpy()).all()
    assert np.allclose(mine["start_us"], shipped["start_us"], atol=1e-3)
    assert np.allclose(mine["dur_us"], shipped["dur_us"], atol=1e-3)
    meta = json.loads((TIMELINES / "gin-b1024-fp32.timeline.json").read_text())
    assert (mine["kind"] == "kernel").sum() == meta["kernels"] == 302 * meta["iterations"]
    # every kernel was launched by a host call with the same correlation id, before it started
    k = mine[mine["kind"] == "kernel"].set_index("correlation")
    host = mine[mine["kind"].isin(["runtime", "driver"])].set_index("correlation")
    assert k.index.isin(host.index).all()
    assert (host.loc[k.index, "start_us"].to_numpy() <= k["start_us"].to_numpy()).all()
    assert mine["start_us"].min() == 0 and mine["start_us"].is_monotonic_increasing


def _union_by_scan(start, dur):
    """Time covered by at least one interval, by a plain walk over the sorted intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(zip(start, np.add(start, dur))):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s)


@pytest.mark.parametrize("job", ["lstm_lm-b512-bf16", "resnet18-b64-fp32", "regnetx_400mf-b64-fp32"])
def test_stream_overlap_is_kernel_time_over_busy_time(job):
    tl = read_timeline(TIMELINES / f"{job}.timeline.csv.gz")
    k = tl[tl["kind"] == "kernel"]
    expect = k["dur_us"].sum() / _union_by_scan(k["start_us"].tolist(), k["dur_us"].tolist())
    assert stream_overlap(tl) == pytest.approx(max(1.0, expect), rel=1e-12)


def test_only_multi_stream_jobs_overlap():
    """cuDNN's LSTM runs its kernels on several streams at once; a ResNet on one."""
    lstm = read_timeline(TIMELINES / "lstm_lm-b512-bf16.timeline.csv.gz")
    resnet = read_timeline(TIMELINES / "resnet18-b64-fp32.timeline.csv.gz")
    assert lstm.loc[lstm["kind"] == "kernel", "stream"].nunique() > 5 and stream_overlap(lstm) > 1.3
    assert resnet.loc[resnet["kind"] == "kernel", "stream"].nunique() == 1 and stream_overlap(resnet) < 1.01
    # two kernels side by side on a made-up timeline: 2 µs of kernels in 1 µs
    both = pd.DataFrame({"kind": ["kernel", "kernel"], "name": ["a", "b"], "start_us": [0.0, 0.0], "dur_us": [1.0, 1.0],
                         "correlation": [1, 2], "stream": [7, 8]})
    assert stream_overlap(both) == 2.0
    with pytest.raises(ValueError, match="no kernel"):
        stream_overlap(both.assign(kind="runtime"))


def test_shipped_profiles_carry_their_timelines_overlap():
    for path in sorted((DATA / "profiles" / "ncu").glob("*.json")):
        p = JobProfile.from_json(path)
        tl = TIMELINES / f"{p.name}.timeline.csv.gz"
        assert tl.exists(), p.name
        assert p.stream_overlap == pytest.approx(stream_overlap(read_timeline(tl)), abs=1e-6)


def test_bad_timelines_and_overlaps_are_refused(tmp_path):
    bad = tmp_path / "x.timeline.csv.gz"
    pd.DataFrame({"kind": ["kernel"], "start_us": [0.0]}).to_csv(bad, index=False)
    with pytest.raises(InputError, match=r"x\.timeline\.csv\.gz.*missing columns"):
        read_timeline(bad)
    p = JobProfile.from_json(DATA / "profiles" / "ncu" / "resnet18-b64-fp32.json")
    for v in (0.5, float("nan")):
        with pytest.raises(ValueError, match="stream_overlap"):
            replace(p, stream_overlap=v)


LAUNCH = DATA / "timelines" / "launch"


def _launch_timeline(job):
    meta = json.loads((LAUNCH / f"{job}.timeline.json").read_text())
    return read_timeline(LAUNCH / f"{job}.timeline.csv.gz"), meta


def test_the_launch_configuration_is_kept_from_the_raw_trace():
    raw = json.loads(gzip.open(FIXTURES / "gin-b1024-fp32.trace.json.gz", "rt").read())
    k = reduce_trace(raw).query("kind == 'kernel'")
    first = next(e for e in sorted(raw["traceEvents"], key=lambda e: e.get("ts", 0)) if e.get("cat") == "kernel")
    row = k.iloc[0]
    a = first["args"]
    assert row["grid_blocks"] == np.prod(a["grid"]) and row["block_threads"] == np.prod(a["block"])
    assert (row["registers_per_thread"], row["shared_mem_bytes"], row["est_occupancy_pct"]) == (
        a["registers per thread"], a["shared memory"], a["est. achieved occupancy %"])
    assert k[list(LAUNCH_COLUMNS)].notna().all().all()
    assert reduce_trace(raw).query("kind != 'kernel'")[list(LAUNCH_COLUMNS)].isna().all().all()
    assert device_properties(raw)["numSms"] == 132 and device_properties({"traceEvents": []}) is None


@pytest.mark.parametrize("job", ["gin-b1024-fp32", "gpt2_small-b16-bf16", "resnet50-b64-fp32", "lstm_lm-b64-fp32"])
def test_resident_blocks_give_cuptis_occupancy_estimate(job):
    """Where a grid fills every SM and CUPTI gives an occupancy estimate (it gives 0 for some kernels), the estimate is
    the resident blocks' warps over the SM's warps: the residency limits reproduce it to its integer rounding on H100
    kernels of several libraries."""
    tl, meta = _launch_timeline(job)
    dev = meta["device_properties"]
    k = tl[tl["kind"] == "kernel"]
    resident = resident_blocks_per_sm(k["block_threads"], k["registers_per_thread"], k["shared_mem_bytes"], dev)
    full = (k["grid_blocks"].to_numpy() >= dev["numSms"] * resident) & (k["est_occupancy_pct"].to_numpy() > 0)
    warps = np.ceil(k["block_threads"].to_numpy() / 32)
    mine = 100 * resident * warps / (dev["maxThreadsPerMultiprocessor"] / 32)
    assert full.sum() > 50
    assert np.abs(mine[full] - k["est_occupancy_pct"].to_numpy()[full]).max() <= 1.0


@pytest.mark.parametrize("job", ["gin-b1024-fp32", "dlrm-b512-fp32", "gpt2_small-b32-fp32", "resnet18-b64-fp32", "lstm_lm-b256-fp32"])
def test_timeline_fields_agree_with_the_ncu_profile(job):
    """The fields an ncu report gives from launch configurations, computed from the timeline instead: the same to a
    few points (the two runs may pick different kernels; ncu measures occupancy, CUPTI estimates it)."""
    tl, meta = _launch_timeline(job)
    f = timeline_fields(tl, meta["iterations"], meta["device_properties"])
    p = JobProfile.from_json(DATA / "profiles" / "ncu" / f"{job}.json")
    assert f["kernels_per_iteration"] == pytest.approx(p.kernels_per_iteration, rel=0.1)
    assert f["stream_overlap"] == pytest.approx(p.stream_overlap, abs=0.1)
    assert f["sm_fill_pct"] == pytest.approx(p.sm_fill_pct, abs=6)
    assert f["launch_fill_pct"] == pytest.approx(p.launch_fill_pct, abs=5)
    assert f["mps_wait_us"] == pytest.approx(p.mps_wait_us, rel=0.3)


def test_a_timeline_without_launch_configurations_gives_counts_only():
    old = read_timeline(TIMELINES / "gin-b1024-fp32.timeline.csv.gz")
    f = timeline_fields(old, 6, {"numSms": 132})
    assert f["kernels_per_iteration"] == 302 and f["stream_overlap"] == pytest.approx(1.0)
    assert f["sm_fill_pct"] is None and f["mps_wait_us"] is None and f["launch_fill_pct"] is None
    with pytest.raises(ValueError, match="iterations"):
        timeline_fields(old, 0, None)


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_shipped_gpm_profiles_carry_their_launch_timelines_fields(gpu):
    """Every shipped GPM profile's kernel count, stream overlap and MPS wait are what its solo timeline gives (as
    `colopred profile add-timeline` sets them), and nothing else of the profile came from the timeline."""
    from colopred.measurement.profiling.timeline import with_timeline
    from colopred.runtime.sources import GPM_TIMELINE_FIELDS

    root = DATA.parent / gpu
    paths = sorted((root / "profiles" / "nvml").glob("*.json"))
    assert len(paths) >= 16
    for path in paths:
        p = JobProfile.from_json(path)
        tl = root / "timelines" / "launch" / f"{p.name}.timeline.csv.gz"
        again = with_timeline(p.with_(**dict.fromkeys(GPM_TIMELINE_FIELDS)), tl)
        # equal to the last few bits: the wait is a float sum whose order numpy/pandas versions may change
        a, b = again.to_dict(), p.to_dict()
        assert a.keys() == b.keys(), p.name
        for k in a:
            if isinstance(b[k], float):
                assert a[k] == pytest.approx(b[k], rel=1e-12, abs=0), (p.name, k)
            else:
                assert a[k] == b[k], (p.name, k)
        assert p.meta["timeline_fields_from"] == tl.name


def test_a_trace_without_the_gpu_properties_is_refused_in_one_line(tmp_path):
    """A GPM profile's fields need the GPU's residency limits: a trace whose deviceProperties lack them is refused,
    naming the file and what is missing, before anything is written."""
    from colopred.measurement.profiling.timeline import fields_for_profile

    raw = json.loads(gzip.open(FIXTURES / "gin-b1024-fp32.trace.json.gz", "rt").read())
    raw["deviceProperties"] = [{"id": 0, "numSms": 132}]
    bad = tmp_path / "no-props.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"no-props.json.*lack maxThreadsPerMultiprocessor, regsPerMultiprocessor"):
        fields_for_profile(bad, "nvml", 6)
    assert set(fields_for_profile(bad, "ncu")) == {"stream_overlap"}  # an ncu profile takes only the overlap


def test_a_trace_without_kernels_is_its_own_error(tmp_path):
    """A trace of a job run without the GPU: NoKernelError (an InputError naming the file), which the traced run of
    `colopred profile` turns into 'no timeline fields' rather than a failure."""
    from colopred.measurement.profiling.timeline import NoKernelError, load_timeline

    cpu_only = tmp_path / "cpu_only.json"
    cpu_only.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 0, "dur": 3}]}))
    with pytest.raises(NoKernelError, match=r"cpu_only\.json: no GPU kernel"):
        load_timeline(cpu_only)
    assert issubclass(NoKernelError, InputError)


def test_a_trace_whose_kernels_all_last_zero_microseconds_is_refused(tmp_path, capsys):
    """A trace of kernels that all last 0 µs holds no kernel time: add-timeline refuses it in one line naming the file,
    writes nothing, and never sets a stream overlap of 1 from it (a trace of the shipped gin job, its durations zeroed)."""
    from colopred.cli import main
    from colopred.measurement.profiling.timeline import load_timeline

    raw = json.loads(gzip.open(FIXTURES / "gin-b1024-fp32.trace.json.gz", "rt").read())
    kernels = 0
    for e in raw["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = 0
            kernels += 1
    assert kernels > 0
    bad = tmp_path / "zero.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=rf"zero.json: its {kernels} GPU kernels all last 0 µs: the timeline holds no kernel time"):
        load_timeline(bad)
    src = DATA / "profiles" / "ncu" / "gin-b1024-fp32.json"
    out = tmp_path / "p.json"
    assert main(["profile", "add-timeline", str(src), "--timeline", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("colopred: error: ") and "no kernel time" in err and "\n" not in err and not out.exists()
    with pytest.raises(ValueError, match="no kernel time"):
        stream_overlap(pd.DataFrame({"kind": ["kernel", "kernel"], "start_us": [0.0, 5.0], "dur_us": [0.0, 0.0]}))
