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
    busy = np.ones((k, 3))
    times = np.array([[3.0, 50.0, 400.0]] * k) * np.arange(1, k + 1)[:, None]
    np.testing.assert_allclose(queue_load(busy, times), k - 1.0)


@pytest.mark.parametrize("k", [2, 3, 4, 8])
def test_the_presences_solve_the_schweitzer_fixed_point(k):
    busy, t = _random_sets(np.random.default_rng(k), k, 500)
    P = co_runner_presence(busy, t)
    D, Z = busy * t, (1 - busy) * t
    R = D * (1 + P)
    Q = R / (Z + R)
    np.testing.assert_allclose(Q.sum(axis=0) - Q, P, rtol=1e-10)


def test_a_host_bound_pair_has_the_closed_form_of_its_fixed_point():
    # b = 0.3 beside a saturating job: the saturating one is always present (Q = 1), so R_j = 2 D_j and
    # Q_j = 0.6 / (0.7 + 0.6); the saturating job's load is Q_j, above the host-bound job's solo busy 0.3
    got = queue_load(np.array([[0.3], [1.0]]), np.array([[10.0], [30.0]]))[:, 0]
    np.testing.assert_allclose(got, [0.3, 0.6 / 1.3])


def test_empty_slots_and_batch_neighbours_change_nothing():
    busy, t = _random_sets(np.random.default_rng(7), 3, 200)
    alone = np.stack([queue_load(busy[:, [i]], t[:, [i]])[:, 0] for i in range(200)], axis=1)
    batch = queue_load(busy, t)
    padded = queue_load(np.vstack([busy, np.zeros((2, 200))]), np.vstack([t, np.full((2, 200), np.nan)]))
    assert np.array_equal(alone, batch)
    assert np.array_equal(padded[:3], batch) and not padded[3:].any()


def test_the_load_follows_its_job_when_the_slots_are_permuted():
    busy, t = _random_sets(np.random.default_rng(3), 4, 300)
    perm = [2, 0, 3, 1]
    np.testing.assert_allclose(queue_load(busy[perm], t[perm]), queue_load(busy, t)[perm], rtol=1e-12)


def test_co_runners_count_at_least_their_solo_busy_and_a_third_job_never_lowers_the_load():
    busy, t = _random_sets(np.random.default_rng(11), 3, 1000)
    P = co_runner_presence(busy, t)
    solo = busy.sum(axis=0) - busy
    assert (P >= solo - 1e-12).all() and (P > solo + 1e-3).any()
    pair = queue_load(busy[:2], t[:2])
    assert (queue_load(busy, t)[:2] >= pair - 1e-12).all()
