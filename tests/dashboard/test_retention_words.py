"""The retention page's words for stored values: exact durations in the largest whole unit
(never "0.024 hours"), outcomes as phrases, and who acted without the internal prefix."""

import pytest

from switchboard.retention.forms import actor_words, human


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (86, "86 seconds"),
        (60, "1 minute"),
        (5400, "90 minutes"),
        (3600, "1 hour"),
        (36 * 3600, "36 hours"),
        (30 * 86400, "30 days"),
        (None, "never"),
    ],
)
def test_it_shows_a_duration_exactly_in_its_largest_whole_unit(seconds, words):
    assert human("compact_after", seconds) == words


def test_it_names_outcomes_and_actors_in_words():
    assert human("keep_outcomes", ["error", "over_budget"]) == (
        "ended with an error, exceeded their budget"
    )
    assert human("keep_outcomes", []) == "—"
    assert actor_words("user:alice") == "alice"
    assert actor_words("key:1a2b3c4d") == "API key 1a2b3c4d…"
    assert actor_words("beat") == "the schedule"
