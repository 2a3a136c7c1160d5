"""kgroup.admin.regex: RE2's verdict on a subscription regex, full vs partial matching."""

from __future__ import annotations

import pytest

from kgroup.admin import evaluate_regex
from kgroup.admin.regex import re2_error

TOPICS = ["orders", "orders-eu", "orders-us", "eu-orders", "payments"]


def test_a_caret_prefix_matches_only_the_exact_name_in_full() -> None:
    verdict = evaluate_regex("^orders", TOPICS)
    assert verdict.error is None
    assert verdict.full_match == {"orders"}
    assert verdict.partial_match == {"orders", "orders-eu", "orders-us"}
    assert verdict.rules_differ
    assert verdict.suggestion == "^orders.*"
    # The suggestion is checked, not guessed: its full match is the partial one.
    assert evaluate_regex("^orders.*", TOPICS).full_match == verdict.partial_match


def test_an_unanchored_regex_is_padded_on_both_sides() -> None:
    verdict = evaluate_regex("orders", TOPICS)
    assert verdict.partial_match == {"orders", "orders-eu", "orders-us", "eu-orders"}
    assert verdict.suggestion == "^.*orders.*"


def test_alternatives_are_grouped_before_padding() -> None:
    verdict = evaluate_regex("eu|us", TOPICS)
    assert verdict.full_match == frozenset()
    assert verdict.suggestion == "^.*(?:eu|us).*"


def test_a_regex_matching_whole_names_needs_no_rewrite() -> None:
    verdict = evaluate_regex("orders-(eu|us)", TOPICS)
    assert verdict.full_match == verdict.partial_match == {"orders-eu", "orders-us"}
    assert not verdict.rules_differ
    assert verdict.suggestion is None


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("orders(?=-eu)", "perl operator"),
        (r"(o)\1", "escape"),
        ("orders(", "missing )"),
    ],
)
def test_syntax_re2_lacks_is_refused_with_the_reason(pattern: str, reason: str) -> None:
    verdict = evaluate_regex(pattern, TOPICS)
    assert verdict.error is not None
    assert reason in verdict.error
    assert verdict.full_match == verdict.partial_match == frozenset()
    assert re2_error(pattern) == verdict.error


def test_re2_accepts_what_it_supports() -> None:
    assert re2_error(r"orders-\d+") is None
    assert re2_error("(?i)Orders.*") is None
