from datetime import date

import pytest

from billing.proration import apply_discount, days_between, downgrade_credit, prorate, split_evenly

MARCH, APRIL = date(2025, 3, 1), date(2025, 4, 1)


class TestDaysBetween:
    def test_half_open(self):
        assert days_between(MARCH, APRIL) == 31
        assert days_between(date(2024, 2, 1), date(2024, 3, 1)) == 29

    def test_same_day_is_empty(self):
        assert days_between(MARCH, MARCH) == 0

    def test_backwards_rejected(self):
        with pytest.raises(ValueError):
            days_between(APRIL, MARCH)


class TestProrate:
    def test_whole_period(self):
        assert prorate(3100, MARCH, APRIL, MARCH, APRIL) == 3100

    def test_part_of_period(self):
        assert prorate(3100, MARCH, APRIL, date(2025, 3, 11), APRIL) == 2100
        assert prorate(3100, MARCH, APRIL, MARCH, date(2025, 3, 2)) == 100

    def test_rounds_half_up(self):
        # 1000 * 15 / 31 = 483.87 -> 484 ; 1000 * 1 / 31 = 32.26 -> 32 ; 5 * 1 / 2 = 2.5 -> 3
        assert prorate(1000, MARCH, APRIL, date(2025, 3, 17), APRIL) == 484
        assert prorate(1000, MARCH, APRIL, MARCH, date(2025, 3, 2)) == 32
        assert prorate(5, date(2025, 1, 1), date(2025, 1, 3), date(2025, 1, 2), date(2025, 1, 3)) == 3

    def test_clipped_to_the_period(self):
        assert prorate(3100, MARCH, APRIL, date(2025, 2, 1), date(2025, 3, 11)) == 1000
        assert prorate(3100, MARCH, APRIL, date(2025, 3, 21), date(2025, 5, 1)) == 1100
        assert prorate(3100, MARCH, APRIL, date(2025, 1, 1), date(2025, 6, 1)) == 3100

    def test_no_overlap_is_free(self):
        assert prorate(3100, MARCH, APRIL, date(2025, 1, 1), date(2025, 2, 1)) == 0
        assert prorate(3100, MARCH, APRIL, date(2025, 5, 1), date(2025, 6, 1)) == 0
        assert prorate(3100, MARCH, APRIL, date(2025, 3, 10), date(2025, 3, 10)) == 0

    def test_empty_period_rejected(self):
        with pytest.raises(ValueError):
            prorate(3100, MARCH, MARCH, MARCH, APRIL)

    def test_backwards_period_rejected(self):
        with pytest.raises(ValueError):
            prorate(3100, APRIL, MARCH, MARCH, APRIL)


class TestSplitEvenly:
    def test_exact(self):
        assert split_evenly(900, 3) == [300, 300, 300]

    def test_remainder_goes_first(self):
        assert split_evenly(1000, 3) == [334, 333, 333]
        assert split_evenly(1001, 3) == [334, 334, 333]
        assert split_evenly(2, 4) == [1, 1, 0, 0]

    @pytest.mark.parametrize(("amount", "parts"), [(1, 1), (7, 7), (100, 7), (99999, 13)])
    def test_sums_back(self, amount, parts):
        shares = split_evenly(amount, parts)
        assert sum(shares) == amount and len(shares) == parts
        assert max(shares) - min(shares) <= 1 and shares == sorted(shares, reverse=True)

    @pytest.mark.parametrize("parts", [0, -1])
    def test_parts_must_be_positive(self, parts):
        with pytest.raises(ValueError):
            split_evenly(100, parts)


class TestApplyDiscount:
    def test_plain(self):
        assert apply_discount(1000, 10) == 900
        assert apply_discount(1000, 0) == 1000
        assert apply_discount(1000, 100) == 0

    def test_discount_rounds_half_up(self):
        assert apply_discount(150, 1) == 148  # 1.5 off -> 2
        assert apply_discount(149, 1) == 148  # 1.49 off -> 1
        assert apply_discount(999, 15) == 849  # 149.85 off -> 150

    @pytest.mark.parametrize("percent", [-1, 101])
    def test_out_of_range(self, percent):
        with pytest.raises(ValueError):
            apply_discount(1000, percent)


class TestDowngradeCredit:
    def test_downgrade_halfway(self):
        # 16 of 31 days left: 19900 -> 10271, 4900 -> 2529
        assert downgrade_credit(19900, 4900, MARCH, APRIL, date(2025, 3, 16)) == 10271 - 2529

    def test_on_first_day_credits_the_difference(self):
        assert downgrade_credit(19900, 4900, MARCH, APRIL, MARCH) == 15000

    def test_at_period_end_nothing(self):
        assert downgrade_credit(19900, 4900, MARCH, APRIL, APRIL) == 0

    def test_upgrade_owes_nothing_back(self):
        assert downgrade_credit(4900, 19900, MARCH, APRIL, date(2025, 3, 16)) == 0
