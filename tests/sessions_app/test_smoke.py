def test_it_opens_appends_and_reads_back(api):
    opened = api.post("/sessions", {"agent": "smoke", "title": "hello"})
    assert opened.status_code == 201
    session_id = opened.json()["id"]
    appended = api.post(
        f"/sessions/{session_id}/events",
        {
            "events": [
                {"kind": "message", "role": "user", "content": {"text": "hi"}},
                {"kind": "state", "content": {"step": 1}},
            ]
        },
    )
    assert appended.status_code == 201
    assert [e["seq"] for e in appended.json()["events"]] == [1, 2]
    events = api.get(f"/sessions/{session_id}/events").json()["events"]
    assert [(e["seq"], e["content"]) for e in events] == [(1, {"text": "hi"}), (2, {"step": 1})]
    assert api.get(f"/sessions/{session_id}/state").json()["state"] == {"step": 1}
