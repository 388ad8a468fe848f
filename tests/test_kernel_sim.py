"""The kernel-sequence collocation simulator (research prototype), on real recorded H100 ncu reports."""

import json

import numpy as np
import pytest

from colopred.measurement.profiling.ncu_csv import read_ncu_csv
from research.kernel_sim import (KernelTrace, host_cadence, simulate, solo_iteration_us,
                                          trace_from_kernels)

from .conftest import DATA


def trace(name: str, iteration_ms: float | None = None) -> KernelTrace:
    p = json.loads((DATA / "profiles" / "ncu" / f"{name}.json").read_text())
    k = read_ncu_csv(DATA / "ncu_reports" / f"{name}.csv.gz").kernels
    return trace_from_kernels(name, k["duration_ns"], k["waves_per_sm"], k["dram_pct"],
                              iteration_ms or p["iteration_ms"], p["iterations_profiled"],
                              occupancy_pct=k["occupancy_pct"])


def test_segments_keep_the_kernel_time_and_launches():
    k = read_ncu_csv(DATA / "ncu_reports" / "resnet18-b64-fp32.csv.gz").kernels
    tr = trace("resnet18-b64-fp32")
    assert len(tr.work_us) <= 48
    assert tr.kernel_us == pytest.approx(k["duration_ns"].sum() / 1e3)
    assert tr.launches.sum() == len(k)
    assert np.all((tr.fill >= 0) & (tr.fill <= 1)) and np.all((tr.dram >= 0) & (tr.dram <= 1))


@pytest.mark.parametrize("name", ["resnet18-b64-fp32", "resnet18-b64-fp32-loader", "lstm_lm-b64-fp32"])
def test_the_host_cadence_reproduces_the_solo_iteration(name):
    tr = trace(name)
    work, g = host_cadence(tr)
    assert solo_iteration_us(work, g) == pytest.approx(tr.iteration_us, rel=1e-6)
    assert (g > 0) == (tr.kernel_us < tr.iteration_us)  # busy < 1 leaves host time; lstm's streams overlap


@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_a_job_alone_runs_at_its_solo_speed(mode):
    assert simulate([trace("gpt2_small-b8-bf16")], mode)[0] == pytest.approx(1.0, rel=1e-6)


def test_two_copies_of_a_gpu_bound_job_time_sliced_take_turns():
    tr = trace("vgg16-b32-fp32")
    s = simulate([tr, tr], "timeslice", switch_us=0.0)
    busy = tr.kernel_us / tr.iteration_us  # 0.97: each waits for the other's kernel time, in its own host time
    assert s == pytest.approx([2 * busy, 2 * busy], rel=0.01)
    assert np.all(simulate([tr, tr], "timeslice", switch_us=100.0) > s)  # switches cost


def test_a_host_bound_job_absorbs_contention_in_its_idle_time():
    busy = simulate([trace("resnet18-b64-fp32"), trace("vgg16-b32-fp32")], "timeslice")
    idle = simulate([trace("resnet18-b64-fp32-loader"), trace("vgg16-b32-fp32")], "timeslice")
    assert idle[0] < busy[0] - 0.3  # the loader-bound copy (busy 0.23) slows much less
    assert idle[1] < busy[1]  # and leaves its partner more of the GPU


@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_a_third_job_slows_the_pair_and_order_does_not_matter(mode):
    a, b, c = trace("resnet18-b64-fp32"), trace("gpt2_small-b8-bf16"), trace("alexnet-b128-fp32")
    pair = simulate([a, b], mode)
    triple = simulate([a, b, c], mode)
    assert np.all(triple[:2] > pair)
    assert simulate([c, a, b], mode) == pytest.approx(triple[[2, 0, 1]], rel=0.02)


def test_mps_waits_slow_the_short_kernels_beside_long_ones():
    """resnet18's short kernels wait behind vgg16-b512's long multi-wave ones; vgg16 barely waits (docs/model.md)."""
    s = simulate([trace("resnet18-b64-fp32"), trace("vgg16-b512-fp32")], "mps")
    assert s[0] > 2 * s[1]
    no_wait = simulate([trace("resnet18-b64-fp32"), trace("vgg16-b512-fp32")], "mps", wait_scale=0.0)
    assert s[0] > no_wait[0]


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match="mode"):
        simulate([trace("gpt2_small-b8-bf16")], "mig")
