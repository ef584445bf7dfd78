import json

def test_x(api):
    sid = api.post("/sessions", {"agent": "a"}).json()["id"]
    for ev in [{"kind": "note", "content": {"x": "a\u0000b"}},
               {"kind": "message", "content": {"text": "a\u0000b"}},
               {"kind": "note", "tokens": 2**40, "content": {}},
               {"kind": "note", "cost": "123456.123456", "content": {}},
               {"kind": "fact", "tier": "transient", "content": {"key": "k", "value": 1}},
               ]:
        r = api.post(f"/sessions/{sid}/events", {"events": [ev]})
        print(ev, r.status_code, r.content[:300])
    r = api.post("/sessions", {"agent": "b", "budget": {"max_tokens": 2**70}})
    print(r.status_code, r.content[:300])
    r = api.get(f"/sessions/{sid}/events", {"after_seq": 2**40})
    print(r.status_code, r.content[:300])
    r = api.post(f"/sessions/{sid}/fork", {"at_seq": 2**40})
    print(r.status_code, r.content[:300])
    r = api.post(f"/sessions/{sid}/events", {"events": [{"kind":"note"}], "expected_head_seq": 2**40})
    print(r.status_code, r.content[:300])
    r = api.get(f"/sessions/{sid}/events", {"kind": "fact"})
    print(r.status_code, r.content[:600])
