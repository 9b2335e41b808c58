from textstats import sentences, words


def test_words_drop_punctuation():
    assert words("Hello, world! It is 9 am.") == ["Hello", "world", "It", "is", "9", "am"]


def test_hyphenated_words_stay_whole():
    assert words("a well-known fact") == ["a", "well-known", "fact"]


def test_sentences_split_on_terminators():
    text = "It rained. Did it stop? Yes!"
    assert sentences(text) == ["It rained.", "Did it stop?", "Yes!"]


def test_sentences_keep_abbreviations():
    text = "Bring fruit, e.g. apples or pears. Then leave."
    assert sentences(text) == ["Bring fruit, e.g. apples or pears.", "Then leave."]


def test_sentences_of_empty_text():
    assert sentences("") == []
    assert sentences("   ") == []
