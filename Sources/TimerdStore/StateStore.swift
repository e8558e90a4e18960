import Dispatch
import TimerdCore
import TimerdSystem

/// The daemon's durable state: jobs added at run time, their fire bookkeeping and run history, and the
/// last scheduled fire of config jobs, in `<state directory>/state.db` (SQLite, WAL, `synchronous=FULL`).
///
/// Two kinds of writes: a caller's batch (`apply`: a request such as ADD or CANCEL) is all or nothing and
/// told which; background changes (`record`: fire bookkeeping, run history) are never reported, and while
/// writes fail they are held, in order, and written first by the next transaction that commits. Changes
/// submitted while a transaction is being written are group-committed in the next one, so many callers
/// share one fsync.
///
/// When writes fail for a storage fault (`StoreError.isStorageFault`) the store is `failing` until a
/// transaction commits again: it retries on its own (0.5 s doubling to 5 s), and a new `apply` tries at
/// once. Before each transaction it checks (one `stat`) that the path still names the file it has open: a
/// removed or replaced `state.db` is a fault too, and the retry starts a new file at the path with the
/// daemon's jobs (`setSnapshotProvider`). No timer runs while writes work.
///
/// Every call runs on the store's own serial queue: reads wait for it (`queue.sync`), `apply` and `record`
/// do not; `health` and `counters` read a copy under a lock and never wait for a transaction.
///
/// `Sendable` because its only state is the `Connection`, whose mutable state is only touched on its
/// serial queue.
public final class StateStore: Sendable {
    /// Internal, not private: tests wait on its queue.
    let connection: Connection

    private init(connection: Connection) {
        self.connection = connection
    }

    deinit {
        // Async: the last reference may go inside a `done` callback, on the queue itself. Pending writes
        // were queued before this, so they are attempted first.
        let connection = connection
        connection.queue.async { connection.close() }
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
    ///
    /// `clock` dates health changes (nil: the host's clocks). `faultFile` is the failpoint
    /// `store-io-error`: while a file exists at that path, every transaction fails as with SQLITE_IOERR
    /// after its statements ran and before COMMIT.
    public static func open(
        directory: String, clock: (any Clock)? = nil, faultFile: String? = nil
    ) throws(StoreError) -> (store: StateStore, recovered: String?) {
        try open(directory: directory, migrations: Schema.migrations, synchronous: .full, clock: clock, faultFile: faultFile)
    }

    static func open(
        directory: String, migrations: [Migration], synchronous: StoreFile.Synchronous, clock: (any Clock)? = nil,
        faultFile: String? = nil, backlogLimit: Int = 100_000,
        retry: (first: Duration, longest: Duration) = (.milliseconds(500), .seconds(5)),
        backgroundDelay: Duration = .milliseconds(50)
    ) throws(StoreError) -> (store: StateStore, recovered: String?) {
        let settings = Connection.Settings(
            directory: directory, migrations: migrations, synchronous: synchronous, clock: clock ?? HostClocks(),
            faultFile: faultFile, backlogLimit: backlogLimit, firstRetry: retry.first, longestRetry: retry.longest,
            backgroundDelay: backgroundDelay)
        try Files.makeDirectories(directory)
        let opened = try StoreFile.open(settings.path, migrations: migrations, synchronous: synchronous)
        do {
            try StoreFile.probe(opened.database, version: settings.version)
            try Files.syncDirectory(directory)
        } catch {
            opened.database.close()
            throw error
        }
        return (StateStore(connection: Connection(opened, settings: settings)), opened.recovered)
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
                    node, cpu_usage_ms, memory_peak_bytes, io_read_bytes, io_write_bytes, attempt, parameters, reason, signal
                FROM runs WHERE job = ?1 ORDER BY id DESC LIMIT ?2
                """, [.text(job), .integer(Int64(limit))]
            ) { row in
                StoredRun(
                    job: row.text(0), run: row.int(1), scheduledAt: row.optionalTime(2), startedAt: row.time(3),
                    endedAt: row.time(4), result: row.text(5), exitCode: row.optionalInt(6),
                    httpStatus: row.optionalInt(7), latenessMs: row.optionalDouble(8), output: row.text(9),
                    node: row.optionalText(10), cpuUsageMs: row.optionalDouble(11), memoryPeakBytes: row.optionalInt(12),
                    ioReadBytes: row.optionalInt(13), ioWriteBytes: row.optionalInt(14), attempt: row.int(15),
                    parameters: row.optionalText(16), reason: row.optionalText(17), signal: row.optionalInt(18))
            }
        }
    }

    /// The highest run number each of `jobs` has in its history or its due fires (jobs with none are not
    /// in the answer): where a config job's run numbers go on after a restart. One indexed look-up a job.
    public func highestRuns(of jobs: [String]) throws(StoreError) -> [String: Int] {
        guard !jobs.isEmpty else { return [:] }
        let pairs = try onQueue { (database: Database) throws(StoreError) in
            var found: [(String, Int)] = []
            for job in jobs {
                let highest = try database.query(
                    """
                    SELECT max(coalesce((SELECT max(run) FROM runs WHERE job = ?1), 0),
                               coalesce((SELECT max(run) FROM fires WHERE job = ?1), 0))
                    """, [.text(job)]
                ) { row in row.int(0) }
                if let highest = highest.first, highest > 0 { found.append((job, highest)) }
            }
            return found
        }
        return Dictionary(pairs, uniquingKeysWith: { _, last in last })
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

    /// Applies a caller's batch asynchronously, all or nothing, in one transaction with whatever else is
    /// waiting: `done(.success)` once it is durably committed; otherwise none of `changes` is written and
    /// `done` gets the error (a storage fault fails the whole transaction; a change SQLite refuses fails
    /// its own batch only). While writes fail, it also starts an attempt at once. `done` runs on the
    /// store's queue, must not block, and may call the store's other methods.
    public func apply(_ changes: [StoreChange], done: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let connection = connection
        connection.queue.async { connection.submit(changes, done: done) }
    }

    /// Applies several callers' batches as `apply` does each (all or nothing each, in order, in the same
    /// transaction): one hop to the store's queue for them all, and one `done` with their results in
    /// order once all are committed or failed.
    public func apply(batches: [[StoreChange]], done: @escaping @Sendable ([Result<Void, StoreError>]) -> Void) {
        guard !batches.isEmpty else { return done([]) }
        let connection = connection
        connection.queue.async {
            // Every `done` below runs on the store's queue, one after the other.
            var results: [Result<Void, StoreError>?] = Array(repeating: nil, count: batches.count)
            var waiting = batches.count
            for (index, changes) in batches.enumerated() {
                connection.submit(changes) { result in
                    results[index] = result
                    waiting -= 1
                    if waiting == 0 { done(results.map { $0! }) }
                }
            }
        }
    }

    /// Writes background changes (fire bookkeeping, run history, `WHY` records, jobs that fires add or
    /// delete): never reported to a caller. While writes fail they are held, in order, coalesced (a newer
    /// fire of a job replaces the older; history beyond a job's `keep` goes; a deleted job's changes go),
    /// and written first by the first transaction that commits; beyond the backlog's limit the oldest
    /// history is given up (`counters.lost`), job state never. One SQLite refuses for what it is (not a
    /// storage fault) is dropped and reported through `onDiagnostic`.
    public func record(_ changes: [StoreChange]) {
        connection.post(changes)
    }

    /// Applies `changes` (with whatever is pending) and returns once they are durably committed.
    public func applyAndWait(_ changes: [StoreChange]) throws(StoreError) {
        try sync { connection in connection.commitNow(changes) }.get()
    }

    /// Waits until everything submitted before it has been attempted once (while failing, the held
    /// changes once more). For the stop; from any thread but the store's queue (on it, runs in place).
    public func flush() {
        sync { connection in connection.flush() }
    }

    /// Attempts what is pending and closes the database. Later calls fail with "closed"; what is still
    /// held is lost.
    public func close() {
        sync { connection in connection.close() }
    }

    // MARK: Health

    /// Whether writes work (a copy: never waits for a transaction).
    public var health: StoreHealth { connection.published.withLock { $0.health } }

    /// The store's counters since it was opened (a copy: never waits for a transaction).
    public var counters: StoreCounters { connection.published.withLock { $0.counters } }

    /// Sets the one handler of health changes, called on the store's queue exactly once per transition:
    /// `.failing` at an episode's first failure, `.recovered` when a transaction commits again.
    public func onHealthChange(_ handler: @escaping @Sendable (StoreHealthChange) -> Void) {
        sync { connection in connection.healthHandler = handler }
    }

    /// Sets the one handler of the store's other notices, one line each, for the log: a background change
    /// SQLite refused and that was dropped, an unusable file found at the path and moved aside while
    /// writes were failing. Called on the store's queue.
    public func onDiagnostic(_ handler: @escaping @Sendable (String) -> Void) {
        sync { connection in connection.diagnosticHandler = handler }
    }

    /// Sets what writes the jobs again into a new file after `state.db` was removed or replaced: `putJob`
    /// for every durable job and `recordConfigJobFire` for every config job that has fired. The store
    /// deletes the stored jobs and config jobs' fires first, in the same transaction, so the file matches
    /// the daemon; the history stays. Called on the store's queue, at each attempt that needs it; nil
    /// (not ready yet) makes that attempt fail, and a later one asks again.
    public func setSnapshotProvider(_ provider: @escaping @Sendable () -> [StoreChange]?) {
        sync { connection in connection.snapshotProvider = provider }
    }

    /// Committed transactions so far (for tests of group commit).
    package var transactions: Int { counters.transactions }

    // MARK: The queue

    /// Runs `body` on the store's queue and waits; runs it in place when already there (a `done`).
    private func sync<T>(_ body: (Connection) -> T) -> T {
        if DispatchQueue.getSpecific(key: connection.queueKey) != nil { return body(connection) }
        return connection.queue.sync { body(connection) }
    }

    private func onQueue<T>(_ body: (Database) throws(StoreError) -> T) throws(StoreError) -> T {
        try sync { connection -> Result<T, StoreError> in
            Result { () throws(StoreError) -> T in try body(try connection.readable()) }
        }.get()
    }
}

/// The host's clocks: the monotonic one as Dispatch counts it, and `CLOCK_REALTIME`.
private struct HostClocks: Clock {
    func now() -> Instant {
        let wall = SystemClock.wallClockNow()
        return Instant(
            mono: MonoInstant(nanosecondsSinceBoot: DispatchTime.now().uptimeNanoseconds),
            wall: WallTime(seconds: wall.seconds, nanoseconds: Int64(wall.nanoseconds)))
    }
}
