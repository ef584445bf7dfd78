"""The presence store behind the workspace's "Also viewing" line (issue 26 §4): one row per
open page, several tabs of one user counted once, expired heartbeats and people who can no
longer see the handoff left out, closed pages forgotten, long-dead rows swept."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.actors import Actor
from core.models import Membership, Role
from core.services.members import remove_member
from handoffs_app import presence
from handoffs_app.models import HandoffViewer
from tests.factories import make_member, make_project, make_session, make_user

from .helpers import ask

pytestmark = pytest.mark.django_db


@pytest.fixture
def handoff(project):
    return ask(make_session(project), kind="question")


def test_it_lists_each_viewer_once_sorted(project, handoff):
    alice = make_member(project, Role.OPERATOR, "alice")
    bob = make_member(project, Role.VIEWER, "Bob")
    carol = make_member(project, Role.OPERATOR, "carol")
    presence.mark_viewing(handoff.pk, carol, "chan-c")
    presence.mark_viewing(handoff.pk, alice, "chan-a1")
    presence.mark_viewing(handoff.pk, alice, "chan-a2")  # a second tab
    presence.mark_viewing(handoff.pk, bob, "chan-b")
    assert presence.viewers_of(handoff.pk, project.pk) == ["alice", "Bob", "carol"]
    assert presence.viewers_of(handoff.pk, project.pk, exclude_user=alice) == ["Bob", "carol"]
    other = ask(make_session(project), kind="question")
    assert presence.viewers_of(other.pk, project.pk) == []


def test_a_closed_page_is_forgotten_and_the_users_other_tab_stays(project, handoff):
    alice = make_member(project, Role.OPERATOR, "alice")
    presence.mark_viewing(handoff.pk, alice, "chan-a1")
    presence.mark_viewing(handoff.pk, alice, "chan-a2")
    presence.stop_viewing("chan-a1")
    assert presence.viewers_of(handoff.pk, project.pk) == ["alice"]
    presence.stop_viewing("chan-a2")
    assert presence.viewers_of(handoff.pk, project.pk) == []
    assert not HandoffViewer.objects.exists()


def test_a_page_whose_heartbeat_stopped_expires_and_a_heartbeat_keeps_it(project, handoff):
    alice = make_member(project, Role.OPERATOR, "alice")
    bob = make_member(project, Role.OPERATOR, "bob")
    start = timezone.now()
    presence.mark_viewing(handoff.pk, alice, "chan-a", now=start)
    presence.mark_viewing(handoff.pk, bob, "chan-b", now=start)
    later = start + presence.VIEWER_TTL - timedelta(seconds=1)
    presence.mark_viewing(handoff.pk, bob, "chan-b", now=later)  # bob's heartbeat
    assert presence.viewers_of(handoff.pk, project.pk, now=later) == ["alice", "bob"]
    after = start + presence.VIEWER_TTL + timedelta(seconds=1)
    assert presence.viewers_of(handoff.pk, project.pk, now=after) == ["bob"]
    assert HandoffViewer.objects.filter(channel_name="chan-b").count() == 1  # renewed, not added


def test_only_people_who_can_see_the_handoff_are_listed(project, handoff):
    alice = make_member(project, Role.OPERATOR, "alice")
    stranger = make_member(make_project(), Role.ADMIN, "stranger")
    staff = make_user("staff")
    staff.is_superuser = True
    staff.save()
    for user in (alice, stranger, staff):
        presence.mark_viewing(handoff.pk, user, f"chan-{user.username}")
    assert presence.viewers_of(handoff.pk, project.pk) == ["alice", "staff"]
    remove_member(Membership.objects.get(project=project, user=alice), actor=Actor.system("tests"))
    assert presence.viewers_of(handoff.pk, project.pk) == ["staff"]


def test_sweep_deletes_only_long_dead_rows(project, handoff):
    alice = make_member(project, Role.OPERATOR, "alice")
    bob = make_member(project, Role.OPERATOR, "bob")
    now = timezone.now()
    presence.mark_viewing(handoff.pk, alice, "chan-a", now=now - presence.STALE_AFTER * 2)
    presence.mark_viewing(handoff.pk, bob, "chan-b", now=now)
    assert presence.sweep(now=now) == 1
    assert list(HandoffViewer.objects.values_list("channel_name", flat=True)) == ["chan-b"]


def test_the_group_name_is_apart_from_the_handoffs_own():
    # The handoff's own group wakes the agents' long-polls; presence changes must not.
    assert presence.presence_group("h1") == "handoff-h1-viewers"
