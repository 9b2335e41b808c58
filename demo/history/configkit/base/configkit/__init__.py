"""configkit: a small parser for ``key = value`` configuration files."""

from configkit.config import ConfigError, dump_config, get_path, merge_configs, parse_config
from configkit.values import parse_value

__all__ = ["ConfigError", "dump_config", "get_path", "merge_configs", "parse_config", "parse_value"]
__version__ = "0.3.1"
