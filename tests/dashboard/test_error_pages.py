from django.template.loader import render_to_string
from django.test import Client


def test_it_shows_a_friendly_404_for_unknown_addresses(team):
    client = team.client("viewer")
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assert b"Not found" in response.content and b"Back to your projects" in response.content


def test_the_error_templates_render_without_a_request():
    for name, phrase in [
        ("400.html", "Check your input"),
        ("403.html", "Not allowed"),
        ("404.html", "Not found"),
        ("500.html", "Something went wrong"),
        ("403_csrf.html", "Please reload the page"),
    ]:
        page = render_to_string(name)
        assert phrase in page, name
        assert "Switchboard" in page  # they extend the base layout


def test_the_sign_in_page_is_reachable_anonymously(db):
    assert Client().get("/accounts/login/").status_code == 200


def test_it_answers_404_for_a_project_id_beyond_any_column(client, django_user_model):
    user = django_user_model.objects.create_user(username="huge", password="pw-for-tests-1")
    client.force_login(user)
    assert client.get("/p/99999999999999999999999/").status_code == 404
