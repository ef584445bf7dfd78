"""{% time_tag %} renders exactly what the _time.html include rendered."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.template import engines
from django.utils import timezone as dj_timezone

# The include's original markup, kept here as the reference the tag must reproduce.
INCLUDE = (
    '{% if dt %}<time datetime="{{ dt|date:\'c\' }}" data-relative title="{{ dt|date:'
    '\'Y-m-d H:i:s T\' }}">{{ dt|date:"Y-m-d H:i" }}</time>{% else %}<span class="muted">'
    "—</span>{% endif %}"
)


def render(source, value):
    return engines["django"].from_string(source).render({"dt": value})


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 25, 23, 30, 6, 123456, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2026, 3, 29, 1, 30),  # naive
        datetime(2026, 3, 29, 2, 30),  # naive, imaginary in Paris
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC),  # 01:30 in New York, the hour that repeats
        datetime(2026, 11, 1, 6, 30, tzinfo=UTC),  # 01:30 again, the second time
        datetime(999, 1, 1, 0, 0, tzinfo=UTC),
        None,
        "",
    ],
)
@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/New_York"])
def test_the_tag_renders_the_include_markup(value, zone):
    with dj_timezone.override(zone):
        expected = render(INCLUDE, value)
        assert render("{% load switchboard_time %}{% time_tag dt %}", value) == expected
        assert render('{% include "_time.html" %}', value) == expected
