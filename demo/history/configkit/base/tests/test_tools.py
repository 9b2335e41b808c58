import pytest

from configkit import dump_config, get_path, merge_configs, parse_config


def test_merge_override_wins():
    base = {"name": "app", "server": {"host": "localhost", "port": 80}}
    override = {"server": {"port": 8080}, "debug": True}
    assert merge_configs(base, override) == {
        "name": "app",
        "server": {"host": "localhost", "port": 8080},
        "debug": True,
    }


def test_get_path_finds_nested_values():
    config = {"server": {"host": "localhost"}}
    assert get_path(config, "server.host") == "localhost"
    assert get_path(config, "server.missing", default="x") == "x"


def test_get_path_without_default_raises():
    with pytest.raises(KeyError):
        get_path({"server": {}}, "server.host")


def test_dump_round_trip():
    config = {"name": "app", "tags": ["a", "b"], "server": {"port": 80, "tls": False}}
    assert parse_config(dump_config(config)) == config
