"""At 1024 px and at phone width (390 px) every main page stays usable: the page as a whole
never scrolls sideways (a wide table scrolls inside its own container instead). Each page is
also screenshotted at 1440, 1024 and 390 px (test-artifacts/layout-<page>-<width>.png)."""

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from core.models import Project
from handoffs_app.models import Handoff, HandoffStatus
from sessions_app.services.events import EventDraft
from tasks_app.models import Task
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import append
from tests.factories import make_session, make_task

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (1440, 1024, 390)
PAGES = {
    "overview": "/p/{p}/",
    "sessions": "/p/{p}/sessions/",
    "sessions-search": "/p/{p}/sessions/?q=refund",
    "tasks": "/p/{p}/tasks/",
    "handoffs": "/p/{p}/handoffs/",
    "retention": "/p/{p}/retention/",
    "settings": "/p/{p}/settings/",
    "members": "/p/{p}/members/",
    "keys": "/p/{p}/keys/",
    "audit": "/p/{p}/audit/",
    "webhooks": "/p/{p}/webhooks/",
}


# What sticks out past the window's right edge (outside any scrolling box): the failure's hint.
WIDEST = """() => [...document.querySelectorAll('body *')]
  .filter(el => el.getBoundingClientRect().right > window.innerWidth + 0.5
    && !el.closest('.table-scroll'))
  .slice(0, 5).map(el => el.tagName + '.' + el.className + ' ' + el.getBoundingClientRect().right)"""


@pytest.fixture
def demo():
    """The demo project (sessions of every status, tasks, handoffs waiting), plus rows with
    long unbroken text, the kind that pushes a table wider than a phone."""
    call_command("seed_demo", "--force", "--long-log", "30", stdout=io.StringIO())
    project = Project.objects.get(name="demo")
    long = make_session(
        project,
        agent="an-agent-with-a-rather-long-name",
        title="A-title-with-no-spaces-at-all-" * 4,
        external_id="ext-" + "x" * 90,
        budget_max_tokens=1000,
    )
    append(
        long,
        EventDraft(
            kind="message",
            role="user",
            content={"text": "refund " + "verylongwordwithoutanybreak" * 8},
            tokens=900,
        ),
    )
    make_task(project, external_id="task-" + "y" * 80, session_ids=[str(long.pk)])
    return project


def test_main_pages_never_scroll_sideways_at_1024_and_390(demo, live_url, page, screenshot):
    sign_in(page, live_url, "admin", "switchboard-admin")
    overflowing = []
    for name, path in PAGES.items():
        url = live_url + path.format(p=demo.pk)
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(url)
            expect(page.locator("main h1:visible, main h2:visible").first).to_be_visible()
            page.wait_for_load_state("networkidle")
            scroll_width, inner_width = page.evaluate(
                "[document.documentElement.scrollWidth, window.innerWidth]"
            )
            screenshot(f"layout-{name}-{width}")
            if scroll_width > inner_width:
                overflowing.append((name, width, scroll_width, inner_width, page.evaluate(WIDEST)))
    assert overflowing == []


def test_a_wide_table_scrolls_inside_its_container_at_phone_width(demo, live_url, page):
    sign_in(page, live_url, "admin", "switchboard-admin")
    page.set_viewport_size({"width": 390, "height": 900})
    page.goto(f"{live_url}/p/{demo.pk}/sessions/")
    box = page.locator(".results .table-scroll")
    expect(box).to_be_visible()
    scroll_width, client_width, overflow = box.evaluate(
        "el => [el.scrollWidth, el.clientWidth, getComputedStyle(el).overflowX]"
    )
    assert overflow == "auto" and scroll_width > client_width  # the table scrolls, in its box
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # The navigation stays reachable: every link of the main menu is on screen.
    for link in page.locator(".mainnav a").all():
        link_box = link.bounding_box()
        assert link_box and link_box["x"] >= 0 and link_box["x"] + link_box["width"] <= 390


def test_filter_checkboxes_sit_beside_their_labels_at_phone_width(demo, live_url, page):
    """Each choice of a filter's checkbox group (the handoff queue's kinds, statuses, "show
    only") is one line, its box right before its words: the row wraps between choices, never
    inside one ("Take-over" stacked beside a full-width box)."""
    sign_in(page, live_url, "admin", "switchboard-admin")
    page.set_viewport_size({"width": 390, "height": 900})
    page.goto(f"{live_url}/p/{demo.pk}/handoffs/")
    labels = page.locator(".filters label.check")
    expect(labels.first).to_be_visible()
    assert labels.count() >= 9
    for label in labels.all():
        shape = label.evaluate(
            """el => {
                const box = el.querySelector('input').getBoundingClientRect();
                const text = document.createRange();
                text.setStart(el.lastChild, 0);
                text.setEnd(el.lastChild, el.lastChild.length);
                const words = text.getClientRects();
                return {lines: words.length, gap: words[0].left - box.right};
            }"""
        )
        assert shape["lines"] == 1, (label.inner_text(), shape)
        assert 0 <= shape["gap"] < 12, (label.inner_text(), shape)


def test_the_workspace_and_the_task_page_stack_their_columns_at_phone_width(
    demo, live_url, page, screenshot
):
    """At 390 px the handoff workspace and the task page are one column, as the session page
    is: each side of the split takes the full width (not two ~180 px columns side by side)."""
    handoff = Handoff.objects.filter(project=demo).first()
    task = Task.objects.filter(project=demo).first()
    assert handoff and task
    sign_in(page, live_url, "admin", "switchboard-admin")
    for name, path, split in (
        ("workspace", f"/handoffs/{handoff.pk}/", ".split"),
        ("task", f"/tasks/{task.pk}/", ".split.task-split"),
        ("session", f"/sessions/{handoff.session_id}/", ".split.session-split"),
    ):
        page.set_viewport_size({"width": 390, "height": 900})
        page.goto(live_url + path)
        children = page.locator(f"main {split} > *")
        expect(children.first).to_be_visible()
        boxes = [c.bounding_box() for c in children.all()]
        boxes = [b for b in boxes if b and b["width"] > 0]
        assert len(boxes) >= 2, name
        screenshot(f"layout-{name}-390")
        for box in boxes:
            assert box["width"] > 330, (name, boxes)
        # Stacked: each next column starts below the one before.
        for upper, lower in zip(boxes, boxes[1:], strict=False):
            assert lower["y"] >= upper["y"] + upper["height"] - 1, (name, boxes)


def test_every_page_has_the_switchboard_icon(live_url, page, screenshot):
    """The tab shows an icon: the page links an SVG favicon, and it loads."""
    page.goto(f"{live_url}/accounts/login/")
    icon = page.locator("link[rel=icon]")
    href = icon.get_attribute("href")
    assert href and href.endswith(".svg"), href
    response = page.request.get(live_url + href)
    assert response.status == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert b"<svg" in response.body()
    page.set_content(
        f'<img src="{live_url}{href}" width="64"> <img src="{live_url}{href}" width="16">'
    )
    page.wait_for_function("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
    page.screenshot(
        path=str(screenshot("favicon")),
        full_page=False,
        clip={"x": 0, "y": 0, "width": 120, "height": 80},
    )


# Visible one-line inputs whose placeholder is wider than the box shows ("Reason to pause (optiona").
CUT_PLACEHOLDERS = """() => {
  const ctx = document.createElement('canvas').getContext('2d');
  return [...document.querySelectorAll('input[placeholder]')].filter(el => {
    const r = el.getBoundingClientRect();
    if (!r.width || el.type === 'hidden') return false;
    const s = getComputedStyle(el);
    ctx.font = s.font;
    const room = el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
    return ctx.measureText(el.placeholder).width > room + 0.5;
  }).map(el => (el.id || el.name) + ': ' + el.placeholder);
}"""


def test_no_placeholder_is_cut_off(demo, live_url, page):
    """Every input shows its whole placeholder, wide and on a phone (session page, workspace,
    lists and console)."""
    handoff = Handoff.objects.filter(project=demo, status=HandoffStatus.OPEN).first()
    assert handoff
    sign_in(page, live_url, "admin", "switchboard-admin")
    paths = [
        *(path.format(p=demo.pk) for path in PAGES.values()),
        f"/sessions/{handoff.session_id}/",
        f"/handoffs/{handoff.pk}/",
    ]
    cut = []
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        for path in paths:
            page.goto(live_url + path)
            expect(page.locator("main h1:visible, main h2:visible").first).to_be_visible()
            cut += [(width, path, c) for c in page.evaluate(CUT_PLACEHOLDERS)]
    assert cut == []


# Where a cell's text wraps mid-word: the characters that start a line after a letter/digit.
MID_WORD_BREAKS = """cell => {
  const text = cell.firstChild && cell.firstChild.nodeType === 3 ? cell.firstChild : null;
  if (!text) return [];
  const s = text.data, range = document.createRange(), breaks = [];
  let top = null;
  for (let i = 0; i < s.length; i++) {
    range.setStart(text, i); range.setEnd(text, i + 1);
    const r = range.getClientRects()[0];
    if (!r) continue;
    if (top !== null && r.top > top + 2 && /[A-Za-z0-9]/.test(s[i - 1])) breaks.push(s.slice(0, i) + '|' + s.slice(i));
    top = r.top;
  }
  return breaks;
}"""


def test_agent_names_break_only_between_words_at_phone_width(demo, live_url, page, screenshot):
    """Issue 26: "suppo / rt-triage" in the sessions list on a phone. An agent's name wraps
    after a hyphen or not at all."""
    sign_in(page, live_url, "admin", "switchboard-admin")
    page.set_viewport_size({"width": 390, "height": 900})
    page.goto(f"{live_url}/p/{demo.pk}/sessions/")
    cells = page.locator(".sessions-table tbody td:nth-child(3)")
    expect(cells.first).to_be_visible()
    assert cells.count() > 5
    broken = [b for cell in cells.all() for b in cell.evaluate(MID_WORD_BREAKS)]
    screenshot("agents-390")
    assert broken == []
