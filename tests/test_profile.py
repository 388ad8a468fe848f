import json
import math

import pytest

from colopred.errors import InputError, SchemaError
from colopred.gpu import GpuInfo
from colopred.profile import JobProfile

from .conftest import DATA


def make(**kw):
    base = dict(name="j", gpu=GpuInfo.from_name("NVIDIA H100 80GB HBM3"), source="ncu", iteration_ms=10.0,
                iterations_profiled=1, busy_fraction=0.5, dram_util_pct=30.0, achieved_occupancy_pct=40.0)
    base.update(kw)
    return JobProfile(**base)


def test_round_trip(tmp_path):
    p = make(peak_memory_gib=2.5, distributions={"dram_pct": {"p50": 20.0}}, meta={"k": "v"})
    path = p.to_json(tmp_path / "p.json")
    assert JobProfile.from_json(path) == p
    assert p.gpu_busy_ms == 5.0 and p.dram_demand_pct == 15.0


def test_shipped_profiles_load():
    files = sorted((DATA / "profiles").rglob("*.json"))
    assert len(files) >= 20
    for f in files:
        p = JobProfile.from_json(f)
        assert p.gpu.name == "NVIDIA H100 80GB HBM3"
        assert 0 < p.dram_util_pct <= 100


@pytest.mark.parametrize("field, value", [("iteration_ms", -1.0), ("iteration_ms", math.nan), ("dram_util_pct", 250.0),
                                          ("busy_fraction", math.inf), ("source", "nsys")])
def test_invalid_values_rejected(field, value):
    with pytest.raises(ValueError, match=field if field != "source" else "source"):
        make(**{field: value})


def test_unknown_schema_version(tmp_path):
    d = make().to_dict()
    d["schema_version"] = 99
    f = tmp_path / "p.json"
    f.write_text(json.dumps(d))
    with pytest.raises(SchemaError, match="schema version 99 is not supported"):
        JobProfile.from_json(f)


@pytest.mark.parametrize("text, msg", [("{not json", "not valid JSON"), ("[1,2]", "not a colopred profile"),
                                       ('{"schema": "colopred.job_profile", "schema_version": 1}', "missing field")])
def test_bad_files(tmp_path, text, msg):
    f = tmp_path / "p.json"
    f.write_text(text)
    with pytest.raises(SchemaError, match=msg) as e:
        JobProfile.from_json(f)
    assert str(f) in str(e.value)


def test_nan_in_file_rejected(tmp_path):
    d = make().to_dict()
    f = tmp_path / "p.json"
    f.write_text(json.dumps(d).replace('"dram_util_pct": 30.0', '"dram_util_pct": NaN'))
    with pytest.raises(SchemaError, match="dram_util_pct"):
        JobProfile.from_json(f)


def test_missing_file():
    with pytest.raises(InputError, match="no such file"):
        JobProfile.from_json("/nonexistent/p.json")


def test_unknown_gpu_needs_details():
    with pytest.raises(ValueError, match="unknown GPU"):
        GpuInfo.from_name("Some Future GPU")
    assert GpuInfo.from_name("Some Future GPU", sm_count=10, memory_gib=8).family == "Some Future GPU"


def test_retimed_keeps_the_gpu_time_per_iteration():
    p = JobProfile.from_json(DATA / "profiles" / "ncu" / "resnet18-b16-fp32.json")
    r = p.retimed(7.7)
    assert r.iteration_ms == 7.7 and r.gpu_busy_ms == pytest.approx(p.gpu_busy_ms)
    assert r.busy_fraction == pytest.approx(p.kernel_ms_per_iteration / 7.7)  # ncu: kernel time / iteration time
    assert r.busy_fraction > p.busy_fraction  # the job ran faster alone: its kernels fill more of its iteration
    # per-kernel metrics do not change; the original time is recorded once, also after a second re-timing
    for f in ("dram_util_pct", "achieved_occupancy_pct", "kernels_per_iteration", "mps_wait_us", "sm_fill_pct"):
        assert getattr(r, f) == getattr(p, f)
    assert r.retimed(12.0).meta["retimed_from_iteration_ms"] == p.iteration_ms
    for bad in (0.0, -3.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="iteration_ms"):
            p.retimed(bad)
