-- hourglass schema. Idempotent: safe to apply again (CREATE TABLE / ADD COLUMN ... IF NOT EXISTS).
-- Works on MariaDB 10.6+. MySQL 8 lacks ADD COLUMN / ADD KEY IF NOT EXISTS: there, drop those
-- statements (below) on a new database, and run them without IF NOT EXISTS once when upgrading. Apply with:
--   mariadb hourglass < sql/schema.sql        (or: mysql hourglass < sql/schema.sql)
--
-- The daemon refuses to start when these tables are missing or older than it needs
-- (schema_version below); it never changes the schema itself.

-- One row per job ever accepted: the whole job and its latest known state.
-- `version` orders updates: every Redis transition carries the job's version, and a
-- batched update only applies when it is newer than the row, so late batches never
-- roll a job back (a delete committed first is never overwritten by an older "ready").
CREATE TABLE IF NOT EXISTS message (
    id          BIGINT UNSIGNED NOT NULL,
    topic       VARCHAR(128)    NOT NULL,
    biz_key     VARCHAR(128)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    body        MEDIUMBLOB      NOT NULL,               -- compact JSON text
    run_at      BIGINT          NOT NULL,               -- due time, unix ms
    priority    TINYINT UNSIGNED NOT NULL,
    ttr         BIGINT UNSIGNED NOT NULL,               -- ms
    tries       INT UNSIGNED    NOT NULL,
    attempts    INT UNSIGNED    NOT NULL DEFAULT 0,
    backoff     BIGINT          NULL,                   -- ms, the job's own (push `backoff`); NULL = its topic's
    state       ENUM('delayed','ready','reserved','finished','deleted','dead','aborted') NOT NULL,
    version     INT UNSIGNED    NOT NULL DEFAULT 1,
    created_at  BIGINT          NOT NULL,               -- unix ms
    updated_at  BIGINT          NOT NULL,               -- unix ms
    PRIMARY KEY (id),
    -- Few secondary indexes, because every push inserts into each and every transition
    -- moves this one's entry: restore pages through live states in id order, retention through
    -- terminal states in id order (ids are time-ordered, so "older than" is an id range).
    -- (Schema 6 adds idx_far, the far tier's, below; schema 7 the trace context columns; schema 8
    -- group_key.)
    KEY idx_state_id (state, id)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- One row per state change, appended; /jobs/{id} reads a job's history from here.
-- Keyed by (job, version, state): a job's history is one range of the primary key, in order
-- (every change bumps the version), and the journal, which reads transitions from the Redis
-- outbox streams at least once, writes them with INSERT IGNORE, so a re-read is harmless.
-- (A delete's durable row and the script's row share a version and differ by state.)
CREATE TABLE IF NOT EXISTS transition (
    message_id  BIGINT UNSIGNED NOT NULL,
    version     INT UNSIGNED    NOT NULL,               -- the job's version after the change
    from_state  VARCHAR(16)     NOT NULL,               -- '' for a new job
    to_state    VARCHAR(16)     NOT NULL,
    at          BIGINT          NOT NULL,               -- unix ms
    actor       VARCHAR(200)    NOT NULL,               -- Redis key or thread that acted
    host        VARCHAR(64)     NOT NULL,               -- client address, or the instance's host
    instance    VARCHAR(64)     NOT NULL,
    attempts    INT UNSIGNED    NOT NULL DEFAULT 0,
    PRIMARY KEY (message_id, version, to_state)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- The schema generation this file creates; the daemon checks it at start.
-- Records of the journal that MySQL refused (a value a column cannot hold, say): kept here
-- rather than dropped, with the server's error, for an operator to look at and replay
-- (docs/operations.md, "Refused journal records"). The record is JSON, as the journal had it.
CREATE TABLE IF NOT EXISTS refused_record (
    seq         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    message_id  BIGINT UNSIGNED NOT NULL,
    at          BIGINT          NOT NULL,               -- when it was refused, unix ms
    error       VARCHAR(512)    CHARACTER SET utf8mb4 NOT NULL,
    record      MEDIUMBLOB      NOT NULL,
    instance    VARCHAR(64)     NOT NULL,
    PRIMARY KEY (seq),
    KEY idx_message (message_id)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- Schema 3: message.backoff for a table made by schema 2 (MariaDB's IF NOT EXISTS: applying
-- this file again changes nothing).
ALTER TABLE message ADD COLUMN IF NOT EXISTS backoff BIGINT NULL AFTER attempts;

-- Topic settings (docs/api.md "Topics"): one row per topic that was ever configured; a topic
-- without one has the defaults. `settings` is the canonical JSON (src/topicconf.h), '{}'-like
-- defaults after a DELETE. `seq` is the change's number in topic_change: every instance reads
-- `seq > the last it saw` (idx_seq) twice a second, so a change reaches the fleet within 1 s.
CREATE TABLE IF NOT EXISTS topic_setting (
    topic       VARCHAR(128)    NOT NULL,
    settings    TEXT            CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    seq         BIGINT UNSIGNED NOT NULL,
    updated_at  BIGINT          NOT NULL,               -- unix ms
    PRIMARY KEY (topic),
    KEY idx_seq (seq)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- Every change of a topic's settings, journaled like a job's transitions: who, when, and the
-- settings after it (a webhook secret is not copied here: "signed" stands for it).
CREATE TABLE IF NOT EXISTS topic_change (
    seq         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    topic       VARCHAR(128)    NOT NULL,
    at          BIGINT          NOT NULL,               -- unix ms
    actor       VARCHAR(200)    NOT NULL,
    host        VARCHAR(64)     NOT NULL,
    instance    VARCHAR(64)     NOT NULL,
    settings    TEXT            CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (seq),
    KEY idx_topic (topic, seq)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- Schema 4: tiers (docs/architecture.md, "Tiers"). A job due later than now + [queue] horizon is
-- written here only, as a message row in state 'far' (added at the end of the ENUM: an instant
-- change in MariaDB), and paged into Redis by its shard's pager shortly before it is due.
ALTER TABLE message MODIFY COLUMN state
    ENUM('delayed','ready','reserved','finished','deleted','dead','aborted','far') NOT NULL;

-- Far jobs per topic, changed in the same transactions as a far job's key (message.far_shard,
-- schema 6 below): /stats reads it in O(topics).
CREATE TABLE IF NOT EXISTS far_count (
    topic       VARCHAR(128)    NOT NULL,
    jobs        BIGINT          NOT NULL,
    PRIMARY KEY (topic)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- Far jobs that hold a bizKey. Redis keeps their bizKeys in the topic's index (so dedupe and
-- replace stay one atomic script across both tiers); this is the durable copy /reStore puts
-- back after a Redis loss.
CREATE TABLE IF NOT EXISTS far_biz (
    id          BIGINT UNSIGNED NOT NULL,
    topic       VARCHAR(128)    NOT NULL,
    biz_key     VARCHAR(128)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    run_at      BIGINT          NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- The pager's durable watermark, per shard: every far job of the shard due before
-- `paged_through` is in Redis (or was, and moved on). Written in the transaction that clears
-- the paged rows' far keys.
CREATE TABLE IF NOT EXISTS far_mark (
    shard         SMALLINT UNSIGNED NOT NULL,
    paged_through BIGINT          NOT NULL,             -- unix ms
    paged_at      BIGINT          NOT NULL,             -- when, unix ms
    paged         BIGINT UNSIGNED NOT NULL DEFAULT 0,   -- jobs paged in, in all
    PRIMARY KEY (shard)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- Schedules (docs/api.md "Schedules"): each fire pushes a job with bizKey "<id>@<fire time>".
-- fired_through is the durable watermark: every fire time up to it was pushed (or skipped by
-- catch_up); the instance that owns the schedule's shard advances it with a compare-and-set.
-- version and updated_at change with the definition (not the watermark): instances poll them.
CREATE TABLE IF NOT EXISTS schedule (
    id            BIGINT UNSIGNED NOT NULL,
    topic         VARCHAR(128)    NOT NULL,
    cron          VARCHAR(255)    NULL,                 -- NULL for an interval
    every_ms      BIGINT          NOT NULL DEFAULT 0,   -- 0 for a cron expression
    tz            VARCHAR(255)    NOT NULL DEFAULT 'UTC',
    job           MEDIUMBLOB      NOT NULL,             -- the job template, compact JSON
    catch_up      ENUM('skip','one','all') NOT NULL DEFAULT 'skip',
    paused        TINYINT         NOT NULL DEFAULT 0,
    anchor_ms     BIGINT          NOT NULL,             -- an interval fires at anchor + k * every
    fired_through BIGINT          NOT NULL,             -- unix ms
    missed_made   BIGINT          NOT NULL DEFAULT 0,   -- fires missed while down, made by catch_up
    missed_skipped BIGINT         NOT NULL DEFAULT 0,   -- and skipped
    created_at    BIGINT          NOT NULL,
    updated_at    BIGINT          NOT NULL,
    version       INT UNSIGNED    NOT NULL DEFAULT 1,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- GET /jobs?topic=&bizKey= (docs/api.md): the newest job pushed with each (topic, bizKey), for
-- when no live job holds the key in Redis. A table of its own rather than a (topic, biz_key)
-- index on `message`, which every push would pay for: the journal upserts a row here in the
-- push's group commit only when the push carries a bizKey. The higher id wins (ids are
-- time-ordered); `prev_id` is the one it displaced, so that a push that never became a job
-- (aborted: a duplicate, or Redis failed it) gives the key back to the job before it.
-- idx_id: retention deletes the rows of the messages it deletes, so that the table does not
-- grow with every bizKey ever used (schedules make one per fire).
CREATE TABLE IF NOT EXISTS biz_latest (
    topic       VARCHAR(128)    NOT NULL,
    biz_key     VARCHAR(128)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    id          BIGINT UNSIGNED NOT NULL,
    prev_id     BIGINT UNSIGNED NULL,
    PRIMARY KEY (topic, biz_key),
    KEY idx_id (id)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- Schema 6: the pager's index lives in `message` itself. A far job's key is (far_shard,
-- far_run_at, id): set by the push that makes it far, cleared in the transaction that pages it
-- in, deletes it or finds it moved on (architecture.md, "Tiers"); NULL on every other row.
-- Schema 4 kept the key in a table of its own, far_job: one more multi-row INSERT in every
-- push's group commit, about 10 % of a far push's cost in MySQL (docs/performance.md). Near
-- rows index (NULL, NULL, id), which never moves, so their transitions do not touch idx_far.
ALTER TABLE message ADD COLUMN IF NOT EXISTS far_shard SMALLINT UNSIGNED NULL AFTER updated_at,
    ADD COLUMN IF NOT EXISTS far_run_at BIGINT NULL AFTER far_shard,
    ADD KEY IF NOT EXISTS idx_far (far_shard, far_run_at);
-- A schema-4 far_job table: its keys move into message, then it goes (stop every hourglass
-- older than schema 6 first: they write far_job, and with the table gone they fail loudly
-- rather than write keys no pager reads). Prepared statements, so that applying this file
-- again, with far_job gone, changes nothing.
SET @hg_far_job_table := (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()
                          AND table_name = 'far_job' AND table_type = 'BASE TABLE');
SET @hg_step := IF(@hg_far_job_table, 'UPDATE message m JOIN far_job f ON f.id = m.id
    SET m.far_shard = f.shard, m.far_run_at = f.run_at', 'DO 0');
PREPARE hg_step FROM @hg_step;
EXECUTE hg_step;
SET @hg_step := IF(@hg_far_job_table, 'DROP TABLE far_job', 'DO 0');
PREPARE hg_step FROM @hg_step;
EXECUTE hg_step;
DEALLOCATE PREPARE hg_step;

-- Schema 7: a job's W3C Trace Context (docs/api.md, "Trace context"), as its push gave it:
-- NULL for a job without, which is most, so they cost a row nothing but two NULLs.
ALTER TABLE message ADD COLUMN IF NOT EXISTS traceparent VARCHAR(55) NULL AFTER far_run_at,
    ADD COLUMN IF NOT EXISTS tracestate VARCHAR(512) NULL AFTER traceparent;

-- Schema 8: a job's group (docs/api.md, "Groups": flow control by key), 1-128 bytes of UTF-8:
-- restore rebuilds a group's state in Redis from its jobs. NULL for a job without.
ALTER TABLE message ADD COLUMN IF NOT EXISTS group_key VARBINARY(128) NULL AFTER tracestate;

-- Schema 9: a job's push is recorded in its message row, not in a transition row of its own
-- (issue 34: that row was a third of a push's work in MySQL, and everything in it but who
-- pushed is in the message row already). `push_state` is the state the push gave the job
-- ('delayed', 'ready' or 'far'; a bizKey duplicate's abort is a transition after it), the
-- push's actor, client address and instance beside it; its time is created_at, its version 1.
-- NULL on rows written before schema 9, whose push has its transition row as before. A job's
-- history is the view below: read it, not `transition`, which no longer holds pushes.
ALTER TABLE message ADD COLUMN IF NOT EXISTS push_state VARCHAR(16) NULL AFTER group_key,
    ADD COLUMN IF NOT EXISTS push_actor VARCHAR(200) NULL AFTER push_state,
    ADD COLUMN IF NOT EXISTS push_host VARCHAR(64) NULL AFTER push_actor,
    ADD COLUMN IF NOT EXISTS push_instance VARCHAR(64) NULL AFTER push_host;

-- Every state change of every job, the push first: `transition` with each job's push made a
-- row again. `WHERE message_id = N` reads one primary-key range of each table (MariaDB pushes
-- the condition into both halves of the UNION).
CREATE OR REPLACE VIEW job_history AS
    SELECT id AS message_id, 1 AS version, '' AS from_state, push_state AS to_state, created_at AS at,
           push_actor AS actor, push_host AS host, push_instance AS instance, 0 AS attempts
      FROM message WHERE push_state IS NOT NULL
    UNION ALL
    SELECT message_id, version, from_state, to_state, at, actor, host, instance, attempts FROM transition;

CREATE TABLE IF NOT EXISTS schema_version (
    version     INT UNSIGNED    NOT NULL,
    applied_at  TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (version)
) ENGINE=InnoDB;

INSERT IGNORE INTO schema_version (version) VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9);
-- 2: refused_record, 3: topic settings, message.backoff, 4: tiers (state 'far', far_*),
-- 5: schedules, biz_latest, 6: far keys in message (far_shard, far_run_at; far_job dropped),
-- 7: message.traceparent, message.tracestate, 8: message.group_key, 9: message.push_* (a push's
-- own transition row no longer written) and the job_history view
