"""SwitchboardSaver's own promises, against a live server: threads are sessions found by
their namespaced external_id (a read opens none), namespaces keep applications apart,
delete_thread deletes the session, copy_thread forks it, pending writes keep the first write,
unchanged channel values are not sent again, and a checkpoint is an event an operator reads."""

import sys
import threading
import uuid

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import ERROR
from switchboard_client import Client, NotFound
from switchboard_client.langgraph import SwitchboardSaver, _one, _Recent


@pytest.fixture
def namespace():
    return f"saver-{uuid.uuid4().hex}/"


def config(thread_id, checkpoint_id=None, ns=""):
    configurable = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(values, versions, step=0):
    return {
        "v": 4,
        "id": str(uuid6(clock_seq=step)),
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": None,
    }


def put(saver, thread_id, values, versions, *, parent=None, new=None, step=0):
    cp = checkpoint(values, versions, step)
    metadata = {"source": "loop", "step": step, "parents": {}}
    target = parent or config(thread_id)
    return saver.put(target, cp, metadata, versions if new is None else new)


def sessions_of(sb, namespace):
    return [s for s in sb.iter_sessions() if (s.external_id or "").startswith(namespace)]


def record_requests(client):
    """The (path, body size) of each request `client` sends from now on."""
    sent = []
    original = client._send

    def counting(request, **options):
        sent.append((request.operation.path, len(request.content or b"")))
        return original(request, **options)

    client._send = counting
    return sent


def test_it_reads_an_unknown_thread_without_opening_a_session(sb, namespace):
    saver = SwitchboardSaver(sb, namespace=namespace)
    assert saver.get_tuple(config("nobody")) is None
    assert saver.get_tuple(config("nobody", str(uuid6()))) is None
    assert list(saver.list(config("nobody"))) == []
    assert list(saver.list(None)) == []
    saver.delete_thread("nobody")
    saver.prune(["nobody"])
    saver.copy_thread("nobody", "somebody")
    saver.delete_for_runs(["run"])
    assert sessions_of(sb, namespace) == []
    assert sb.find_session(namespace + "somebody") is None

    put(saver, "somebody", {"x": 1}, {"x": 1})
    (session,) = sessions_of(sb, namespace)
    assert session.external_id == namespace + "somebody"
    assert session.agent == "langgraph"
    assert session.metadata == {"framework": "langgraph", "langgraph_namespace": namespace}


def test_namespaces_keep_the_same_thread_ids_apart(sb, namespace):
    first = SwitchboardSaver(sb, namespace=namespace + "a/")
    second = SwitchboardSaver(sb, namespace=namespace + "b/")
    put(first, "t", {"who": "first"}, {"who": 1})
    put(second, "t", {"who": "second"}, {"who": 1})
    assert first.get_tuple(config("t")).checkpoint["channel_values"] == {"who": "first"}
    assert second.get_tuple(config("t")).checkpoint["channel_values"] == {"who": "second"}
    assert [t.config["configurable"]["thread_id"] for t in first.list(None)] == ["t"]

    first.delete_thread("t")
    assert first.get_tuple(config("t")) is None
    assert second.get_tuple(config("t")).checkpoint["channel_values"] == {"who": "second"}
    assert [s.external_id for s in sessions_of(sb, namespace)] == [namespace + "b/t"]


def test_delete_thread_deletes_the_session_and_frees_its_id(sb, namespace):
    saver = SwitchboardSaver(sb, namespace=namespace)
    stored = put(saver, "t", {"big": "x" * 5000}, {"big": 1})
    session = sb.find_session(namespace + "t")
    saver.put_writes(stored, [("ch", "value")], "task")

    saver.delete_thread("t")
    with pytest.raises(NotFound):
        sb.get_session(session.id)
    assert sb.find_session(namespace + "t") is None
    # The thread starts again, in a new session.
    put(saver, "t", {"big": "y"}, {"big": 1})
    assert sb.find_session(namespace + "t").id != session.id
    assert saver.get_tuple(config("t")).checkpoint["channel_values"] == {"big": "y"}


def test_copy_thread_forks_the_session(sb, namespace):
    saver = SwitchboardSaver(sb, namespace=namespace)
    messages = [HumanMessage(f"message {n} " * 20, id=str(n)) for n in range(50)]
    first = put(saver, "source", {"messages": messages}, {"messages": 1})
    second = put(saver, "source", {"messages": messages[:10]}, {"messages": 2}, parent=first)
    saver.put_writes(second, [("messages", "pending")], "task")

    saver.copy_thread("source", "copy")
    source = sb.find_session(namespace + "source")
    copy = sb.find_session(namespace + "copy")
    assert copy.lineage.parent_id == source.id
    assert copy.lineage.fork_seq == source.head_seq

    fresh = SwitchboardSaver(Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace)
    copied = list(fresh.list(config("copy")))
    assert [t.checkpoint["channel_values"] for t in copied] == [
        {"messages": messages[:10]},
        {"messages": messages},
    ]
    assert copied[0].pending_writes == [("task", "messages", "pending")]

    # The copy goes on alone; the source is unchanged.
    put(fresh, "copy", {"messages": []}, {"messages": 3}, parent=copied[0].config)
    assert len(list(fresh.list(config("copy")))) == 3
    assert len(list(fresh.list(config("source")))) == 2

    # A source with live copies is hidden, not deleted: the copy still reads through it.
    fresh.delete_thread("source")
    assert fresh.get_tuple(config("source")) is None
    assert list(fresh.list(config("source"))) == []
    assert sb.get_session(source.id).id == source.id
    assert len(list(fresh.list(config("copy")))) == 3


def test_pending_writes_keep_the_first_write_as_inmemorysaver_does(sb, namespace):
    ours, theirs = SwitchboardSaver(sb, namespace=namespace), InMemorySaver()
    results = []
    for saver in (ours, theirs):
        stored = put(saver, "t", {}, {})
        saver.put_writes(stored, [("a", "first"), ("b", 1)], "task")
        saver.put_writes(stored, [("a", "second"), ("b", 2)], "task")  # ignored
        saver.put_writes(stored, [(ERROR, "boom")], "task")
        saver.put_writes(stored, [(ERROR, "boom again")], "task")  # the last error wins
        saver.put_writes(stored, [("a", "other task")], "other", task_path="~")
        results.append(saver.get_tuple(stored).pending_writes)
    assert (
        results[0]
        == results[1]
        == [
            ("task", ERROR, "boom again"),
            ("task", "a", "first"),
            ("task", "b", 1),
            ("other", "a", "other task"),
        ]
    )


def test_an_unchanged_channel_is_not_sent_again(sb, namespace):
    saver = SwitchboardSaver(sb, namespace=namespace)
    sent = record_requests(sb)
    big = "a large document " * 2000  # 34 KB
    first = put(saver, "t", {"doc": big, "n": 1}, {"doc": 1, "n": 1})
    # The value goes with the checkpoint's event: one request.
    assert [path for path, _ in sent if "/sessions/{session_id}" in path] == [
        "/sessions/{session_id}/events"
    ]
    assert sum(size for path, size in sent if path.endswith("/events")) > len(big)
    sent.clear()
    second = put(saver, "t", {"doc": big, "n": 2}, {"doc": 1, "n": 2}, parent=first, new={"n": 2})
    assert not [path for path, _ in sent if path.endswith("/blobs")]
    assert sum(size for _, size in sent) < 2000
    fresh = SwitchboardSaver(Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace)
    assert fresh.get_tuple(second).checkpoint["channel_values"] == {"doc": big, "n": 2}


def test_a_fresh_process_reads_a_long_message_list_in_one_lookup_per_level(sb, namespace):
    saver = SwitchboardSaver(sb, namespace=namespace)
    messages = [f"message {i}" for i in range(3000)]  # over 2,048 names: two levels of names
    stored = put(saver, "t", {"messages": messages}, {"messages": 1})
    client = Client(sb.url, sb.api_key, retry=sb.retry)
    sent = record_requests(client)
    fresh = SwitchboardSaver(client, namespace=namespace)  # a process that remembers nothing

    assert fresh.get_tuple(stored).checkpoint["channel_values"] == {"messages": messages}
    # The names' two levels, then the 3,000 messages in one answer.
    assert [path for path, _ in sent].count("/sessions/{session_id}/blobs/lookup") == 3


def test_a_checkpoint_is_an_event_an_operator_reads_and_a_fresh_process_finds_by_key(sb, namespace):
    saver = SwitchboardSaver(sb, namespace=namespace)
    stored = put(saver, "t", {"topic": "refund", "doc": "x" * 1000}, {"topic": 1, "doc": 1})
    checkpoint_id = stored["configurable"]["checkpoint_id"]
    session = sb.find_session(namespace + "t")
    (event,) = sb.events(session.id, kind=["note"]).events
    assert event.tier == "durable"
    assert event.content["langgraph"] == "checkpoint"
    assert event.content["checkpoint_id"] == checkpoint_id
    assert event.content["metadata"] == {"source": "loop", "step": 0, "parents": {}}
    values = event.content["values"]
    assert set(values) == {"topic", "doc"}
    assert len(values["doc"]["blobs"]) == 1 and "b64" in values["topic"]
    # Its key names the checkpoint: one read by key prefix finds it.
    found = sb.events(session.id, key_prefix=event.idempotency_key.rsplit("/c/", 1)[0])
    assert [e.seq for e in found.events] == [event.seq]


class CountingSerializer(JsonPlusSerializer):
    """LangGraph's own serializer, counting what it encodes and decodes."""

    def __init__(self):
        super().__init__()
        self.encoded = 0
        self.decoded = 0
        self.calls = 0

    def dumps_typed(self, obj):
        self.encoded += 1
        return super().dumps_typed(obj)

    def loads_typed(self, data):
        self.calls += 1
        value = super().loads_typed(data)
        # The saver decodes a list's elements in one call, as an array: each counts.
        self.decoded += len(value) if type(value) is list else 1
        return value


def test_a_list_decodes_a_message_the_checkpoints_share_once_into_objects_of_their_own(
    sb, namespace
):
    saver = SwitchboardSaver(sb, namespace=namespace)
    messages = [HumanMessage(f"message {i}", id=f"m{i}") for i in range(40)]
    parent = None
    for step in range(1, 6):  # five checkpoints, each with the 40 messages and 10 more each
        held = messages + [
            HumanMessage(f"step {step} note {i}", id=f"s{step}-{i}") for i in range(10)
        ]
        parent = put(saver, "t", {"messages": held}, {"messages": step}, parent=parent, step=step)
    serde = CountingSerializer()
    fresh = SwitchboardSaver(
        Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace, serde=serde
    )

    listed = list(fresh.list(config("t")))

    lists = [t.checkpoint["channel_values"]["messages"] for t in listed]
    assert [len(held) for held in lists] == [50] * 5
    assert all(held[:40] == messages for held in lists)
    # 40 shared messages and 5 x 10 of their own, each decoded once (and 5 checkpoint bodies'
    # metadata at most): not 5 x 50.
    assert serde.decoded <= 40 + 50 + 5
    # Each checkpoint's list holds objects of its own: a change to one is not another's.
    assert len({id(held[0]) for held in lists}) == 5
    lists[0][0].content = "changed"
    assert all(held[0].content == "message 0" for held in lists[1:])


def test_a_read_bigger_than_the_blob_cache_returns_every_value(sb, namespace):
    saver = SwitchboardSaver(sb, namespace=namespace)
    messages = [f"message {i}" for i in range(300)]
    stored = put(saver, "t", {"messages": messages, "doc": "d" * 5000}, {"messages": 1, "doc": 1})
    fresh = SwitchboardSaver(Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace)
    fresh._blobs.limit = 100  # it holds almost nothing: one blob, dropped as the next arrives

    values = fresh.get_tuple(stored).checkpoint["channel_values"]

    assert values == {"messages": messages, "doc": "d" * 5000}


def test_a_fresh_process_goes_on_from_a_checkpoint_without_encoding_its_messages_again(
    sb, namespace
):
    saver = SwitchboardSaver(sb, namespace=namespace)
    messages = [HumanMessage(f"message {i}", id=f"m{i}") for i in range(300)]
    stored = put(saver, "t", {"messages": messages}, {"messages": 1})
    serde = CountingSerializer()
    client = Client(sb.url, sb.api_key, retry=sb.retry)
    fresh = SwitchboardSaver(client, namespace=namespace, serde=serde)
    sent = record_requests(client)
    loaded = fresh.get_tuple(stored).checkpoint["channel_values"]["messages"]
    sent.clear()

    # As a graph goes on: the list it read, one message more.
    then = loaded + [HumanMessage("one more", id="m300")]
    second = put(fresh, "t", {"messages": then}, {"messages": 2}, parent=stored, step=1)

    assert serde.encoded == 1  # the new message; the 300 read are known by their blobs
    assert [path for path, _ in sent] == ["/sessions/{session_id}/events"]
    assert sum(size for _, size in sent) < 20_000  # 300 names (64 bytes each) and one message
    again = SwitchboardSaver(Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace)
    assert again.get_tuple(second).checkpoint["channel_values"]["messages"] == then


def test_a_list_of_mixed_values_reads_back_as_stored_its_msgpack_ones_in_one_call(sb, namespace):
    saver = SwitchboardSaver(sb, namespace=namespace)
    mixed = [
        HumanMessage("hello", id="h1"),
        b"raw bytes",
        None,
        "text",
        {"nested": [1, 2.5, {"deep": True}]},
        HumanMessage("bye", id="h2"),
        bytearray(b"array"),
        ["inner", "list"],
    ]
    stored = put(saver, "t", {"mixed": mixed}, {"mixed": 1})
    serde = CountingSerializer()
    fresh = SwitchboardSaver(
        Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace, serde=serde
    )

    values = fresh.get_tuple(stored).checkpoint["channel_values"]

    assert values == {"mixed": mixed}
    assert [type(v) for v in values["mixed"]] == [type(v) for v in mixed]
    # The bytes, None and bytearray elements one call each; the five msgpack ones in one.
    assert serde.calls <= 3 + 1 + 1  # and the checkpoint's metadata at most


def test_a_second_get_tuple_decodes_only_what_the_first_did_not_read_into_objects_of_its_own(
    sb, namespace
):
    saver = SwitchboardSaver(sb, namespace=namespace)
    messages = [HumanMessage(f"message {i}", id=f"m{i}") for i in range(300)]
    first = put(saver, "t", {"messages": messages}, {"messages": 1})
    more = messages + [HumanMessage(f"more {i}", id=f"n{i}") for i in range(5)]
    second = put(saver, "t", {"messages": more}, {"messages": 2}, parent=first, step=1)
    serde = CountingSerializer()
    fresh = SwitchboardSaver(
        Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace, serde=serde
    )
    read_first = fresh.get_tuple(first).checkpoint["channel_values"]["messages"]
    assert serde.decoded == 300
    read_first[0].content = "changed by the graph"  # its own object: no later read sees it

    read_second = fresh.get_tuple(second).checkpoint["channel_values"]["messages"]
    assert serde.decoded == 300 + 5  # only the 5 the first read did not hold
    read_again = fresh.get_tuple(first).checkpoint["channel_values"]["messages"]
    assert serde.decoded == 300 + 5

    assert read_second == more
    assert read_again == messages
    assert {id(m) for m in read_second}.isdisjoint(id(m) for m in read_first)
    assert {id(m) for m in read_again}.isdisjoint(id(m) for m in read_second)


def test_what_a_process_keeps_of_its_threads_lists_stays_within_its_limit(sb, namespace):
    serde = CountingSerializer()
    saver = SwitchboardSaver(sb, namespace=namespace, serde=serde)
    saver._elements.limit = saver._pristine.limit = 10  # elements, in all channels
    first = [HumanMessage(f"first {i}", id=f"f{i}") for i in range(8)]
    second = [HumanMessage(f"second {i}", id=f"s{i}") for i in range(8)]
    stored = put(saver, "first", {"messages": first}, {"messages": 1})
    put(saver, "second", {"messages": second}, {"messages": 1})  # the first thread's dropped
    assert saver._elements.size == 8
    read = saver.get_tuple(config("second")).checkpoint["channel_values"]["messages"]
    assert read == second and saver._pristine.size == 8
    serde.encoded = 0

    # The first thread goes on: its list was forgotten, so all of it is encoded again, and
    # stored as it should be.
    then = first + [HumanMessage("one more", id="f8")]
    put(saver, "first", {"messages": then}, {"messages": 2}, parent=stored, step=1)

    assert serde.encoded == 9
    assert saver._elements.size == 9  # the second thread's list went for it
    again = SwitchboardSaver(Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace)
    assert again.get_tuple(config("first")).checkpoint["channel_values"]["messages"] == then


def test_the_refs_a_process_keeps_stay_within_their_limit_and_a_forgotten_one_is_found_again(
    sb, namespace
):
    saver = SwitchboardSaver(sb, namespace=namespace)
    saver._refs.limit = 1  # channels
    first = put(saver, "t", {"doc": "a document", "n": 1}, {"doc": 1, "n": 1})
    assert saver._refs.size == 1  # "doc"'s ref went for "n"'s
    # The next checkpoint neither gives "doc" nor changes it: the saver no longer knows its
    # ref, so it finds it at the parent checkpoint.
    second = put(saver, "t", {"n": 2}, {"doc": 1, "n": 2}, parent=first, new={"n": 2})
    assert saver._refs.size == 1
    fresh = SwitchboardSaver(Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace)
    assert fresh.get_tuple(second).checkpoint["channel_values"] == {"doc": "a document", "n": 2}


def test_the_savers_caches_keep_their_accounts_when_threads_share_them():
    """A saver may be shared by threads (a web server's, LangGraph's background writes), as
    LangGraph's own savers may. Six threads read, write, forget and evict in its three kinds
    of memory (blob contents, per-channel lists, per-channel refs) at once, thread switches
    forced as often as the interpreter allows: no call fails and each keeps its size right
    (unlocked, they raised KeyError within a second and counted 25 elements where they held
    5; the refs, a dict rebuilt to forget a thread, raised "dictionary changed size")."""
    cache, memo, refs = _Recent(50, len), _Recent(20, len), _Recent(4, _one)
    errors = []

    def work():
        try:
            for i in range(20_000):
                cache[str(i % 40)] = b"12345"
                cache.get(str(i * 7 % 40))
                cache.get_many(str(i * 7 % 40 + j) for j in range(3))
                cache.update({str(i % 40 + j): b"12" for j in range(3)})
                memo[("s", "", str(i % 6))] = {j: j for j in range(5)}
                memo.get(("s", "", str(i * 5 % 6)))
                refs[("s", "", str(i % 6))] = {"v": i}
                refs.get(("s", "", str(i * 5 % 6)))
                if i % 500 == 0:
                    memo.forget(lambda slot: slot[0] == "s")
                    refs.forget(lambda slot: slot[0] == "s")
        except Exception as error:  # what the test is about: none escapes
            errors.append(repr(error))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)

    assert errors == []
    assert cache.size == sum(map(len, cache._data.values())) <= 50
    assert memo.size == sum(map(len, memo._data.values())) <= 20
    assert refs.size == len(refs._data) <= 4
