"""`{% time_tag dt %}`: a timestamp as the dashboard shows it (a <time> the page's script makes
relative), the markup of switchboard/_time.html without an include per row.

The list and the session page render 50-100 of these per view; as an include each cost more
than the rest of its row (template lookup, context push, three `date` filters). The output is
byte for byte the include's: the value in the current time zone, as the `date` filter sees it.
"""

from datetime import datetime

from django import template
from django.utils import dateformat
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import get_default_timezone, template_localtime

register = template.Library()

EMPTY = mark_safe('<span class="muted">—</span>')


@register.simple_tag
def time_tag(value: datetime | None) -> SafeString:
    if not value:
        return EMPTY
    local = template_localtime(value)
    if local.year < 1000:  # strftime would not pad the year as the `date` filter does
        short = dateformat.format(local, "Y-m-d H:i")
        title = dateformat.format(local, "Y-m-d H:i:s T")
    else:
        short = local.strftime("%Y-%m-%d %H:%M")
        title = f"{local:%Y-%m-%d %H:%M:%S} {_zone_abbreviation(local)}"
    return format_html(
        '<time datetime="{}" data-relative title="{}">{}</time>', local.isoformat(), title, short
    )


def _zone_abbreviation(value: datetime) -> str:
    """The `date` filter's "T": the zone's name, blank for an ambiguous or imaginary time."""
    zone = value.tzinfo if value.utcoffset() is not None else get_default_timezone()
    if zone.utcoffset(value.replace(fold=not value.fold)) != zone.utcoffset(value):
        return ""
    return str(zone.tzname(value))
