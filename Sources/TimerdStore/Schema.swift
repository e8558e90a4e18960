/// The schema of `state.db` and the forward migrations that build it.
///
/// The version lives in `PRAGMA user_version`: 0 is an empty file, each `Migration` moves the database
/// from `version - 1` to `version` in one transaction. Later versions append steps (typically
/// `ALTER TABLE … ADD COLUMN …` with a default), never edit earlier ones. A file whose version is newer
/// than the last step was written by a newer build and is moved aside, not downgraded.
///
/// Times are INTEGER nanoseconds since the Unix epoch (UTC); job options are a JSON array of
/// `[key, value]` pairs (`OptionsCoding`).
struct Migration: Sendable {
    var version: Int
    var statements: [String]
}

enum Schema {
    static let migrations: [Migration] = [
        Migration(version: 1, statements: [
            """
            CREATE TABLE jobs (
                name           TEXT PRIMARY KEY NOT NULL,
                options        TEXT NOT NULL,
                paused         INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
                runs           INTEGER NOT NULL DEFAULT 0,
                added_at       INTEGER NOT NULL,
                last_scheduled INTEGER,
                anchor         INTEGER
            )
            """,
            // No foreign key to jobs: config jobs have runs too. `id` orders a job's runs (newest largest).
            """
            CREATE TABLE runs (
                id           INTEGER PRIMARY KEY,
                job          TEXT NOT NULL,
                run          INTEGER NOT NULL,
                scheduled_at INTEGER,
                started_at   INTEGER NOT NULL,
                ended_at     INTEGER NOT NULL,
                result       TEXT NOT NULL,
                exit_code    INTEGER,
                http_status  INTEGER,
                lateness_ms  REAL,
                output       TEXT NOT NULL
            )
            """,
            "CREATE INDEX runs_by_job ON runs (job, id)",
            """
            CREATE TABLE config_job_fires (
                name           TEXT PRIMARY KEY NOT NULL,
                last_scheduled INTEGER NOT NULL
            )
            """,
        ]),
        // Jobs added by other users than timerd's own (docs/security.md); NULL: timerd's own user, which
        // every job written before this version belongs to (only that user could reach the socket then).
        Migration(version: 2, statements: [
            "ALTER TABLE jobs ADD COLUMN owner_uid INTEGER CHECK (owner_uid BETWEEN 0 AND 4294967295)",
        ]),
        // Cluster mode (docs/cluster.md): which node ran each run (NULL: this one, before clusters), and
        // which stored jobs are a cache of the cluster's shared jobs (etcd has the truth).
        Migration(version: 3, statements: [
            "ALTER TABLE runs ADD COLUMN node TEXT",
            "ALTER TABLE jobs ADD COLUMN shared INTEGER NOT NULL DEFAULT 0 CHECK (shared IN (0, 1))",
        ]),
        // `timerctl why`: each job's newest due fires and what became of each (ran, skipped, missed, held,
        // queued, waiting), numbered per job; a record is rewritten as its fire moves on (queued → ran).
        Migration(version: 4, statements: [
            """
            CREATE TABLE fires (
                job         TEXT NOT NULL,
                seq         INTEGER NOT NULL,
                scheduled   INTEGER NOT NULL,
                outcome     TEXT NOT NULL,
                run         INTEGER,
                lateness_ms REAL,
                result      TEXT,
                reason      TEXT,
                PRIMARY KEY (job, seq)
            ) WITHOUT ROWID
            """,
        ]),
        // A `CANCEL` of many jobs writes its jobs' names here, one row, and its `OK` is sent once that is
        // durable; the jobs' rows are deleted behind it in steps, each moving `done` on in the same
        // transaction, and the row goes with the last. Opening the file deletes the jobs of a row left
        // (the names from `done` on) before anything reads it (`StoreFile.finishCancels`). `done` has a
        // table of its own: an UPDATE rewrites the whole row, and the names can be megabytes.
        Migration(version: 5, statements: [
            "CREATE TABLE cancels (id INTEGER PRIMARY KEY, names TEXT NOT NULL)",
            "CREATE TABLE cancels_done (id INTEGER PRIMARY KEY, done INTEGER NOT NULL DEFAULT 0)",
        ]),
        // What each run used (`docs/observability.md`, "Resource accounting"); NULL where unknown, and for
        // the runs recorded before.
        Migration(version: 6, statements: [
            "ALTER TABLE runs ADD COLUMN cpu_usage_ms REAL",
            "ALTER TABLE runs ADD COLUMN memory_peak_bytes INTEGER",
            "ALTER TABLE runs ADD COLUMN io_read_bytes INTEGER",
            "ALTER TABLE runs ADD COLUMN io_write_bytes INTEGER",
        ]),
        // Which attempt at its fire each run was (`retries`, `docs/configuration.md`).
        Migration(version: 7, statements: [
            "ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1",
        ]),
        // What a run by hand added to its job (`RUN … env=… -- ARG…`), as JSON.
        Migration(version: 8, statements: [
            "ALTER TABLE runs ADD COLUMN parameters TEXT",
        ]),
        // How each run ended, in words, and the signal that ended it, so `show`'s last run after a restart
        // says what it said before; NULL for the runs recorded before (their reason is made up from the
        // exit code or result).
        Migration(version: 9, statements: [
            "ALTER TABLE runs ADD COLUMN reason TEXT",
            "ALTER TABLE runs ADD COLUMN signal INTEGER",
        ]),
    ]

    static var currentVersion: Int { migrations.last?.version ?? 0 }

    /// Applies the steps of `migrations` above the database's version, each in its own transaction.
    static func migrate(_ database: Database, migrations: [Migration]) throws(StoreError) {
        precondition(
            migrations.enumerated().allSatisfy { $0.element.version == $0.offset + 1 },
            "migration versions must be 1, 2, 3, …")
        let current = try database.userVersion
        for step in migrations where step.version > current {
            try database.executeScript("BEGIN IMMEDIATE")
            do {
                for statement in step.statements { try database.executeScript(statement) }
                // PRAGMA takes no parameters; the version is this build's own constant, not input.
                try database.executeScript("PRAGMA user_version = \(step.version)")
                try database.executeScript("COMMIT")
            } catch {
                if database.inTransaction { try? database.executeScript("ROLLBACK") }
                throw StoreError("migrating \(database.path) to schema version \(step.version): \(error.message)")
            }
        }
    }
}
