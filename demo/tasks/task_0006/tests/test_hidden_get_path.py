import pytest

from configkit import get_path, parse_config

CONFIG = parse_config('[server]\nport = 0\ndebug = off\nbanner = ""\nworkers = []\n')


@pytest.mark.parametrize(
    ("path", "expected"),
    [("server.port", 0), ("server.debug", False), ("server.banner", ""), ("server.workers", [])],
    ids=["zero", "false", "empty-string", "empty-list"],
)
def test_falsy_values_are_returned(path, expected):
    assert get_path(CONFIG, path, default="fallback") == expected


def test_falsy_value_without_default_does_not_raise():
    assert get_path(CONFIG, "server.port") == 0


def test_missing_key_uses_default():
    assert get_path(CONFIG, "server.host", default="localhost") == "localhost"


def test_path_through_a_plain_value_is_missing():
    with pytest.raises(KeyError):
        get_path(CONFIG, "server.port.number")
