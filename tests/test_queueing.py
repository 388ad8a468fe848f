"""The time-slicing queue load (colopred.runtime.queueing): the fixed point it solves, and what contention physics
asks of it."""

import numpy as np
import pytest

from colopred.runtime.queueing import co_runner_presence, queue_load


def _random_sets(rng, k, n):
    busy = rng.uniform(0.05, 1.0, (k, n))
    busy[rng.uniform(size=(k, n)) < 0.3] = 1.0
    return busy, np.exp(rng.uniform(0.0, 7.0, (k, n)))


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_saturating_jobs_take_equal_turns(k):
    np.testing.assert_allclose(queue_load(np.ones((k, 3))), k - 1.0)


@pytest.mark.parametrize("k", [2, 3, 4, 8])
def test_the_presences_solve_the_schweitzer_fixed_point_whatever_the_iteration_times(k):
    # the network in each job's own times (D = b·t kernel time, Z = (1 − b)·t host time): t cancels from Q
    busy, t = _random_sets(np.random.default_rng(k), k, 500)
    P = co_runner_presence(busy)
    D, Z = busy * t, (1 - busy) * t
    R = D * (1 + P)
    Q = R / (Z + R)
    np.testing.assert_allclose(Q.sum(axis=0) - Q, P, rtol=1e-10)


def test_a_host_bound_pair_has_the_closed_form_of_its_fixed_point():
    # b = 0.3 beside a saturating job: the saturating one is always present (Q = 1), so R_j = 2 D_j and
    # Q_j = 0.6 / (0.7 + 0.6); the saturating job's load is Q_j, above the host-bound job's solo busy 0.3
    got = queue_load(np.array([[0.3], [1.0]]))[:, 0]
    np.testing.assert_allclose(got, [0.3, 0.6 / 1.3])


def test_a_job_alone_or_beside_idle_slots_has_no_load():
    busy = np.array([[0.7, 0.0], [0.0, 0.0], [0.0, 0.0]])
    assert not queue_load(busy).any() and not queue_load(busy[:1]).any()


def test_empty_slots_and_batch_neighbours_change_nothing():
    busy, _ = _random_sets(np.random.default_rng(7), 3, 200)
    alone = np.stack([queue_load(busy[:, [i]])[:, 0] for i in range(200)], axis=1)
    batch = queue_load(busy)
    padded = queue_load(np.vstack([busy, np.zeros((2, 200))]))
    assert np.array_equal(alone, batch)
    assert np.array_equal(padded[:3], batch) and not padded[3:].any()


@pytest.mark.parametrize("k", [3, 5, 8, 32])
def test_a_set_alone_and_in_a_batch_agree_bit_for_bit(k):
    # one set at a time takes the Python-float path, a batch numpy's: the same operations in the same order
    rng = np.random.default_rng(20 + k)
    busy, _ = _random_sets(rng, k, 300)
    busy[rng.uniform(size=busy.shape) < 0.4] = 0.0  # empty slots
    busy[1:, 20:30] = 0.0  # sets of one busy member and of two
    busy[2:, 30:40] = 0.0
    busy[:, 40:60] *= 0.1  # nearly idle sets, which take many steps
    batch = co_runner_presence(busy)
    alone = np.stack([co_runner_presence(busy[:, [i]])[:, 0] for i in range(300)], axis=1)
    assert np.array_equal(alone, batch)
    empty_beside_few = (busy == 0) & ((busy > 0).sum(axis=0) <= 2)  # the pair's closed form leaves them nothing
    assert empty_beside_few.any() and not batch[empty_beside_few].any()


@pytest.mark.parametrize("k", [3, 4])
def test_a_pair_padded_with_empty_slots_anywhere_is_the_pair(k):
    busy, _ = _random_sets(np.random.default_rng(k), 2, 300)
    pair = queue_load(busy)
    rng = np.random.default_rng(10 + k)
    slots = np.stack([rng.choice(k, 2, replace=False) for _ in range(300)], axis=1)  # where each set's two jobs sit
    padded = np.zeros((k, 300))
    padded[slots, np.arange(300)] = busy
    got = queue_load(padded)
    assert np.array_equal(got[slots, np.arange(300)], pair)
    assert got.sum() == pytest.approx(pair.sum())


def test_many_nearly_idle_jobs_reach_the_fixed_point():
    # 32 jobs of busy < 0.1: Σ Q_j(S) − S is nearly flat at the solo presences, where a step from Σ b would overshoot
    busy = np.random.default_rng(5).uniform(0.0, 0.1, (32, 200))
    P = co_runner_presence(busy)
    R = busy * (1 + P)
    Q = R / (1 - busy + R)
    np.testing.assert_allclose(Q.sum(axis=0) - Q, P, rtol=1e-10)


def test_the_load_follows_its_job_when_the_slots_are_permuted():
    busy, _ = _random_sets(np.random.default_rng(3), 4, 300)
    perm = [2, 0, 3, 1]
    np.testing.assert_allclose(queue_load(busy[perm]), queue_load(busy)[perm], rtol=1e-12)


def test_co_runners_count_at_least_their_solo_busy_and_a_third_job_never_lowers_the_load():
    busy, _ = _random_sets(np.random.default_rng(11), 3, 1000)
    P = co_runner_presence(busy)
    solo = busy.sum(axis=0) - busy
    assert (P >= solo - 1e-12).all() and (P > solo + 1e-3).any()
    pair = queue_load(busy[:2])
    assert (queue_load(busy)[:2] >= pair - 1e-12).all()
