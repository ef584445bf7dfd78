"""The append-only guard's one audited escape hatch for erasures, and the receipts' own guard.

* sessions_app_event_append_only (sessions_app 0002) is replaced: UPDATE is still refused
  always, DELETE still allowed under retention's switch (`switchboard.allow_event_delete`),
  and otherwise only when the transaction-local setting `switchboard.erasure` names an
  erasure that is running and has the row's session among its targets not yet erased
  (services.erasure sets it with SET LOCAL, storage: `open_erasure_guard`). Every event an
  erasure deletes is so attributable to a receipt (whose ErasedObject rows hold its hash);
  any other DELETE is refused by the database.
* A finished receipt (status `done`) is never changed or deleted, nor are its ErasedObject rows
  or its erased targets: the receipt stays as written.
"""

from django.db import migrations

EVENT_GUARD = """
CREATE OR REPLACE FUNCTION sessions_app_event_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    erasure text;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'sessions_app_event is append-only: UPDATE refused'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF coalesce(current_setting('switchboard.allow_event_delete', true), '') = 'on' THEN
        RETURN OLD;
    END IF;
    erasure := coalesce(current_setting('switchboard.erasure', true), '');
    IF erasure <> '' AND EXISTS (
        SELECT 1 FROM retention_app_erasuretarget t
        JOIN retention_app_erasurerequest r ON r.id = t.erasure_id
        WHERE t.erasure_id = erasure::uuid AND t.session_id = OLD.session_id
          AND t.erased_at IS NULL AND r.status = 'running'
    ) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'sessions_app_event is append-only: DELETE only in retention or an erasure'
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
"""

# sessions_app 0002's function, put back on reverse.
EVENT_GUARD_BEFORE = """
CREATE OR REPLACE FUNCTION sessions_app_event_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'sessions_app_event is append-only: UPDATE refused'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF coalesce(current_setting('switchboard.allow_event_delete', true), '') <> 'on' THEN
        RAISE EXCEPTION 'sessions_app_event is append-only: DELETE only in retention'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN OLD;
END;
$$;
"""

RECEIPT_GUARD = [
    """
    CREATE FUNCTION retention_app_receipt_immutable() RETURNS trigger
    LANGUAGE plpgsql AS $$
    DECLARE
        refused boolean;
    BEGIN
        -- One branch per table: each reads only the columns its table has.
        IF TG_TABLE_NAME = 'retention_app_erasedobject' THEN
            refused := true;
        ELSIF TG_TABLE_NAME = 'retention_app_erasurerequest' THEN
            refused := OLD.status = 'done';
        ELSE
            refused := OLD.erased_at IS NOT NULL;
        END IF;
        IF refused THEN
            RAISE EXCEPTION '% is part of an erasure receipt: % refused', TG_TABLE_NAME, TG_OP
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NEW;
    END;
    $$;
    """,
    *(
        f"""
        CREATE TRIGGER retention_app_receipt_immutable BEFORE UPDATE OR DELETE ON {name}
        FOR EACH ROW EXECUTE FUNCTION retention_app_receipt_immutable();
        """
        for name in (
            "retention_app_erasurerequest",
            "retention_app_erasuretarget",
            "retention_app_erasedobject",
        )
    ),
]
RECEIPT_GUARD_REVERSE = [
    *(
        f"DROP TRIGGER IF EXISTS retention_app_receipt_immutable ON {name};"
        for name in (
            "retention_app_erasurerequest",
            "retention_app_erasuretarget",
            "retention_app_erasedobject",
        )
    ),
    "DROP FUNCTION IF EXISTS retention_app_receipt_immutable();",
]


class Migration(migrations.Migration):
    dependencies = [
        ("retention_app", "0003_erasure"),
        # The event guard this replaces is sessions_app 0002's; after the latest of that app.
        ("sessions_app", "0009_artifact"),
    ]

    operations = [
        migrations.RunSQL([EVENT_GUARD], [EVENT_GUARD_BEFORE]),
        migrations.RunSQL(RECEIPT_GUARD, RECEIPT_GUARD_REVERSE),
    ]
