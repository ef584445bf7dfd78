"""The overview's events chart in a browser: a y-axis scale beside the bars (issue 13)."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, session, team  # noqa: F401  (personas, seq 1..6)

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_chart_has_a_y_axis_scale_left_of_the_bars(
    team: Team, session, live_url, page, screenshot
):
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/")
    ticks = page.locator("#events-chart .chart-y span")
    expect(ticks).to_have_text(["6", "3", "0"])
    axis = page.locator("#events-chart .chart-y").bounding_box()
    chart = page.locator("#events-chart svg.chart").bounding_box()
    assert axis and chart
    assert axis["x"] + axis["width"] <= chart["x"]  # beside the bars, not over them
    top = ticks.first.bounding_box()
    bottom = ticks.last.bounding_box()
    assert top and bottom and top["y"] < bottom["y"]
    assert (
        abs(top["y"] - chart["y"]) < 12
        and abs(bottom["y"] + bottom["height"] - (chart["y"] + chart["height"])) < 12
    )
    page.locator("#events-chart").screenshot(
        path=str(screenshot("walk-overview-chart").parent / "walk-overview-chart.png")
    )
