"""pack() judged on measured data: placements of the shipped dataset's fully measured pairs."""

import pytest

from colopred.modeling.dataset import load_dataset
from colopred.modeling.placement import compare_placements, find_scenario, measured_pair_throughput, perfect_matchings

from .conftest import DATA


@pytest.fixture(scope="module")
def dataset():
    return load_dataset(DATA)


def test_perfect_matchings_are_all_distinct_pairings():
    m4 = list(perfect_matchings("abcd"))
    assert len(m4) == 3
    m8 = list(perfect_matchings(list("abcdefgh")))
    assert len(m8) == 105  # 7 x 5 x 3
    assert len({frozenset(frozenset(p) for p in m) for m in m8}) == 105
    assert all(sorted(x for p in m for x in p) == list("abcdefgh") for m in m8)


@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_pack_beats_random_and_one_job_per_gpu_on_measured_pairs(dataset, mode):
    jobs = find_scenario(dataset, mode)
    assert jobs is not None and len(jobs) % 2 == 0 and len(jobs) >= 4
    thr = measured_pair_throughput(dataset.for_mode(mode))
    assert all(frozenset((a, b)) in thr for i, a in enumerate(jobs) for b in jobs[i + 1:])
    t = compare_placements(dataset, mode, jobs).set_index("policy")
    packed = t.loc["colopred pack (pairs unseen in training)", "throughput"]
    rand = t.filter(like="random", axis=0)["throughput"].iloc[0]
    assert t.loc["one job per GPU", "throughput"] == len(jobs) // 2
    assert t.loc["best (oracle)", "throughput"] >= packed > rand > len(jobs) // 2
    placed = [g.split("+") for g in t.attrs["placement"].split(" | ")]
    assert sorted(j for g in placed for j in g) == jobs and all(len(g) == 2 for g in placed)


def test_odd_or_unmeasured_scenarios_are_refused(dataset):
    jobs = find_scenario(dataset, "mps")
    with pytest.raises(ValueError, match="even"):
        compare_placements(dataset, "mps", jobs[:3])
    with pytest.raises(ValueError, match="never measured"):
        compare_placements(dataset, "mps", jobs[:3] + ["vgg16-b512-fp32"])
