"""core.live_rows: what a flush of a live list does to one page's rows, shared by the sessions
list (switchboard.sessions.consumers) and the tasks list (tasks_app.consumers); their socket
tests (tests/realtime/test_consumers.py, test_task_consumer.py) drive it end to end."""

from dataclasses import dataclass

from core.live_rows import RowChanges, ShownPage


@dataclass
class Row:
    pk: str
    at: int


def key(row: Row) -> tuple[int, str]:
    return (row.at, row.pk)


def page(**overrides) -> ShownPage:
    # Newest first, a middle page: rows sorting between (5, "e") and (9, "i") belong here.
    values = {"known": {"f", "g"}, "last_key": (5, "e"), "cursor_key": (9, "i")}
    return ShownPage(**{**values, **overrides})


def test_it_knows_which_keys_sort_into_the_page():
    newest_first = page()
    assert newest_first.in_window((7, "z"))
    assert newest_first.in_window((5, "e"))  # the page's own last row
    assert not newest_first.in_window((9, "i"))  # the cursor's row is on the page before
    assert not newest_first.in_window((10, "a")) and not newest_first.in_window((4, "a"))
    oldest_first = page(last_key=(9, "i"), cursor_key=(5, "e"), descending=False)
    assert oldest_first.in_window((7, "z")) and not oldest_first.in_window((4, "a"))
    assert page(cursor_key=None).first_page and page(last_key=None).in_window((1, "a"))


def test_it_sorts_out_rows_that_go_stay_and_land_on_the_page():
    shown = page()
    matching = {"g": Row("g", 6), "new": Row("new", 7), "far": Row("far", 1)}
    changes = shown.sort_out(["f", "g", "new", "far", "gone"], matching, RowChanges(), key=key)
    assert changes.delete == ["f"] and changes.replace == [matching["g"]]
    assert changes.prepend == [] and changes.notice  # "new" lands here: a notice, no reshuffle
    assert shown.known == {"g"}


def test_it_puts_new_rows_and_moved_rows_on_top():
    shown = page(cursor_key=None)
    matching = {"g": Row("g", 6), "new": Row("new", 7)}
    changes = shown.sort_out(
        ["g", "new"], matching, RowChanges(), key=key, on_top=lambda i: i == "new", to_top=True
    )
    assert changes.delete == ["g"] and changes.replace == [] and not changes.notice
    assert sorted(r.pk for r in changes.prepend) == ["g", "new"]
    assert shown.known == {"f", "g", "new"}


def test_it_takes_what_was_noted_once_and_renders_nothing_for_no_change():
    shown = page()
    shown.changed |= {"a", "b"}
    shown.created.add("b")
    assert shown.take() == ({"a", "b"}, {"b"}) and shown.take() == (set(), set())
    assert shown.frame("unused.html", RowChanges(), key=key) == ""
    assert not RowChanges() and RowChanges(notice=True)
