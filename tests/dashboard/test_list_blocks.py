"""The list pages' shared blocks (issue 26 §5): the pager (`_pager.html`) and the refused-filters
message (`_filter_errors.html`), written once and included by every keyset-paged list: sessions,
the handoff queue, the audit log, tasks."""

from pathlib import Path

import pytest
from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

LISTS = {
    "switchboard/session_list.html": "dashboard:session_list",
    "switchboard/handoff_queue.html": "dashboard:handoff_queue",
    "switchboard/audit_log.html": "dashboard:audit_log",
    "tasks_app/task_list.html": "tasks:list",
}
TEMPLATES = Path(settings.BASE_DIR) / "templates"


def test_the_blocks_are_written_once_and_every_list_includes_them():
    pagers, refusals = [], []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        if 'class="pager"' in text:
            pagers.append(path.name)
        if "These filters cannot be used" in text:
            refusals.append(path.name)
    assert (pagers, refusals) == (["_pager.html"], ["_filter_errors.html"])
    for name in LISTS:
        text = (TEMPLATES / name).read_text()
        assert '{% include "_pager.html"' in text, name
        assert '{% include "_filter_errors.html"' in text, name


def test_the_pager_links_swap_the_lists_own_results():
    context = {"is_first_page": False, "first_query": "a=1", "next_query": "cursor=x"}
    html = render_to_string("_pager.html", {**context, "target": "#audit-results"})
    assert html.count('hx-target="#audit-results"') == 2
    assert 'href="?a=1"' in html and ">First page<" in html
    assert 'href="?cursor=x"' in html and ">Next page →<" in html
    named = render_to_string(
        "_pager.html", {**context, "target": "#t", "first_label": "Newest", "next_label": "Older"}
    )
    assert ">Newest<" in named and ">Older<" in named
    last = {"is_first_page": True, "first_query": "a=1", "next_query": "", "target": "#t"}
    assert "<a" not in render_to_string("_pager.html", last)


@pytest.mark.django_db
@pytest.mark.parametrize("template", LISTS)
def test_each_list_refuses_bad_filters_linking_back_to_itself(team, template):
    url = reverse(LISTS[template], args=[team.project.pk])
    response = team.client("admin").get(url, {"cursor": "not-a-cursor"})
    assert response.status_code == 400
    assert template in [t.name for t in response.templates]
    page = response.content.decode()
    assert "These filters cannot be used." in page
    assert f'<a href="{url}">start again with no filters</a>' in page
