-- One known value sealed by each seal key, the first time a process starts with that
-- key: every later start opens it again, so a different key configured under a known
-- id stops the process at start — instead of leaving every value the real key sealed
-- unopenable in the middle of a create.
CREATE TABLE seal_key_checks (
    key_id     text        PRIMARY KEY,
    sealed     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
