from textstats import sentences


def test_capitalised_titles_do_not_end_sentences():
    text = "Dr. Smith is in. Mr. Jones is out."
    assert sentences(text) == ["Dr. Smith is in.", "Mr. Jones is out."]


def test_abbreviation_in_the_middle():
    text = "We met Prof. Adams today. She smiled."
    assert sentences(text) == ["We met Prof. Adams today.", "She smiled."]


def test_lowercase_abbreviation():
    text = "Apples, pears, etc. are fruit. Good."
    assert sentences(text) == ["Apples, pears, etc. are fruit.", "Good."]


def test_ordinary_words_still_end_sentences():
    assert sentences("Call the doctor. Now!") == ["Call the doctor.", "Now!"]
