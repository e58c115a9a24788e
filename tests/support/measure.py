"""Figures the tests check: percentiles of measured times."""

from __future__ import annotations


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (as numpy's default), q in [0, 100]."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
