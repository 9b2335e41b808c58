import copy

from configkit import merge_configs


def test_merge_does_not_modify_base():
    base = {"server": {"host": "localhost", "port": 80}}
    before = copy.deepcopy(base)
    merge_configs(base, {"server": {"port": 8080}})
    assert base == before


def test_result_does_not_share_sections_with_override():
    override = {"db": {"user": "admin"}}
    merged = merge_configs({}, override)
    merged["db"]["user"] = "root"
    assert override == {"db": {"user": "admin"}}


def test_defaults_can_be_reused():
    defaults = {"server": {"port": 80}}
    first = merge_configs(defaults, {"server": {"port": 8080}})
    second = merge_configs(defaults, {"server": {"host": "example.com"}})
    assert first == {"server": {"port": 8080}}
    assert second == {"server": {"port": 80, "host": "example.com"}}


def test_top_level_keys_are_replaced():
    assert merge_configs({"a": 1, "b": 2}, {"b": 3}) == {"a": 1, "b": 3}
