"""Test settings: the real settings plus test-only overrides.

PostgreSQL always: DATABASE_URL, by default this machine's 127.0.0.1:5432 as user postgres
(`bash scripts/test` picks it, or the embedded server when nothing answers there). Redis:
REDIS_URL, by default 127.0.0.1:6379; REDIS_URL set empty runs without Redis (in-memory channel
layer and cache), and the tests marked `requires_redis` are skipped (tests/conftest.py).
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchboard")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
# Suites running side by side (SWITCHBOARD_TEST_DB) must not share cache keys or channel groups:
# ids restart at 1 in every test database, so `project-1` would be everybody's group.
# pytest-xdist's workers (gw0, gw1, ...) are such suites too, each with its own database.
_SUITE = os.environ.get("SWITCHBOARD_TEST_DB", "test_switchboard")
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_RUN = f"{_SUITE}_{_WORKER}" if _WORKER else _SUITE
_ARTIFACTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), ".artifacts-test")
for _name, _value in (
    ("CACHE_KEY_PREFIX", "switchboard-{}"),
    ("CHANNEL_LAYER_PREFIX", "switchboard-{}"),
    # Artifacts' files: a folder per suite, beside the others' (children inherit it).
    ("SWITCHBOARD_ARTIFACTS_DIR", os.path.join(_ARTIFACTS, "{}")),
):
    # Unset, or as the xdist controller set it (its workers inherit its environment); a value
    # a test gave a child process is kept.
    if os.environ.get(_name) in (None, _value.format(_SUITE)):
        os.environ[_name] = _value.format(_RUN)

from config.settings import *  # noqa: E402, F403
from config.settings import DATABASES  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Child processes started by a test (servers, workers, concurrent writers) are pointed at the
# test database through this variable.
_test_name = os.environ.get("SWITCHBOARD_TEST_DB_NAME")
if _test_name:
    DATABASES["default"]["NAME"] = _test_name
# SWITCHBOARD_TEST_DB lets several suites run side by side on one server.
DATABASES["default"]["TEST"] = {"NAME": _RUN}

# WhiteNoise warns on every request when STATIC_ROOT is missing (tests never collectstatic).
STATIC_ROOT.mkdir(exist_ok=True)  # noqa: F405

# The webhook tests' receivers listen on the loopback, which production refuses by default.
SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = True

# Static files from the app folders whatever DEBUG says, so a server a test runs with DEBUG off
# (the production error pages) renders without a collectstatic manifest.
STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}  # noqa: F405
WHITENOISE_USE_FINDERS = True
