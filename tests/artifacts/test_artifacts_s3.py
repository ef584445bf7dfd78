"""Artifacts in an S3 bucket (django-storages' S3Storage, as SWITCHBOARD_ARTIFACTS_S3_BUCKET
configures it) against a local S3 server (moto's, a process of its own): the API's round trip,
Range, deletion, and the clean-ups (a refused save, a deleted session) reach the bucket."""

import hashlib
import subprocess
import sys

import boto3
import pytest
from django.db import transaction

from core.actors import Actor
from retention_app.services.deletion import delete_session
from sessions_app.models import Artifact
from sessions_app.services.lifecycle import close_session
from tests.artifacts.test_artifacts_api import body, get, put
from tests.factories import make_session
from tests.servers import free_port, wait_for_http

BUCKET = "switchboard-artifacts"
TESTER = Actor.system("tests")


@pytest.fixture(scope="module")
def s3_endpoint():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url, process=process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def bucket(s3_endpoint, settings, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    # As config/settings.py builds it when SWITCHBOARD_ARTIFACTS_S3_BUCKET is set.
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": s3_endpoint,
                "region_name": "us-east-1",
                "location": "sb",
                "file_overwrite": True,
                "default_acl": None,
                "querystring_auth": False,
            },
        },
    }
    yield client
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    for item in listed:
        client.delete_object(Bucket=BUCKET, Key=item["Key"])


def keys(client) -> set[str]:
    return {item["Key"] for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def test_it_round_trips_through_the_bucket(api, project, bucket):
    session = make_session(project)
    data = bytes(range(256)) * 40_000  # 10 MB: a multipart upload
    saved = put(api, session.pk, "big.bin", data)
    assert saved.status_code == 201, saved.content
    assert saved.json()["sha256"] == hashlib.sha256(data).hexdigest()
    artifact = Artifact.objects.get()
    assert keys(bucket) == {f"sb/{artifact.storage_key}"}
    stored = bucket.get_object(Bucket=BUCKET, Key=f"sb/{artifact.storage_key}")
    assert stored["ContentLength"] == len(data)

    assert body(get(api, session.pk, "big.bin")) == data
    part = api.client.get(
        f"/api/v1/sessions/{session.pk}/artifacts/big.bin",
        headers={**api.headers, "Range": "bytes=5000000-5000009"},
    )
    assert part.status_code == 206
    assert body(part) == data[5_000_000:5_000_010]


def test_a_refused_save_leaves_nothing_in_the_bucket(api, project, bucket):
    session = make_session(project)
    close_session(session, actor=TESTER, reason="closed")
    assert put(api, session.pk, "late", b"bytes").status_code == 409
    assert keys(bucket) == set()


@pytest.mark.django_db(transaction=True)
def test_deletions_remove_the_objects(api, project, bucket):
    session = make_session(project)
    put(api, session.pk, "a", b"one")
    put(api, session.pk, "a", b"two")
    assert len(keys(bucket)) == 2
    assert api.delete(f"/sessions/{session.pk}/artifacts/a?version=1").status_code == 200
    (left,) = keys(bucket)
    assert left == f"sb/{Artifact.objects.get(version=2).storage_key}"

    with transaction.atomic():
        delete_session(project.pk, session.pk, actor=TESTER)
    assert keys(bucket) == set()
