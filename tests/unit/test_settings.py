"""The shared readers of a user's config dict (kgroup._settings)."""

from __future__ import annotations

import pytest

from kgroup._settings import bool_setting, text_setting
from kgroup.errors import ConfigError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        ("FALSE", False),
        (" true ", True),
        # librdkafka's other spellings (rdkafka_conf.c), which confluent-kafka
        # applications use, "0"/"1" from environment variables above all.
        ("t", True),
        ("F", False),
        ("1", True),
        ("0", False),
        (1, True),
        (0, False),
    ],
)
def test_a_boolean_setting_reads_bools_and_their_text(value: object, expected: bool) -> None:
    assert bool_setting({"k": value}, "k", not expected) is expected


def test_a_boolean_setting_names_the_key_of_a_value_it_cannot_read() -> None:
    with pytest.raises(ConfigError, match="k must be true or false, got 'yes'"):
        bool_setting({"k": "yes"}, "k", True)


def test_a_text_setting_is_stripped_and_absent_is_none() -> None:
    assert text_setting({"k": " rack-1 "}, "k") == "rack-1"
    assert text_setting({}, "k") is None


@pytest.mark.parametrize("value", ["", "   ", 7])
def test_an_empty_or_non_text_setting_is_refused_naming_key_and_value(value: object) -> None:
    with pytest.raises(ConfigError, match=f"k must be a non-empty string, got {value!r}"):
        text_setting({"k": value}, "k")


def test_a_secret_text_setting_keeps_its_spaces_and_is_never_echoed() -> None:
    assert text_setting({"pw": " s3cret "}, "pw", echo=False, strip=False) == " s3cret "
    with pytest.raises(ConfigError) as caught:
        text_setting({"pw": b"s3cret"}, "pw", echo=False, strip=False)
    assert "s3cret" not in str(caught.value)
    assert "pw must be a non-empty string" in str(caught.value)
