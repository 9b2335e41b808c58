import pytest

from configkit import ConfigError, parse_config


def test_basic():
    assert parse_config("name = demo\nport = 8080\n") == {"name": "demo", "port": 8080}


def test_sections():
    text = "debug = off\n[server]\nhost = localhost\nport = 80\n\n[db]\nuser = admin\n"
    assert parse_config(text) == {
        "debug": False,
        "server": {"host": "localhost", "port": 80},
        "db": {"user": "admin"},
    }


def test_comments_are_ignored():
    text = "# global settings\n; old style comment\nkey = value  # trailing note\n"
    assert parse_config(text) == {"key": "value"}


def test_malformed_line_raises():
    with pytest.raises(ConfigError):
        parse_config("[server]\njust some words\n")
