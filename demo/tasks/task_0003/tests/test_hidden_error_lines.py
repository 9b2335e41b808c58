import pytest

from configkit import ConfigError, parse_config


def test_error_reports_the_offending_line():
    with pytest.raises(ConfigError) as excinfo:
        parse_config("name = shop\n[server]\nport 8080\n")
    assert excinfo.value.lineno == 3
    assert str(excinfo.value).startswith("line 3:")


def test_error_on_first_line_is_line_one():
    with pytest.raises(ConfigError) as excinfo:
        parse_config("[unterminated\nkey = value\n")
    assert excinfo.value.lineno == 1


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        parse_config("= value\n")
