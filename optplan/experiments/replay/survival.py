"""Times some of which are censored (still running at the horizon): the Kaplan–Meier estimate of their
distribution, its percentiles and the restricted mean.

A sample is (time, observed): ``observed`` False means the true time is at least ``time`` (a gang still
waiting, or still running, when the replay ends). A percentile of such values taken as if complete is
biased low, and more so the more gangs a policy leaves waiting; the Kaplan–Meier estimate is not.

- ``kaplan_meier``: S(t), the share still waiting after t, a step function falling at each observed time
  t by the factor 1 − d/n (d observed at t, n still at risk just before t). Ties: a sample censored at t
  is still at risk at t (events before censorings at one instant, the usual convention).
- ``Survival.quantile(p)``: the smallest observed time t with 1 − S(t) >= p/100; None when the estimate
  never reaches p% (too many censored: the percentile is not known, and the report says "-"). With nothing
  censored this is the nearest-rank percentile.
- ``Survival.restricted_mean(tau)``: ∫₀^τ S(t) dt, the mean time truncated at τ (τ: the largest time
  seen, observed or censored), defined whatever the censoring.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

_EPS = 1e-9
"""Slack when comparing 1 − S(t), a product of floats, with p/100."""


@dataclass(frozen=True)
class Survival:
    """The Kaplan–Meier step function: at ``times[i]`` it falls to ``surv[i]``."""

    times: tuple[float, ...]
    surv: tuple[float, ...]
    samples: int
    observed: int

    @property
    def censored(self) -> int:
        return self.samples - self.observed

    def quantile(self, p: float) -> float | None:
        """The smallest observed time by which p% are done (module docstring); None if never."""
        for t, s in zip(self.times, self.surv, strict=True):
            if 1 - s >= p / 100 - _EPS:
                return t
        return None

    def restricted_mean(self, tau: float) -> float:
        """∫₀^tau S(t) dt."""
        area, last, s = 0.0, 0.0, 1.0
        for t, after in zip(self.times, self.surv, strict=True):
            if t >= tau:
                break
            area += s * (t - last)
            last, s = t, after
        return area + s * max(tau - last, 0.0)


def kaplan_meier(samples: Iterable[tuple[float, bool]]) -> Survival:
    """The estimate of (time, observed) samples (module docstring)."""
    xs = sorted(samples, key=lambda x: (x[0], not x[1]))
    at_risk = len(xs)
    observed = sum(1 for _t, o in xs if o)
    times: list[float] = []
    surv: list[float] = []
    s = 1.0
    i = 0
    while i < len(xs):
        t = xs[i][0]
        d = c = 0
        while i < len(xs) and xs[i][0] == t:
            d += xs[i][1]
            c += not xs[i][1]
            i += 1
        if d:
            s *= 1 - d / at_risk
            times.append(t)
            surv.append(s)
        at_risk -= d + c
    return Survival(tuple(times), tuple(surv), len(xs), observed)
