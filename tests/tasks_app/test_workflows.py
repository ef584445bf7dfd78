"""Workflow definitions: parsing, validation, and the shipped examples (code and YAML agree)."""

import json

import pytest

from tasks_app.errors import InvalidInput
from tasks_app.workflows import (
    BUILTIN_WORKFLOWS,
    DOCUMENT_APPROVAL,
    RESEARCH_REPORT,
    WORKFLOW_DIR,
    load_workflow_file,
    parse_workflow,
)

MINIMAL = {
    "name": "tiny",
    "version": 1,
    "states": ["open", "done"],
    "initial": "open",
    "terminal": ["done"],
    "transitions": [{"from": "open", "to": "done", "name": "finish"}],
    "steps": [{"key": "work", "max_attempts": 2}],
}


def problems_of(data) -> list[str]:
    with pytest.raises(InvalidInput) as caught:
        parse_workflow(data)
    assert caught.value.status == 422
    return caught.value.detail["problems"]


@pytest.mark.parametrize("name", ["document_approval", "research_report"])
def test_it_ships_each_example_as_identical_code_and_yaml(name):
    from_yaml = load_workflow_file(WORKFLOW_DIR / f"{name}.yaml")
    assert from_yaml == BUILTIN_WORKFLOWS[name]
    assert from_yaml.content_hash == BUILTIN_WORKFLOWS[name].content_hash


def test_it_models_the_document_approval_loop_and_its_alternative_end():
    spec = DOCUMENT_APPROVAL
    assert spec.initial == "draft_created"
    assert spec.terminal == {"published", "rejected"}
    assert spec.allowed_targets("draft_created") == ["sent_for_review"]
    assert spec.allowed_targets("sent_for_review") == ["approved", "changes_requested", "rejected"]
    assert spec.allowed_targets("changes_requested") == ["sent_for_review"]
    assert spec.allowed_targets("approved") == ["published"]
    assert spec.find_transition("changes_requested", to="sent_for_review").reopen == (
        "review",
        "revise",
    )


def test_it_models_the_research_report_review_branches():
    assert RESEARCH_REPORT.allowed_targets("reviewing") == [
        "abandoned",
        "drafting",
        "publishing",
        "researching",
    ]
    names = {t.name for t in RESEARCH_REPORT.allowed_from("reviewing")}
    assert names == {"approve", "revise", "more_research", "abandon"}


def test_it_parses_json_files_too(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(MINIMAL))
    spec = load_workflow_file(path)
    assert spec.name == "tiny"
    assert spec.step("work").max_attempts == 2
    assert spec.step("work").title == "Work"


def test_it_names_the_file_when_a_file_is_invalid(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(InvalidInput) as caught:
        load_workflow_file(path)
    assert caught.value.detail["file"] == str(path)


def test_it_round_trips_through_its_stored_form():
    assert parse_workflow(DOCUMENT_APPROVAL.as_dict()) == DOCUMENT_APPROVAL


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"initial": "nowhere"}, "initial: 'nowhere' is not one of the states"),
        ({"terminal": ["open"]}, "initial: the initial state cannot be terminal"),
        ({"version": 0}, "version: must be an integer of at least 1"),
        ({"version": True}, "version: must be an integer of at least 1"),
        ({"name": "Has Spaces"}, "name: lowercase"),
        ({"states": ["open", "done", "open"]}, "states: a state is declared twice"),
        ({"colour": "blue"}, "workflow: unknown key(s) colour"),
        ({"steps": [{"key": "work", "max_attempts": 0}]}, "steps[0].max_attempts"),
        ({"steps": [{"key": "a"}, {"key": "a"}]}, "steps[1].key: step 'a' is declared twice"),
        (
            {"transitions": [{"from": "open", "to": "gone"}]},
            "transitions[0].to: 'gone' is not one of the states",
        ),
        (
            {"transitions": [{"from": "open", "to": "done"}, {"from": "open", "to": "done"}]},
            "transitions[1]: open → done is declared twice",
        ),
        (
            {"transitions": [{"from": "open", "to": "done", "reopen": ["nope"]}]},
            "transitions[0].reopen: 'nope' is not a declared step",
        ),
        (
            {"transitions": [{"from": "open", "to": "done"}, {"from": "done", "to": "open"}]},
            "transitions[1]: 'done' is terminal",
        ),
    ],
)
def test_it_refuses_an_invalid_definition_naming_the_problem(change, expected):
    problems = problems_of({**MINIMAL, **change})
    assert any(expected in problem for problem in problems), problems


def test_it_refuses_unreachable_states_and_dead_ends():
    problems = problems_of(
        {
            **MINIMAL,
            "states": ["open", "stuck", "orphan", "done"],
            "transitions": [{"from": "open", "to": "done"}, {"from": "open", "to": "stuck"}],
        }
    )
    assert "states: 'orphan' cannot be reached from 'open'" in problems
    assert "states: no terminal state can be reached from 'stuck' (a dead end)" in problems


def test_it_lists_every_problem_at_once():
    problems = problems_of(
        {
            "name": "x",
            "version": "1",
            "states": [],
            "initial": "a",
            "terminal": [],
            "transitions": [],
        }
    )
    assert len(problems) >= 4


def test_it_refuses_a_document_that_is_not_a_mapping():
    assert problems_of(["not", "a", "mapping"]) == ["the document is not a mapping"]
