"""Numbers for people, one notation everywhere (holodeck_core/stats/display.py): no exponent,
no rounding noise, percentage points for differences of rates, p below 0.001 as a bound."""

from __future__ import annotations

import pytest

from holodeck_core.stats.display import number, p_value, points
from holodeck_core.stats.paired import paired_comparison


@pytest.mark.parametrize(
    ("value", "sign", "shown"),
    [
        (1.11e-16, True, "+0.000"),
        (-2.2e-17, False, "0.000"),
        (157.55555555555554, False, "157.6"),
        (0.003607649999999999, False, "0.003608"),
        (12345.678, True, "+12,346"),
        (0.894, False, "0.8940"),
        (1e-7, False, "0.000000"),
        (float("nan"), False, "nan"),
    ],
)
def test_numbers_have_no_exponent_and_no_rounding_noise(
    value: float, sign: bool, shown: str
) -> None:
    assert number(value, sign=sign) == shown
    assert "e" not in number(value, sign=sign).replace("nan", "")


@pytest.mark.parametrize(
    ("p", "shown"), [(0.0, "p < 0.001"), (1e-12, "p < 0.001"), (0.0026, "p = 0.0026"), (1, "p = 1")]
)
def test_p_values(p: float, shown: str) -> None:
    assert p_value(p) == shown


def test_differences_of_rates_are_percentage_points() -> None:
    assert points(0.32) == "+32.0 pp" and points(-1e-17) == "+0.0 pp"
    comparison = paired_comparison(
        {str(i): 0.0 for i in range(30)}, {str(i): 1.0 for i in range(30)}, binary=True
    )
    text = comparison.render()
    assert text.startswith("Δ +100.0 pp (95% CI +100.0 to +100.0 pp), p < 0.001 (McNemar mid-p")


def test_a_metrics_difference_carries_its_unit() -> None:
    a = {str(i): 100.0 + i for i in range(10)}
    b = {str(i): 150.0 + i for i in range(10)}
    text = paired_comparison(a, b, higher_is_better=False).render(percent=False, unit="ms")
    assert text.startswith("Δ +50.00 ms (95% CI +50.00 to +50.00 ms)"), text
