"""E4M3, E2M1 and E8M0 casts against values decoded by hand from the bit layouts."""

import math

import pytest
import torch

from opencomposer.kernels.float_formats import (
    decode_e2m1,
    decode_e4m3,
    decode_e8m0,
    encode_e2m1,
    encode_e4m3,
    floor_log2,
)


def e4m3_by_hand(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa / 8 * 2.0**-6
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


E2M1_BY_HAND = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_every_e4m3_code_decodes_and_reencodes() -> None:
    codes = torch.arange(256, dtype=torch.uint8)
    expected = torch.tensor([e4m3_by_hand(c) for c in range(256)])
    decoded = decode_e4m3(codes)
    assert torch.equal(decoded.isnan(), expected.isnan())
    finite = ~expected.isnan()
    assert torch.equal(decoded[finite], expected[finite])
    assert torch.equal(encode_e4m3(decoded[finite]), codes[finite])
    assert decoded[0x7E].item() == 448.0 and decoded[0x01].item() == 2.0**-9


def test_e4m3_midpoints_round_to_even() -> None:
    # Each positive finite code and its successor: the midpoint goes to the even code.
    lo = torch.tensor([e4m3_by_hand(c) for c in range(0x7E)], dtype=torch.float64)
    hi = torch.tensor([e4m3_by_hand(c + 1) for c in range(0x7E)], dtype=torch.float64)
    mid = ((lo + hi) / 2).float()
    assert torch.equal(((lo + hi) / 2).float().double(), (lo + hi) / 2)  # exact in float32
    even = torch.arange(0x7E) + torch.arange(0x7E) % 2  # the even one of (c, c + 1)
    assert torch.equal(encode_e4m3(mid).long(), even)
    assert torch.equal(encode_e4m3(-mid).long(), even | 0x80)


def test_e4m3_saturates_instead_of_nan() -> None:
    x = torch.tensor([449.0, 464.0, 480.0, 1e6, math.inf, -500.0, -math.inf])
    assert encode_e4m3(x).tolist() == [0x7E] * 5 + [0xFE] * 2
    assert encode_e4m3(torch.tensor([math.nan])).item() & 0x7F == 0x7F


def test_e4m3_subnormals() -> None:
    # 2**-10 ties between 0 and 2**-9 (even: 0); 1.5 * 2**-9 ties between codes 1 and 2.
    x = torch.tensor([2.0**-10, 1.5 * 2.0**-9, 1.25 * 2.0**-9, 7.5 * 2.0**-9, 2.0**-11, 2.0**-30])
    assert encode_e4m3(x).tolist() == [0, 2, 1, 8, 0, 0]


def test_every_e2m1_code_decodes_and_reencodes() -> None:
    codes = torch.arange(16, dtype=torch.uint8)
    expected = torch.tensor(E2M1_BY_HAND + [-v for v in E2M1_BY_HAND])
    decoded = decode_e2m1(codes)
    assert torch.equal(decoded, expected)
    assert torch.equal(encode_e2m1(decoded), codes)  # -0.0 keeps its sign: code 8


def test_e2m1_midpoints_round_to_even_and_saturate() -> None:
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert encode_e2m1(mids).tolist() == [0, 2, 2, 4, 4, 6, 6]
    assert encode_e2m1(-mids).tolist() == [8, 10, 10, 12, 12, 14, 14]
    just_above = torch.nextafter(mids, torch.tensor(math.inf))
    assert encode_e2m1(just_above).tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert encode_e2m1(torch.tensor([6.5, 1e30, -7.0])).tolist() == [7, 7, 15]


def test_e8m0_and_floor_log2() -> None:
    codes = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    expected = [2.0**-127, 2.0**-126, 0.5, 1.0, 2.0, 2.0**127]
    assert decode_e8m0(codes)[:-1].tolist() == expected
    assert decode_e8m0(codes)[-1].isnan()
    x = torch.tensor([1.0, 1.9999999, 2.0, 3.0, 0.75, 2.0**-149, 3.4e38])
    assert floor_log2(x).tolist() == [0, 0, 1, 1, -1, -149, 127]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_e4m3_from_narrow_dtypes(dtype: torch.dtype) -> None:
    x = torch.tensor([1.0, 3.0, 300.0, -0.0078125], dtype=dtype)
    assert torch.equal(encode_e4m3(x), encode_e4m3(x.float()))
