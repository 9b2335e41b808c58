from configkit import dump_config, parse_config, parse_value


def test_empty_double_quoted_string():
    assert parse_value('""') == ""


def test_empty_single_quoted_string_in_a_file():
    assert parse_config("prefix = ''\n") == {"prefix": ""}


def test_empty_string_round_trips():
    config = {"suffix": "", "server": {"path": ""}}
    assert parse_config(dump_config(config)) == config


def test_one_character_strings():
    assert parse_value('"x"') == "x"
    assert parse_value("'7'") == "7"
