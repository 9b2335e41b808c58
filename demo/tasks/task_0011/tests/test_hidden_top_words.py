from textstats import top_words


def test_ties_are_alphabetical():
    text = "pear apple pear apple fig"
    assert top_words(text, n=3) == [("apple", 2), ("pear", 2), ("fig", 1)]


def test_ties_do_not_depend_on_word_order():
    expected = [("a", 1), ("b", 1), ("c", 1)]
    assert top_words("b a c", n=3) == expected
    assert top_words("c b a", n=3) == expected


def test_n_limits_the_result():
    assert len(top_words("one two three four", n=2)) == 2


def test_higher_counts_come_first():
    assert top_words("x y y z z z", n=3)[0] == ("z", 3)
