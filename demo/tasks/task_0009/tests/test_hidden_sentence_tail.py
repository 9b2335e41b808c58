from textstats import flesch_reading_ease, sentences


def test_last_sentence_without_punctuation():
    assert sentences("It rained. Then it stopped") == ["It rained.", "Then it stopped"]


def test_text_without_any_terminator():
    assert sentences("just a fragment") == ["just a fragment"]


def test_flesch_counts_the_unterminated_sentence():
    assert flesch_reading_ease("I ran home. I sat down") == flesch_reading_ease("I ran home. I sat down.")


def test_terminated_text_is_unchanged():
    assert sentences("One. Two!  ") == ["One.", "Two!"]
