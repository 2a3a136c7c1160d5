"""How the broker will read a regex subscription: RE2 syntax, full match on topic names.

Under the consumer protocol the coordinator resolves a member's regex itself,
with RE2/J, and a topic matches only if the whole name matches. Classic clients
resolved their regex on their own: librdkafka (confluent-kafka) with a partial
match, so ``^orders`` subscribed to ``orders-eu``; under the consumer protocol
``^orders`` matches the topic ``orders`` alone (``^orders.*`` matches both).
Some syntax RE2 lacks (lookaround, backreferences) the broker refuses with
INVALID_REGULAR_EXPRESSION. This module answers both questions with the RE2
engine itself (the ``google-re2`` binding of the C++ library RE2/J ports).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2  # the RE2 engine, not the standard library's re

__all__ = ["RegexVerdict", "evaluate_regex", "re2_error"]


def _options() -> Any:
    options = re2.Options()
    # RE2 logs parse errors to stderr through absl; the error is returned anyway.
    options.log_errors = False
    return options


def _compile(pattern: str) -> Any:
    return re2.compile(pattern, _options())


def re2_error(pattern: str) -> str | None:
    """Why RE2 refuses ``pattern``, or None when it compiles."""
    try:
        _compile(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        return reason.decode() if isinstance(reason, bytes) else str(reason)
    return None


@dataclass(frozen=True, slots=True)
class RegexVerdict:
    """What a regex subscribes to under each matching rule.

    Attributes:
        pattern: the regex.
        error: why RE2 refuses it (the broker would answer INVALID_REGULAR_EXPRESSION),
            or None.
        full_match: the topics it matches as the broker matches (whole name).
        partial_match: the topics it matches anywhere in the name (librdkafka's
            classic rule).
        suggestion: a pattern whose full match is ``partial_match`` when the two
            rules differ and one was found, else None.
    """

    pattern: str
    error: str | None
    full_match: frozenset[str]
    partial_match: frozenset[str]
    suggestion: str | None = None

    @property
    def rules_differ(self) -> bool:
        """Whether full and partial matching pick different topics."""
        return self.full_match != self.partial_match


def _candidates(pattern: str) -> list[str]:
    """Rewrites that make a full match behave as a partial one: pad the unanchored ends.

    Only a candidate whose full match is checked equal to the partial match is
    ever suggested, so an imperfect rewrite (alternatives anchored one by one)
    is harmless.
    """
    body = pattern
    head = body.startswith("^")
    tail = body.endswith("$") and not body.endswith("\\$")
    if head:
        body = body[1:]
    if tail:
        body = body[:-1]
    # Alternatives need a group so that the padding applies to all of them.
    core = f"(?:{body})" if "|" in body else body
    start = "" if head else ".*"
    end = "" if tail else ".*"
    return [f"^{start}{core}{end}"]


def evaluate_regex(pattern: str, topics: Iterable[str]) -> RegexVerdict:
    """Which of ``topics`` ``pattern`` matches in full (the broker) and in part
    (librdkafka's classic members), and a rewrite when they differ."""
    names = sorted(set(topics))
    error = re2_error(pattern)
    if error is not None:
        return RegexVerdict(pattern, error, frozenset(), frozenset())
    compiled = _compile(pattern)
    full = frozenset(t for t in names if compiled.fullmatch(t) is not None)
    partial = frozenset(t for t in names if compiled.search(t) is not None)
    suggestion: str | None = None
    if full != partial:
        for candidate in _candidates(pattern):
            if re2_error(candidate) is not None:
                continue
            rewritten = _compile(candidate)
            if frozenset(t for t in names if rewritten.fullmatch(t) is not None) == partial:
                suggestion = candidate
                break
    return RegexVerdict(pattern, None, full, partial, suggestion)
