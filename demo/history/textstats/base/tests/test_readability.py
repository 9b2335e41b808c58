import pytest

from textstats import count_syllables, flesch_reading_ease, reading_time_minutes


@pytest.mark.parametrize(
    ("word", "expected"),
    [("cat", 1), ("make", 1), ("table", 2), ("reading", 2), ("banana", 3)],
)
def test_count_syllables(word, expected):
    assert count_syllables(word) == expected


def test_flesch_simple_text_scores_high():
    assert flesch_reading_ease("I like cats. Cats like milk.") > 90


def test_flesch_empty_text():
    assert flesch_reading_ease("") == 0.0


def test_reading_time_rounds_up():
    assert reading_time_minutes("word " * 201) == 2
    assert reading_time_minutes("") == 0
