from configkit import parse_config


def test_hash_inside_double_quotes_is_kept():
    assert parse_config('password = "s3cr3t #42"\n') == {"password": "s3cr3t #42"}


def test_hash_inside_single_quotes_then_real_comment():
    assert parse_config("motto = 'we are # 1'  # team slogan\n") == {"motto": "we are # 1"}


def test_trailing_comment_after_plain_value():
    assert parse_config("port = 8080 # default port\n") == {"port": 8080}


def test_hash_without_space_is_part_of_the_value():
    assert parse_config("channel = irc#python\n") == {"channel": "irc#python"}
