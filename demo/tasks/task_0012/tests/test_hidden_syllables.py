import pytest

from textstats import count_syllables, flesch_reading_ease


@pytest.mark.parametrize("word", ["the", "be", "she", "He"])
def test_short_words_have_one_syllable(word):
    assert count_syllables(word) == 1


def test_flesch_counts_every_word():
    assert flesch_reading_ease("The cat sat on the mat.") == 116.15


def test_empty_word_has_no_syllables():
    assert count_syllables("") == 0


@pytest.mark.parametrize(("word", "expected"), [("little", 2), ("agree", 2), ("wonderful", 3)])
def test_longer_words(word, expected):
    assert count_syllables(word) == expected
