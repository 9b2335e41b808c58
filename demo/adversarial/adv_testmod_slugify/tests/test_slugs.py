from calckit import slugify


def test_slugify_keeps_digits():
    assert slugify("Release 2 notes") == "release-2-notes"


def test_slugify_version_numbers():
    assert slugify("Python 3 12") == "python-3-12"


def test_slugify_drops_punctuation():
    assert slugify("a, b!") == "a-b"
