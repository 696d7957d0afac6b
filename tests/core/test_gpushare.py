"""The device-fit rule of shared GPUs and the FGD fragmentation measure (optplan.solvers.core.gpushare)."""

import numpy as np
import pytest

from optplan.solvers.core.gpushare import (
    MILLI,
    GpuAsk,
    TargetWorkload,
    ask_of,
    ask_problem,
    choose_devices,
    fits,
    fragmentation,
    node_fragmentation,
)

SHARE_300 = GpuAsk(milli=300)
TWO = GpuAsk(whole=2)


@pytest.mark.parametrize("ask, problem", [
    (GpuAsk(), None),
    (GpuAsk(milli=999), None),
    (GpuAsk(whole=3), None),
    (GpuAsk(milli=1000), "below 1000"),
    (GpuAsk(milli=1500), "below 1000"),
    (GpuAsk(whole=-1), "negative"),
    (GpuAsk(milli=-5), "negative"),
    (GpuAsk(whole=2, milli=500), "not both"),
    (GpuAsk(memory_mib=10), "without a GPU"),
])
def test_ask_problem(ask: GpuAsk, problem: str | None) -> None:
    got = ask_problem(ask)
    assert (got is None) if problem is None else (got is not None and problem in got)


@pytest.mark.parametrize("num, milli, want", [
    (0, 0, GpuAsk()),
    (1, 1000, GpuAsk(whole=1)),
    (4, 1000, GpuAsk(whole=4)),
    (1, 460, GpuAsk(milli=460)),
    (2, 500, GpuAsk(whole=2, milli=500)),
])
def test_ask_of_the_trace(num: int, milli: int, want: GpuAsk) -> None:
    assert ask_of(num, milli) == want


@pytest.mark.parametrize("free, ask, model, rule, want", [
    # a share: the least free device that is enough; ties to the lowest index
    ((1000, 400, 300, 300), SHARE_300, None, "best-fit", (2,)),
    ((1000, 400, 300, 300), SHARE_300, None, "first-fit", (0,)),
    ((400, 1000, 300, 1000), SHARE_300, None, "worst-fit", (1,)),
    ((200, 250), SHARE_300, None, "best-fit", None),
    # whole GPUs: entirely free devices only, lowest index first
    ((1000, 999, 1000, 1000), TWO, None, "best-fit", (0, 2)),
    ((1000, 999, 700, 1000), GpuAsk(whole=3), None, "best-fit", None),
    # no GPU: no device, on any node
    ((), GpuAsk(models=frozenset({"V100"})), "", "best-fit", ()),
    # the model
    ((1000,), GpuAsk(whole=1, models=frozenset({"V100", "A100"})), "T4", "best-fit", None),
    ((1000,), GpuAsk(whole=1, models=frozenset({"V100", "A100"})), "A100", "best-fit", (0,)),
])
def test_choose_devices(free: tuple[int, ...], ask: GpuAsk, model: str | None, rule: str,
                        want: tuple[int, ...] | None) -> None:
    assert choose_devices(free, ask, model=model, rule=rule) == want
    assert fits(free, ask, model=model) == (want is not None)


def test_gpu_memory_limits_the_devices() -> None:
    ask = GpuAsk(milli=200, memory_mib=8000)
    assert choose_devices((500, 900), ask, free_memory=(4000, 16000)) == (1,)
    assert not fits((500, 900), ask, free_memory=(4000, 6000))


def test_unknown_rule() -> None:
    with pytest.raises(ValueError, match="unknown device rule"):
        choose_devices((1000,), SHARE_300, rule="nearest")


# ---- fragmentation: hand-computed cases -------------------------------------------------------

def test_fragmentation_of_one_share_type() -> None:
    # target: only 500-milli shares with 4 cpu: devices with less than 500 free are fragments
    t = TargetWorkload.of([(4000, GpuAsk(milli=500))])
    assert node_fragmentation((1000, 400, 700, 100), 8000, "V100", t) == 500.0
    # too little cpu: every free milli is a fragment
    assert node_fragmentation((1000, 400, 700, 100), 2000, "V100", t) == 2200.0


def test_fragmentation_of_whole_gpus_and_no_gpu() -> None:
    t = TargetWorkload.of([(1000, GpuAsk(whole=2)), (1000, GpuAsk())])
    # whole 2: partly taken devices are fragments (400 + 700); the no-GPU half sees all 3100
    assert node_fragmentation((1000, 400, 700, 1000), 8000, "", t) == pytest.approx(0.5 * 1100 + 0.5 * 3100)
    # one entirely free device only: whole 2 cannot run, everything is a fragment
    assert node_fragmentation((1000, 400, 700, 0), 8000, "", t) == pytest.approx(2100)


def test_fragmentation_respects_the_model() -> None:
    t = TargetWorkload.of([(0, GpuAsk(milli=100, models=frozenset({"A100"})))])
    assert node_fragmentation((MILLI, MILLI), 0, "A100", t) == 0.0
    assert node_fragmentation((MILLI, MILLI), 0, "T4", t) == 2000.0


def test_fragmentation_vectorised_matches_one_node_at_a_time() -> None:
    rng = np.random.default_rng(7)
    tasks = [(int(rng.integers(0, 16)) * 1000, ask_of(*[(0, 0), (1, 1000), (2, 1000), (1, 250), (1, 600)][k]))
             for k in rng.integers(0, 5, size=40)]
    t = TargetWorkload.of(tasks)
    free = rng.choice([0, 100, 250, 400, 600, 1000], size=(30, 8))
    cpu = rng.integers(0, 32, size=30) * 1000
    models = ["V100" if k % 2 else "T4" for k in range(30)]
    many = fragmentation(free, cpu, models, t)
    for k in range(30):
        assert many[k] == pytest.approx(node_fragmentation(free[k].tolist(), int(cpu[k]), models[k], t))
