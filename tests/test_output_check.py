"""The output comparison: exact errors, tolerances and flags on hand-made tensors."""

import math

import torch

from profreport.analysis.output_check import compare_outputs, tolerance


def test_identical_outputs_are_within_tolerance_with_zero_error():
    x = torch.tensor([[1.0, -2.0], [3.0, 0.5]])
    check = compare_outputs([x.clone()], [x])
    assert check.to_json() == {
        "max_abs_err": 0.0,
        "max_rel_err": 0.0,
        "atol": 1e-5,
        "rtol": 1e-4,
        "within_tolerance": True,
        "compared_tensors": 1,
        "note": "",
    }


def test_errors_are_the_largest_difference_and_its_ratio_to_eagers_largest_magnitude():
    expected = torch.tensor([1.0, -2.0, 4.0])
    actual = torch.tensor([1.0, -2.25, 4.0])  # off by 0.25 where eager has -2
    check = compare_outputs([actual], [expected])
    assert check.max_abs_err == 0.25
    assert check.max_rel_err == 0.25 / 4.0  # norm-wise: against max |eager| = 4
    assert check.within_tolerance is False  # 0.25 > 1e-5 + 1e-4 * 4


def test_the_rule_is_norm_wise_so_an_element_near_zero_does_not_fail_alone():
    expected = torch.tensor([0.0, 2.0])
    actual = torch.tensor([2.0**-13, 2.0])  # 1.2e-4 off where eager is 0
    check = compare_outputs([actual], [expected])
    assert check.max_abs_err == 2.0**-13
    assert check.max_rel_err == 2.0**-14
    assert check.within_tolerance is True  # 1.2e-4 <= 1e-5 + 1e-4 * 2
    assert not torch.allclose(actual, expected, rtol=1e-4, atol=1e-5)  # element-wise would fail


def test_worst_pair_sets_the_reported_tolerance_and_maxima_span_all_pairs():
    half = torch.tensor([1.0, 2.0], dtype=torch.float16)
    single = torch.tensor([8.0, 0.0])
    check = compare_outputs(
        [half + torch.tensor([0.0, 2.0**-10], dtype=torch.float16), single + 0.5],
        [half, single],
    )
    assert check.max_abs_err == 0.5
    assert check.max_rel_err == 0.5 / 8.0
    assert (check.rtol, check.atol) == (1e-4, 1e-5)  # the float32 pair is the one that fails
    assert check.within_tolerance is False
    assert check.compared_tensors == 2


def test_nan_in_both_is_equal_but_on_one_side_is_infinite_error():
    expected = torch.tensor([float("nan"), 1.0, float("inf")])
    same = compare_outputs([expected.clone()], [expected])
    assert same.max_abs_err == 0.0 and same.within_tolerance is True
    broken = compare_outputs([torch.tensor([1.0, float("nan"), float("inf")])], [expected])
    assert math.isinf(broken.max_abs_err)
    assert broken.within_tolerance is False
    assert broken.note == "NaN or infinity where eager's output differs"


def test_integers_must_be_equal():
    check = compare_outputs([torch.tensor([1, 2, 4])], [torch.tensor([1, 2, 3])])
    assert (check.max_abs_err, check.rtol, check.atol) == (1.0, 0.0, 0.0)
    assert check.within_tolerance is False
    assert compare_outputs([torch.tensor([True])], [torch.tensor([True])]).within_tolerance


def test_a_different_structure_is_flagged():
    a = torch.zeros(2, 3)
    fewer = compare_outputs([a], [a, a])
    assert fewer.within_tolerance is False
    assert fewer.note == "output structure differs: 1 tensor(s), eager has 2"
    assert fewer.compared_tensors == 1 and fewer.max_abs_err == 0.0
    reshaped = compare_outputs([torch.zeros(3, 2)], [a])
    assert reshaped.to_json() == {
        "max_abs_err": None,
        "max_rel_err": None,
        "atol": None,
        "rtol": None,
        "within_tolerance": False,
        "compared_tensors": 0,
        "note": "tensor 0: shape 3x2, eager's 2x3 (not compared)",
    }
    other_dtype = compare_outputs([a.double()], [a])
    assert other_dtype.within_tolerance is False
    assert other_dtype.note == "tensor 0: dtype float64, eager's float32"


def test_nothing_to_compare_is_neither_pass_nor_fail():
    check = compare_outputs([], [])
    assert check.within_tolerance is None and check.note == "no tensor outputs to compare"


def test_tolerances_per_dtype():
    assert tolerance(torch.float32) == (1e-4, 1e-5)
    assert tolerance(torch.float16) == (1e-3, 1e-3)
    assert tolerance(torch.bfloat16) == (1.6e-2, 1e-5)
    assert tolerance(torch.float64) == (1e-5, 1e-8)
    assert tolerance(torch.complex64) == (1e-4, 1e-5)
    assert tolerance(torch.float8_e4m3fn) == (0.25, 1e-5)  # 2 x eps = 2 x 0.125
    assert tolerance(torch.int64) == (0.0, 0.0)
