"""pack() judged on measured data: placements of the shipped dataset's fully measured pairs."""

import pytest

from colopred.research.placement_study import (
    compare_placements,
    find_scenario,
    find_scenarios,
    measured_pair_throughput,
    perfect_matchings,
    placement_table,
)

from .conftest import shipped_dataset

pytestmark = [pytest.mark.data, pytest.mark.slow]

@pytest.fixture(scope="module")
def dataset():
    return shipped_dataset()


def test_perfect_matchings_are_all_distinct_pairings():
    m4 = list(perfect_matchings("abcd"))
    assert len(m4) == 3
    m8 = list(perfect_matchings(list("abcdefgh")))
    assert len(m8) == 105  # 7 x 5 x 3
    assert len({frozenset(frozenset(p) for p in m) for m in m8}) == 105
    assert all(sorted(x for p in m for x in p) == list("abcdefgh") for m in m8)


@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_scenarios_are_fully_measured_distinct_groups(dataset, mode):
    groups = find_scenarios(dataset, mode)
    assert len(groups) >= 2
    thr = measured_pair_throughput(dataset.for_mode(mode))
    for g in groups:
        assert 4 <= len(g) <= 8 and len(g) % 2 == 0 and g == sorted(set(g))
        assert all(frozenset((a, b)) in thr for i, a in enumerate(g) for b in g[i + 1:])
    assert all(len(set(a) & set(b)) <= 4 for i, a in enumerate(groups) for b in groups[i + 1:])
    assert find_scenario(dataset, mode) == groups[0] and len(groups[0]) == max(map(len, groups))


@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_pack_beats_random_and_one_job_per_gpu_on_measured_pairs(dataset, mode):
    """Over every fully measured group, pack()'s placements (by a model that never saw the group's
    pairs) are valid two-per-GPU placements that beat one job per GPU; under MPS they also beat the mean random
    placement in total. Under time-slicing, where the best placement of a group gains 2-6% over the mean one and
    the model's error on unseen pairs is of that size, they do not (the report's "Placement" section gives the
    measured totals), so only the weaker claim is checked there."""
    t = placement_table(dataset, modes=(mode,))
    packed_total = rand_total = 0.0
    for _sid, g in t.groupby("scenario_id"):
        by = g.set_index("policy")
        jobs = g["scenario"].iloc[0].split(": ")[1].split(", ")
        packed = by.loc["colopred pack (pairs unseen in training)", "throughput"]
        rand = by.filter(like="random", axis=0)["throughput"].iloc[0]
        assert by.loc["one job per GPU", "throughput"] == len(jobs) // 2
        assert by.loc["best (oracle)", "throughput"] >= packed - 1e-9 and rand > len(jobs) // 2  # sums in another order: ulps
        placed = [p.split("+") for p in g["colopred_placement"].iloc[0].split(" | ")]
        assert sorted(j for p in placed for j in p) == jobs and all(len(p) == 2 for p in placed)
        assert packed > len(jobs) // 2  # two jobs per GPU beat one: every measured pair here pays off
        packed_total += packed
        rand_total += rand
    if mode == "mps":
        assert packed_total > rand_total


def test_odd_or_unmeasured_scenarios_are_refused(dataset):
    jobs = find_scenario(dataset, "mps")
    with pytest.raises(ValueError, match="even"):
        compare_placements(dataset, "mps", jobs[:3])
    with pytest.raises(ValueError, match="never measured"):
        compare_placements(dataset, "mps", jobs[:3] + ["vgg16-b512-fp32"])


def test_maximal_cliques_of_a_small_graph():
    from colopred.research.placement_study import _maximal_cliques

    edges = ["ab", "ac", "bc", "cd", "de", "df", "ef", "bd"]
    adj: dict[str, set[str]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    got = sorted("".join(sorted(c)) for c in _maximal_cliques(adj))
    assert got == ["abc", "bcd", "def"]
