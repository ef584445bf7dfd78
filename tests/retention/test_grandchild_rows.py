"""A session is deleted with the rows of its dependants' own dependants: a handoff being
viewed (its workspace open, a presence row pointing at the handoff) is deleted with its session,
through the API's delete and through retention, and the viewers go with it."""

from core.actors import Actor
from handoffs_app.models import Handoff, HandoffViewer
from handoffs_app.presence import mark_viewing
from retention_app.services.deletion import delete_session
from sessions_app.models import Session
from tests.factories import make_session
from tests.handoffs.helpers import ask, operator


def test_a_session_whose_handoff_is_being_viewed_is_deleted_with_its_viewers(db, project):
    session = make_session(project)
    handoff = ask(session)
    mark_viewing(handoff.pk, operator(project), "specific.channel!1")
    kept = make_session(project)
    kept_handoff = ask(kept)
    mark_viewing(kept_handoff.pk, operator(project, "other-operator"), "specific.channel!2")

    delete_session(project.pk, session.pk, actor=Actor.system("test"))

    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Handoff.objects.filter(pk=handoff.pk).exists()
    assert not HandoffViewer.objects.filter(handoff_id=handoff.pk).exists()
    assert HandoffViewer.objects.filter(handoff_id=kept_handoff.pk).count() == 1
