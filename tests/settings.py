"""Test settings: the real settings plus test-only overrides.

By default the suite runs against this machine's PostgreSQL and Redis. With
SWITCHBOARD_TEST_EMBEDDED=1 it runs on the embedded defaults (SQLite file, in-memory layer).
"""

import os

if os.environ.get("SWITCHBOARD_TEST_EMBEDDED") == "1":
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
else:
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchboard")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
# Suites running side by side (SWITCHBOARD_TEST_DB) must not share cache keys or channel groups:
# ids restart at 1 in every test database, so `project-1` would be everybody's group.
_RUN = os.environ.get("SWITCHBOARD_TEST_DB", "test_switchboard")
os.environ.setdefault("CACHE_KEY_PREFIX", f"switchboard-{_RUN}")

from config.settings import *  # noqa: E402, F403
from config.settings import BASE_DIR, CHANNEL_LAYERS, DATABASES  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so other processes (servers, workers) can share the test database.
    DATABASES["default"]["TEST"] = {
        "NAME": str(BASE_DIR / f"{os.environ.get('SWITCHBOARD_TEST_DB', 'test_switchboard')}.sqlite3")
    }
else:
    # Child processes started by a test (servers, workers, concurrent writers) are pointed at
    # the test database through this variable.
    _test_name = os.environ.get("SWITCHBOARD_TEST_DB_NAME")
    if _test_name:
        DATABASES["default"]["NAME"] = _test_name
    # SWITCHBOARD_TEST_DB lets several suites run side by side on one server.
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("SWITCHBOARD_TEST_DB", "test_switchboard")}

if CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer":
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = f"switchboard-{_RUN}"

# WhiteNoise warns on every request when STATIC_ROOT is missing (tests never collectstatic).
STATIC_ROOT.mkdir(exist_ok=True)  # noqa: F405
