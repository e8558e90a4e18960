internal import CSQLite
import Dispatch
import TimerdCore

/// The daemon's durable state: jobs added at run time, their fire bookkeeping and run history, and the
/// last scheduled fire of config jobs, in `<state directory>/state.db` (SQLite, WAL, `synchronous=FULL`).
///
/// Every call runs on the store's own serial queue: reads wait for it (`queue.sync`), `apply` does not.
/// Changes submitted while a transaction is being written are group-committed in the next one, so many
/// callers share one fsync.
///
/// `Sendable` because its only state is two constants: the serial queue, and the `Connection` that holds
/// the SQLite handle and is only touched on that queue.
public final class StateStore: Sendable {
    private let queue: DispatchQueue
    private let connection: Connection

    private init(database: Database) {
        queue = DispatchQueue(label: "timerd.store")
        connection = Connection(database: database)
        queue.setSpecific(key: connection.queueKey, value: 1)
    }

    deinit {
        // Async: the last reference may go inside a `done` callback, on the queue itself. Pending writes
        // were queued before this, so they are committed first.
        let connection = connection
        queue.async { connection.close() }
    }

    // MARK: Opening

    /// Opens (creating) `<directory>/state.db`, brings its schema up to date and checks that it can write.
    ///
    /// A file that is not a database, fails `PRAGMA quick_check` or has a schema version newer than this
    /// build knows is moved aside to `state.db.corrupt-<UTC time>` (with its `-wal` and `-shm`) and a fresh
    /// database is created; `recovered` then says why and where the old file went. Nothing is deleted.
    /// Other failures throw, naming the path and the OS or SQLite error, and leave the file alone: the
    /// directory cannot be created or written, `state.db` is not writable (SQLite would open it read-only
    /// without a word), I/O errors, a lock held too long. `StoreError.isStorageFault` tells those (a fault
    /// of the disk, file system or file) from the rest (the path is not a directory, the file needs
    /// write-ahead logging it cannot have). The directory is created (mode 0700) when missing; a new
    /// `state.db` is created with mode 0600.
    public static func open(directory: String) throws(StoreError) -> (store: StateStore, recovered: String?) {
        try open(directory: directory, migrations: Schema.migrations, synchronous: .full)
    }

    static func open(
        directory: String, migrations: [Migration], synchronous: StoreFile.Synchronous
    ) throws(StoreError) -> (store: StateStore, recovered: String?) {
        try Files.makeDirectories(directory)
        let opened = try StoreFile.open(directory + "/state.db", migrations: migrations, synchronous: synchronous)
        do {
            try StoreFile.probe(opened.database, version: migrations.last?.version ?? 0)
            try Files.syncDirectory(directory)
        } catch {
            opened.database.close()
            throw error
        }
        return (StateStore(database: opened.database), opened.recovered)
    }

    // MARK: Reading

    /// The stored jobs, sorted by name.
    public func jobs() throws(StoreError) -> [StoredJob] {
        try onQueue { (database: Database) throws(StoreError) in
            try database.query(
                "SELECT name, options, paused, runs, added_at, last_scheduled, anchor, owner_uid, shared FROM jobs ORDER BY name"
            ) { (row: Row) throws(StoreError) in
                let name = row.text(0)
                let options: [KeyValue]
                do throws(StoreError) { options = try OptionsCoding.decode(row.text(1)) } catch {
                    throw StoreError("job \(name): \(error.message)")
                }
                return StoredJob(
                    name: name, options: options, paused: row.int(2) != 0, runs: row.int(3), addedAt: row.time(4),
                    lastScheduled: row.optionalTime(5), anchor: row.optionalTime(6),
                    ownerUID: row.optionalInt(7).map { UInt32(truncatingIfNeeded: $0) }, shared: row.int(8) != 0)
            }
        }
    }

    /// The last scheduled fire of each config job that has fired.
    public func configJobFires() throws(StoreError) -> [String: WallTime] {
        let pairs = try onQueue { (database: Database) throws(StoreError) in
            try database.query("SELECT name, last_scheduled FROM config_job_fires") { row in
                (row.text(0), row.time(1))
            }
        }
        return Dictionary(pairs, uniquingKeysWith: { _, last in last })
    }

    /// The job's newest `limit` runs (in the order recorded), newest first.
    public func history(job: String, limit: Int) throws(StoreError) -> [StoredRun] {
        guard limit > 0 else { return [] }
        return try onQueue { (database: Database) throws(StoreError) in
            try database.query(
                """
                SELECT job, run, scheduled_at, started_at, ended_at, result, exit_code, http_status, lateness_ms, output,
                    node
                FROM runs WHERE job = ?1 ORDER BY id DESC LIMIT ?2
                """, [.text(job), .integer(Int64(limit))]
            ) { row in
                StoredRun(
                    job: row.text(0), run: row.int(1), scheduledAt: row.optionalTime(2), startedAt: row.time(3),
                    endedAt: row.time(4), result: row.text(5), exitCode: row.optionalInt(6),
                    httpStatus: row.optionalInt(7), latenessMs: row.optionalDouble(8), output: row.text(9),
                    node: row.optionalText(10))
            }
        }
    }

    /// The job's newest `limit` due fires, newest first (`timerctl why`).
    public func dueFires(job: String, limit: Int) throws(StoreError) -> [StoredFire] {
        guard limit > 0 else { return [] }
        return try onQueue { (database: Database) throws(StoreError) in
            try database.query(
                """
                SELECT job, seq, scheduled, outcome, run, lateness_ms, result, reason
                FROM fires WHERE job = ?1 ORDER BY seq DESC LIMIT ?2
                """, [.text(job), .integer(Int64(limit))]
            ) { row in
                StoredFire(
                    job: row.text(0), sequence: UInt64(row.int(1)), scheduled: row.time(2), outcome: row.text(3),
                    run: row.optionalInt(4), latenessMs: row.optionalDouble(5), result: row.optionalText(6),
                    reason: row.optionalText(7))
            }
        }
    }

    /// Each job's newest fire record number, so records made after a restart follow the old ones.
    public func dueFireSequences() throws(StoreError) -> [String: UInt64] {
        let pairs = try onQueue { (database: Database) throws(StoreError) in
            try database.query("SELECT job, max(seq) FROM fires GROUP BY job") { row in (row.text(0), UInt64(row.int(1))) }
        }
        return Dictionary(pairs, uniquingKeysWith: { _, last in last })
    }

    /// `PRAGMA integrity_check`: "ok", or the problems found, one a line.
    public func integrityCheck() throws(StoreError) -> String {
        try onQueue { (database: Database) throws(StoreError) in
            try database.strings("PRAGMA integrity_check").joined(separator: "\n")
        }
    }

    // MARK: Writing

    /// Applies `changes` asynchronously, in one transaction with whatever else is waiting; `done` runs on
    /// the store's queue once that transaction is durably committed, or with the error. Batches are
    /// isolated by savepoints: one batch failing does not undo the others in its transaction (unless
    /// SQLite had to roll back the whole transaction, when all of them fail). `done` must not block, and
    /// may call the store's other methods.
    public func apply(_ changes: [StoreChange], done: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let connection = connection
        let queue = queue
        queue.async {
            connection.pending.append(Connection.Batch(changes: changes, done: done))
            if !connection.flushScheduled {
                // Runs after the submissions already queued: they all join this transaction.
                connection.flushScheduled = true
                queue.async { connection.flush() }
            }
        }
    }

    /// Writes background changes (fire bookkeeping, run history, `WHY` records): never reported to a
    /// caller. While writes fail they are held, in order, and written by the first transaction that
    /// commits (TODO: storage faults; for now the same as `apply` with the failure dropped).
    public func record(_ changes: [StoreChange]) {
        apply(changes) { _ in }
    }

    /// Whether writes work.
    public var health: StoreHealth { .ok }

    /// The store's counters since it was opened.
    public var counters: StoreCounters {
        var counters = StoreCounters()
        counters.transactions = transactions
        return counters
    }

    /// Applies `changes` (with whatever is pending) and returns once they are durably committed.
    public func applyAndWait(_ changes: [StoreChange]) throws(StoreError) {
        try sync { connection in connection.commitNow(changes) }.get()
    }

    /// Commits what is pending and closes the database. Later calls fail with "closed".
    public func close() {
        sync { connection in connection.close() }
    }

    /// Committed transactions so far (for tests of group commit).
    package var transactions: Int { sync { $0.transactions } }

    // MARK: The queue

    /// Runs `body` on the store's queue and waits; runs it in place when already there (a `done`).
    private func sync<T>(_ body: (Connection) -> T) -> T {
        if DispatchQueue.getSpecific(key: connection.queueKey) != nil { return body(connection) }
        return queue.sync { body(connection) }
    }

    private func onQueue<T>(_ body: (Database) throws(StoreError) -> T) throws(StoreError) -> T {
        try sync { connection -> Result<T, StoreError> in
            guard let database = connection.database else { return .failure(StoreError("the state store is closed")) }
            return Result { () throws(StoreError) -> T in try body(database) }
        }.get()
    }
}

/// The store's mutable state: the database handle (an `OpaquePointer` inside `Database`), the pending
/// batches and counters.
///
/// `@unchecked Sendable` because it is only ever used on the store's serial queue: every access is inside
/// a block submitted to that queue, or in code that checked it is running on it (`queueKey`). `queueKey`
/// itself is immutable.
private final class Connection: @unchecked Sendable {
    struct Batch {
        var changes: [StoreChange]
        var done: (@Sendable (Result<Void, StoreError>) -> Void)?
    }

    let queueKey = DispatchSpecificKey<UInt8>()
    var database: Database?
    var pending: [Batch] = []
    var flushScheduled = false
    var transactions = 0

    init(database: Database) { self.database = database }

    /// Writes every pending batch in one transaction and tells their callers.
    func flush() {
        flushScheduled = false
        let batches = pending
        pending = []
        guard !batches.isEmpty else { return }
        let results = write(batches.map(\.changes))
        for (batch, result) in zip(batches, results) { batch.done?(result) }
    }

    /// Writes the pending batches and `changes` in one transaction; returns the result for `changes`.
    func commitNow(_ changes: [StoreChange]) -> Result<Void, StoreError> {
        let batches = pending
        pending = []
        let results = write(batches.map(\.changes) + [changes])
        for (batch, result) in zip(batches, results) { batch.done?(result) }
        return results[results.count - 1]
    }

    func close() {
        flush()
        database?.close()
        database = nil
    }

    /// One transaction: each batch inside a savepoint of its own. Returns one result per batch.
    private func write(_ batches: [[StoreChange]]) -> [Result<Void, StoreError>] {
        func failAll(_ error: StoreError) -> [Result<Void, StoreError>] { batches.map { _ in .failure(error) } }
        guard let database else { return failAll(StoreError("the state store is closed")) }
        do {
            try database.execute("BEGIN IMMEDIATE")
        } catch {
            return failAll(error)
        }
        var results: [Result<Void, StoreError>] = []
        for changes in batches {
            do {
                try database.execute("SAVEPOINT batch")
                do {
                    for change in changes { try Self.apply(change, to: database) }
                    try database.execute("RELEASE batch")
                    results.append(.success(()))
                } catch {
                    // SQLite may have rolled the whole transaction back (I/O error, disk full): nothing holds.
                    guard database.inTransaction else { return failAll(error) }
                    try database.execute("ROLLBACK TO batch")
                    try database.execute("RELEASE batch")
                    results.append(.failure(error))
                }
            } catch {
                if database.inTransaction { try? database.execute("ROLLBACK") }
                return failAll(error)
            }
        }
        do {
            try database.execute("COMMIT")
        } catch {
            if database.inTransaction { try? database.execute("ROLLBACK") }
            return failAll(error)
        }
        transactions += 1
        return results
    }

    private static func apply(_ change: StoreChange, to database: Database) throws(StoreError) {
        switch change {
        case .putJob(let job):
            try database.execute(
                """
                INSERT INTO jobs (name, options, paused, runs, added_at, last_scheduled, anchor, owner_uid, shared)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                ON CONFLICT (name) DO UPDATE SET options = excluded.options, paused = excluded.paused,
                    runs = excluded.runs, added_at = excluded.added_at, last_scheduled = excluded.last_scheduled,
                    anchor = excluded.anchor, owner_uid = excluded.owner_uid, shared = excluded.shared
                """,
                [
                    .text(job.name), .text(OptionsCoding.encode(job.options)), .integer(job.paused ? 1 : 0),
                    .integer(Int64(job.runs)), SQLValue(job.addedAt), SQLValue(job.lastScheduled), SQLValue(job.anchor),
                    job.ownerUID.map { .integer(Int64($0)) } ?? .null, .integer(job.shared ? 1 : 0),
                ])
        case .deleteJob(let name):
            try database.execute("DELETE FROM runs WHERE job = ?1", [.text(name)])
            try database.execute("DELETE FROM fires WHERE job = ?1", [.text(name)])
            try database.execute("DELETE FROM jobs WHERE name = ?1", [.text(name)])
        case .setPaused(let name, let paused):
            try database.execute("UPDATE jobs SET paused = ?2 WHERE name = ?1", [.text(name), .integer(paused ? 1 : 0)])
        case .recordFire(let name, let runs, let lastScheduled):
            try database.execute(
                "UPDATE jobs SET runs = ?2, last_scheduled = coalesce(?3, last_scheduled) WHERE name = ?1",
                [.text(name), .integer(Int64(runs)), SQLValue(lastScheduled)])
        case .recordRun(let run, let keep):
            try database.execute(
                """
                INSERT INTO runs (job, run, scheduled_at, started_at, ended_at, result, exit_code, http_status,
                    lateness_ms, output, node)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                """,
                [
                    .text(run.job), .integer(Int64(run.run)), SQLValue(run.scheduledAt), SQLValue(run.startedAt),
                    SQLValue(run.endedAt), .text(run.result), SQLValue(run.exitCode), SQLValue(run.httpStatus),
                    SQLValue(run.latenessMs), .text(run.output), run.node.map { .text($0) } ?? .null,
                ])
            // Everything from the (keep+1)-th newest down; nothing when there are no more than `keep`.
            try database.execute(
                """
                DELETE FROM runs WHERE job = ?1
                    AND id <= (SELECT id FROM runs WHERE job = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)
                """, [.text(run.job), .integer(Int64(max(keep, 0)))])
        case .recordConfigJobFire(let name, let lastScheduled):
            try database.execute(
                """
                INSERT INTO config_job_fires (name, last_scheduled) VALUES (?1, ?2)
                ON CONFLICT (name) DO UPDATE SET last_scheduled = excluded.last_scheduled
                """, [.text(name), SQLValue(lastScheduled)])
        case .recordDueFire(let fire, let keep):
            try database.execute(
                """
                INSERT OR REPLACE INTO fires (job, seq, scheduled, outcome, run, lateness_ms, result, reason)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                """,
                [
                    .text(fire.job), .integer(Int64(fire.sequence)), SQLValue(fire.scheduled), .text(fire.outcome),
                    SQLValue(fire.run), SQLValue(fire.latenessMs), fire.result.map { .text($0) } ?? .null,
                    fire.reason.map { .text($0) } ?? .null,
                ])
            // A job's records are numbered one after the other: the ones `keep` or more below this one go,
            // a range of the primary key (a fire makes two writes, and this runs at every fire).
            let oldest = Int64(fire.sequence) - Int64(max(keep, 0))
            if oldest >= 1 {
                try database.execute("DELETE FROM fires WHERE job = ?1 AND seq <= ?2", [.text(fire.job), .integer(oldest)])
            }
        }
    }
}
