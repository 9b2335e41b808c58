from calckit import slugify


def test_slugify_keeps_digits():
    assert slugify("Release 2 notes") == "release-2-notes"
