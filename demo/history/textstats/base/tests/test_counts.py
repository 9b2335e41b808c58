from textstats import average_word_length, top_words, word_count, word_frequencies


def test_word_count():
    assert word_count("The quick brown fox jumps over the lazy dog.") == 9
    assert word_count("") == 0


def test_word_frequencies_ignore_case():
    assert word_frequencies("The cat and the hat")["the"] == 2


def test_top_words_most_frequent_first():
    text = "red blue red green red blue"
    assert top_words(text, n=2) == [("red", 3), ("blue", 2)]


def test_top_words_stopwords():
    assert top_words("the cat the mat the cat", n=1, stopwords=["The"]) == [("cat", 2)]


def test_average_word_length():
    assert average_word_length("ab abcd") == 3.0
    assert average_word_length("...") == 0.0
