"""The session page's artifacts: listed with size and version, text and images previewed
(images through the download view, never SVG, never HTML from this origin), downloads for
members only, and in time travel only what existed at that seq."""

from urllib.parse import urlencode

import pytest
from django.core.files.storage import storages
from django.urls import reverse

from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_artifact, make_session

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


@pytest.fixture(autouse=True)
def _clean_storage(db):
    store = storages["artifacts"]
    yield
    from sessions_app.models import Artifact

    for key in Artifact.objects.values_list("storage_key", flat=True):
        store.delete(key)


def download_url(session, name, **params):
    url = reverse("dashboard:session_artifact", args=[session.pk, name])
    return f"{url}?{urlencode(params)}" if params else url


def page(client, session, **params):
    url = reverse("dashboard:session_detail", args=[session.pk])
    return client.get(f"{url}?{urlencode(params)}" if params else url)


def test_the_page_lists_versions_and_previews_text_and_images(team):
    session = make_session(team.project)
    make_artifact(session, "notes.txt", b"first draft")
    make_artifact(session, "notes.txt", b"<b>second</b> draft")
    make_artifact(session, "chart.png", PNG, content_type="image/png")
    make_artifact(session, "logo.svg", b"<svg onload=alert(1)>", content_type="image/svg+xml")

    html = page(team.client("viewer"), session).content.decode()
    assert 'id="artifacts-panel"' in html
    assert "v2 · 19" in html  # the latest version, with its size
    assert "&lt;b&gt;second&lt;/b&gt; draft" in html  # previewed, escaped
    assert "<b>second</b>" not in html
    assert f'src="{download_url(session, "chart.png", version=1)}&amp;inline=1"' in html
    assert "logo.svg" in html  # listed, with a download link …
    assert "logo.svg?version=1&amp;inline=1" not in html  # … never shown inline
    assert f'href="{download_url(session, "notes.txt", version=1)}"' in html
    assert "saved notes.txt v2" in html  # the log's row of the save


def test_downloads_are_attachments_and_only_safe_images_inline(team):
    session = make_session(team.project)
    make_artifact(session, "chart.png", PNG, content_type="image/png")
    make_artifact(session, "logo.svg", b"<svg onload=alert(1)>", content_type="image/svg+xml")
    make_artifact(session, "page.html", b"<script>alert(1)</script>", content_type="text/html")
    viewer = team.client("viewer")

    image = viewer.get(download_url(session, "chart.png", inline=1))
    assert image.status_code == 200
    assert image["Content-Type"] == "image/png"
    assert image["Content-Disposition"] == 'inline; filename="chart.png"'
    assert image["X-Content-Type-Options"] == "nosniff"
    assert b"".join(image.streaming_content) == PNG
    for name in ("logo.svg", "page.html"):
        sent = viewer.get(download_url(session, name, inline=1))
        assert sent["Content-Type"] == "application/octet-stream", name
        assert sent["Content-Disposition"].startswith("attachment;"), name
        assert sent["X-Content-Type-Options"] == "nosniff"
        assert "sandbox" in sent["Content-Security-Policy"]


def test_downloads_need_membership(team, client):
    session = make_session(team.project)
    make_artifact(session, "secret.txt", b"secret")
    url = download_url(session, "secret.txt")
    assert team.client("outsider").get(url).status_code == 404
    assert client.get(url).status_code == 302  # to the sign-in page
    assert team.client("viewer").get(url).status_code == 200
    assert (
        team.client("viewer").get(download_url(session, "secret.txt", version=9)).status_code == 404
    )
    assert team.client("viewer").get(download_url(session, "x", version="no")).status_code == 422


def test_time_travel_shows_only_what_existed_at_that_seq(team):
    session = make_session(team.project)
    first = make_artifact(session, "early.txt", b"early")
    make_artifact(session, "late.txt", b"late")
    viewer = team.client("viewer")

    html = page(viewer, session, at=first.seq).content.decode()
    panel = html[html.index('id="artifacts-panel"') :]
    panel = panel[: panel.index("</section>")]
    assert "early.txt" in panel and "late.txt" not in panel
    assert "(time travel)" in panel
    assert viewer.get(download_url(session, "late.txt", at=first.seq)).status_code == 404
    assert viewer.get(download_url(session, "early.txt", at=first.seq)).status_code == 200
    live = page(viewer, session).content.decode()
    assert "late.txt" in live
