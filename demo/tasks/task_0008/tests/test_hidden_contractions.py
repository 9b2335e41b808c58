from textstats import top_words, word_count, words


def test_contractions_are_one_word():
    assert words("Don't stop, it's fine.") == ["Don't", "stop", "it's", "fine"]


def test_word_count_with_contractions():
    assert word_count("I can't and I won't.") == 5


def test_typographic_apostrophe():
    assert words("We’re here") == ["We’re", "here"]


def test_contractions_do_not_create_fake_words():
    assert [word for word, _ in top_words("don't won't can't", n=10) if word == "t"] == []


def test_quotes_around_words_are_dropped():
    assert words("'hello' said the 'user'") == ["hello", "said", "the", "user"]
