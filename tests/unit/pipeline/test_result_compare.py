from __future__ import annotations

import pytest

from pipeline.transcript.result_compare import Result, normal_rows, results_match, soft_f1


def _result(rows: list[list[object]], *, total: int | None = None, ordered: bool = False) -> Result:
    return Result(rows=normal_rows(rows), total_rows=total, ordered=ordered)


def test_column_order_is_free() -> None:
    assert results_match(_result([["EWR", 3], ["JFK", 2]]), _result([[3, "EWR"], [2, "JFK"]]))


def test_row_order_counts_only_when_both_queries_order() -> None:
    a, b = [["EWR", 3], ["JFK", 2]], [["JFK", 2], ["EWR", 3]]
    assert results_match(_result(a), _result(b))
    assert not results_match(_result(a, ordered=True), _result(b, ordered=True))
    assert results_match(_result(a, ordered=True), _result(b))


def test_numbers_match_within_tolerance_and_numeric_strings_are_numbers() -> None:
    assert results_match(_result([["UA", "245"]]), _result([["UA", 245.0000001]]))
    assert not results_match(_result([["UA", 245]]), _result([["UA", 246]]))
    assert not results_match(_result([["1"]]), _result([[True]]))


def test_bags_compare_multiplicity_and_total_rows() -> None:
    assert not results_match(_result([[1], [1], [2]]), _result([[1], [2], [2]]))
    assert not results_match(_result([[1]], total=1), _result([[1]], total=500))
    assert results_match(_result([[1]], total=1), _result([[1]]))


def test_object_rows_of_the_older_payload_normalise_like_arrays() -> None:
    objects = normal_rows([{"status": "done", "count": "245"}])
    assert results_match(Result(objects), _result([[245, "done"]]))


def test_soft_f1_gives_partial_credit_per_cell_with_rows_in_any_order() -> None:
    want = Result(rows=normal_rows([["EWR", 120835], ["JFK", 111279], ["LGA", 104662]]))
    same_bag = Result(rows=normal_rows([["LGA", 104662], [120835, "EWR"], ["JFK", 111279]]))
    assert soft_f1(same_bag, want) == 1.0
    one_count_wrong = Result(rows=normal_rows([["EWR", 120835], ["JFK", 1], ["LGA", 104662]]))
    assert soft_f1(one_count_wrong, want) == pytest.approx(10 / 12)
    missing_row = Result(rows=normal_rows([["JFK", 111279], ["EWR", 120835]]))
    assert soft_f1(missing_row, want) == pytest.approx(8 / 10)
    assert soft_f1(Result(rows=()), want) == 0.0
    assert soft_f1(Result(rows=()), Result(rows=())) == 1.0


def test_soft_f1_pairs_each_row_once_best_pair_first() -> None:
    want = Result(rows=normal_rows([["a", 1], ["a", 2]]))
    got = Result(rows=normal_rows([["a", 2], ["a", 2]]))
    # ("a", 2) pairs with its equal (2 cells); the other ("a", 2) with ("a", 1) (1 cell).
    assert soft_f1(got, want) == pytest.approx(6 / 8)
