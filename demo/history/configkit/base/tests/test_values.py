from configkit import parse_value


def test_booleans():
    assert parse_value("true") is True
    assert parse_value(" Yes ") is True
    assert parse_value("off") is False


def test_numbers():
    assert parse_value("42") == 42
    assert parse_value("-7") == -7
    assert parse_value("2.5") == 2.5


def test_quoted_strings_lose_their_quotes():
    assert parse_value('"hello world"') == "hello world"
    assert parse_value("'42'") == "42"


def test_lists():
    assert parse_value("[1, 2, 3]") == [1, 2, 3]
    assert parse_value("[red, green,]") == ["red", "green"]


def test_words_stay_strings():
    assert parse_value("inf") == "inf"
    assert parse_value("localhost") == "localhost"
