"""Kaplan–Meier on hand-computed cases: no censoring (the nearest-rank percentile), censoring, ties of an
event and a censoring at one time, all censored, and the restricted mean."""

from __future__ import annotations

import pytest

from optplan.experiments.replay.survival import kaplan_meier


def test_without_censoring_it_is_the_nearest_rank_percentile() -> None:
    s = kaplan_meier([(t, True) for t in (5.0, 1.0, 3.0, 2.0, 4.0)])
    assert s.surv == pytest.approx((0.8, 0.6, 0.4, 0.2, 0.0))
    assert s.quantile(50) == 3.0 and s.quantile(60) == 3.0 and s.quantile(61) == 4.0
    assert s.quantile(100) == 5.0
    hundred = kaplan_meier([(float(t), True) for t in range(1, 101)])
    assert hundred.quantile(95) == 95.0  # the nearest rank
    assert s.restricted_mean(5.0) == pytest.approx(3.0)  # the plain mean


def test_censored_samples_leave_the_risk_set_without_a_step() -> None:
    # 1, 2+, 3, 4+, 5: S falls at 1 to 4/5, at 3 to 4/5 * 2/3 = 8/15, at 5 to 0
    s = kaplan_meier([(1, True), (2, False), (3, True), (4, False), (5, True)])
    assert s.times == (1, 3, 5)
    assert s.surv == pytest.approx((0.8, 8 / 15, 0.0))
    # 1 - 8/15 = 46.7%
    assert s.quantile(20) == 1 and s.quantile(21) == 3 and s.quantile(46) == 3 and s.quantile(47) == 5
    assert s.censored == 2 and s.observed == 3
    # area: 1*1 + 0.8*2 + 8/15*2 = 3.6 + 16/15
    assert s.restricted_mean(5) == pytest.approx(1 + 1.6 + 16 / 15)


def test_a_tie_counts_the_censored_one_at_risk() -> None:
    # 2, 2+, 4: at 2 three at risk, one event: 2/3; at 4 one at risk: 0
    s = kaplan_meier([(2, False), (2, True), (4, True)])
    assert s.surv == pytest.approx((2 / 3, 0.0))
    # zero waits tie too: 0, 0, 0, 7+ -> S(0) = 1/4, nothing after: p80 unknown
    z = kaplan_meier([(0, True), (0, True), (0, True), (7, False)])
    assert z.quantile(75) == 0 and z.quantile(80) is None


def test_the_naive_percentile_is_biased_low() -> None:
    # half the gangs still waiting at 10: their naive p95 is 10, but the median is already unknown
    s = kaplan_meier([(1, True), (2, True), (10, False), (10, False)])
    assert s.quantile(50) == 2 and s.quantile(95) is None


def test_all_censored_and_empty() -> None:
    s = kaplan_meier([(3, False), (8, False)])
    assert s.times == () and s.quantile(1) is None
    assert s.restricted_mean(8) == 8.0
    e = kaplan_meier([])
    assert e.quantile(50) is None and e.samples == 0
