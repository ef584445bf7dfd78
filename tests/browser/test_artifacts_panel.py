"""The session page's artifacts in a browser: a PNG shown by <img> from the download view
(under the page's CSP), a text file's start shown as text, and time travel showing only what
existed at that seq."""

import struct
import zlib

import pytest
from django.core.files.storage import storages
from playwright.sync_api import expect

from sessions_app.models import Artifact
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, team  # noqa: F401
from tests.factories import make_artifact, make_session

pytestmark = pytest.mark.django_db(transaction=True)


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture(autouse=True)
def _clean_storage():
    yield
    for key in Artifact.objects.values_list("storage_key", flat=True):
        storages["artifacts"].delete(key)


def test_images_and_text_are_previewed_and_time_travel_shows_the_past(
    team: Team, live_url, page, screenshot
):
    session = make_session(team.project, title="Report run")
    early = make_artifact(session, "summary.txt", b"<b>Totals</b>: 42 rows")
    make_artifact(session, "chart.png", png(12, 8), content_type="image/png")
    sign_in(page, live_url, team.viewer.username)

    page.goto(f"{live_url}/sessions/{session.pk}/")
    panel = page.locator("#artifacts-panel")
    image = panel.locator("img.artifact-preview")
    expect(image).to_be_visible()
    page.wait_for_function(
        "() => { const i = document.querySelector('#artifacts-panel img'); "
        "return i && i.complete && i.naturalWidth === 12; }"
    )
    expect(panel.locator("pre.artifact-preview")).to_have_text("<b>Totals</b>: 42 rows")
    screenshot("artifacts_panel")

    page.goto(f"{live_url}/sessions/{session.pk}/?at={early.seq}")
    expect(panel).to_contain_text("summary.txt")
    expect(panel).not_to_contain_text("chart.png")
    expect(panel).to_contain_text("time travel")
