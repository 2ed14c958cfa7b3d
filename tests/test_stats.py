import math
import statistics

import pytest

from icl_gd.core import stats


def test_spread_is_fmean_stdev_and_t_interval():
    values = [0.1, 0.2, 0.35, 0.3]
    s = stats.spread(values)
    assert s.mean == statistics.fmean(values) and s.std == statistics.stdev(values) and s.n == 4
    from scipy.stats import t

    half = float(t.ppf(0.975, 3)) * statistics.stdev(values) / 2
    assert (s.low, s.high) == (s.mean - half, s.mean + half) == s.interval


def test_below_two_values_no_std_nor_interval():
    s = stats.spread([3.0])
    assert (s.mean, s.std, s.interval) == (3.0, None, None)
    assert stats.sample_std([3.0]) is None


def test_log_scale_is_geometric():
    s = stats.spread([2.0, 8.0], log=True)
    assert s.mean == pytest.approx(4.0)
    assert s.low < 4.0 < s.high and s.std == pytest.approx(statistics.stdev([math.log(2), math.log(8)]))


def test_non_finite_values_give_no_interval_and_nan_std():
    s = stats.spread([1.0, math.inf])
    assert s.mean == math.inf and math.isnan(s.std) and s.interval is None
    assert math.isnan(stats.mean([math.inf, -math.inf]))
