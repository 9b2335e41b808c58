from configkit import parse_config


def test_value_may_contain_equals_sign():
    text = "dsn = postgres://app@db/shop?sslmode=require\n"
    assert parse_config(text) == {"dsn": "postgres://app@db/shop?sslmode=require"}


def test_quoted_value_with_comparison():
    assert parse_config('[rules]\nexpr = "a == b"\n') == {"rules": {"expr": "a == b"}}


def test_simple_pairs_still_work():
    assert parse_config("a = 1\nb=two\n") == {"a": 1, "b": "two"}
