internal import CSQLite
import Dispatch
import TimerdCore
import TimerdSystem

/// The store's writing: the database handle, the changes waiting for a transaction, the backlog of
/// background changes held while writes fail, the health, and the retries.
///
/// A transaction writes, in order: a snapshot of the jobs when the file had to be made again, the held
/// background changes, then what was submitted since the last one (callers' batches each in a savepoint,
/// all or nothing; background changes likewise, those submitted one after the other together, dropped
/// one by one if SQLite refuses them). When it fails
/// as a whole (a storage fault: disk full, I/O error, read-only, the file removed or replaced), the
/// batches fail, the background changes are held, the handle is closed (the next attempt opens the file
/// afresh: a handle that saw a fault is not trusted, and no writable descriptor keeps the file system
/// from being remounted), and attempts go on with backoff until one commits. No timer runs while healthy.
///
/// `@unchecked Sendable` because all of its mutable state is only used on `queue`: every access is in a
/// block submitted to it, or in code that checked it is running on it (`queueKey`). `published` is a lock
/// of its own, for reading the health and counters without waiting for the queue.
final class Connection: @unchecked Sendable {
    struct Settings {
        var directory: String
        var migrations: [Migration]
        var synchronous: StoreFile.Synchronous
        var clock: any Clock
        /// The failpoint: while this file exists, every transaction fails as with SQLITE_IOERR.
        var faultFile: String?
        var backlogLimit: Int
        var firstRetry: Duration
        var longestRetry: Duration
        /// How long background changes wait for company before their own transaction starts (a caller's
        /// batch or a read takes them at once). Each transaction is an `fdatasync`: at 200 fires/s the
        /// fire and run records were 175 of them a second, one per record or two.
        var backgroundDelay: Duration = .milliseconds(50)

        var path: String { directory + "/state.db" }
        var version: Int { migrations.last?.version ?? 0 }
    }

    /// What `health` and `counters` read.
    struct Published {
        var health = StoreHealth.ok
        var counters = StoreCounters()
    }

    private enum Unit {
        /// A caller's batch: all or nothing, and `done` is told which.
        case critical([StoreChange], done: (Result<Void, StoreError>) -> Void)
        /// Background changes: held when the transaction fails.
        case background([StoreChange])
    }

    /// Writes failing since `since` (`start` on the monotonic clock).
    private struct Episode {
        var since: WallTime
        var start: MonoInstant
        var reason: String
        var lost = 0
    }

    let queue = DispatchQueue(label: "timerd.store")
    let queueKey = DispatchSpecificKey<UInt8>()
    let settings: Settings
    let published = Locked(Published())
    /// Background changes `post`ed from other threads and not yet taken onto the queue, in order.
    private let inbox = Locked<[[StoreChange]]>([])

    var snapshotProvider: (@Sendable () -> [StoreChange]?)?
    var healthHandler: (@Sendable (StoreHealthChange) -> Void)?
    var diagnosticHandler: (@Sendable (String) -> Void)?

    private var database: Database?
    /// The file `database` has open (kept while it is closed, to tell whether the path still names it).
    private var pin: PinnedFile?
    private var closed = false
    private var pending: [Unit] = []
    private var attemptScheduled = false
    private var backlog: Backlog
    /// The file at the path is not the one the daemon's jobs were written to: write them all again.
    private var needsSnapshot = false
    private var episode: Episode?
    private var counters = StoreCounters()
    private var retryDelay: Duration
    /// Only while failing: a one-shot timer, cancelled when writes work again (none runs while healthy).
    private var retryTimer: DispatchSourceTimer?

    init(_ opened: StoreFile.Opened, settings: Settings) {
        database = opened.database
        pin = opened.pin
        self.settings = settings
        backlog = Backlog(limit: settings.backlogLimit)
        retryDelay = settings.firstRetry
        queue.setSpecific(key: queueKey, value: 1)
    }

    // MARK: Submitting

    /// Hands background changes over from any thread. Only the first of a run wakes the queue, and
    /// `backgroundDelay` later, when it would have waited that long for company anyway: a hop per record
    /// woke the store's thread once a fire (0.85 thread wake-ups a fire at 1,000 fires/s, `perf`), for a
    /// transaction that waited for the others regardless. Whatever runs on the queue first takes what is
    /// here (`takeInbox`), so a record posted before a caller's batch or a read is written before it.
    func post(_ changes: [StoreChange]) {
        guard !changes.isEmpty else { return }
        let first = inbox.withLock { inbox in
            inbox.append(changes)
            return inbox.count == 1
        }
        guard first else { return }
        if settings.backgroundDelay > .zero {
            // From the IOWatcher's loop, when it next wakes up to half the delay later: a Dispatch timer
            // would wake libdispatch's timer thread for each.
            IOWatcher.shared.after(.now() + .nanoseconds(Int(settings.backgroundDelay.nanoseconds)),
                                   leeway: settings.backgroundDelay / 2, on: queue) { self.takeInbox() }
        } else {
            queue.async { self.takeInbox() }
        }
    }

    /// Submits what `post` left, in order, for a transaction that starts at once (the delay was waited
    /// before the queue was woken); `attempting`: for the transaction being started.
    func takeInbox(attempting: Bool = false) {
        let taken = inbox.withLock { inbox in
            let taken = inbox
            inbox = []
            return taken
        }
        for changes in taken { submitBackground(changes, startAttempt: !attempting) }
    }

    /// Queues a caller's batch for the next transaction, which starts at once (after what is queued).
    func submit(_ changes: [StoreChange], done: @escaping (Result<Void, StoreError>) -> Void) {
        takeInbox()
        pending.append(.critical(changes, done: done))
        scheduleAttempt()
    }

    /// Queues background changes: for the next transaction while writes work, into the backlog while
    /// they fail (after any batch still waiting, so the order holds), given up once closed.
    /// `startAttempt`: a transaction for them starts at once (else the caller is starting one).
    private func submitBackground(_ changes: [StoreChange], startAttempt: Bool) {
        guard !changes.isEmpty else { return }
        if closed {
            counters.lost += changes.count
        } else if episode != nil && pending.isEmpty {
            hold(changes)
        } else {
            pending.append(.background(changes))
            // While failing, only a caller's batch starts an attempt (the retries take the rest).
            if episode == nil && startAttempt { scheduleAttempt() }
            return
        }
        publish()
    }

    /// Writes what is waiting and `changes` in one transaction now; the result for `changes`.
    func commitNow(_ changes: [StoreChange]) -> Result<Void, StoreError> {
        var result: Result<Void, StoreError> = .failure(.closed(settings.path))
        takeInbox()
        pending.append(.critical(changes, done: { result = $0 }))
        attempt(retrying: false)
        return result
    }

    /// Attempts to write whatever waits or is held, once.
    func flush() {
        attempt(retrying: true)
    }

    /// Attempts to write what waits, then closes the database; later writes fail, held changes are lost.
    func close() {
        guard !closed else { return }
        attempt(retrying: true)
        closed = true
        stopRetrying()
        counters.lost += backlog.removeAll().count
        database?.close()
        database = nil
        pin = nil
        publish()
    }

    // MARK: Reading

    /// The database for a read, opened again if a fault closed it. Background changes still waiting
    /// for their transaction are written first, so a read sees every record submitted before it.
    func readable() throws(StoreError) -> Database {
        guard !closed else { throw .closed(settings.path) }
        takeInbox()
        if episode == nil && !pending.isEmpty { attempt(retrying: false) }
        if let database { return database }
        return try reopen()
    }

    // MARK: Writing

    private func scheduleAttempt() {
        guard !attemptScheduled else { return }
        attemptScheduled = true
        // Runs after the submissions already queued: they all join this transaction.
        queue.async { self.attempt(retrying: false) }
    }

    /// One transaction for what is held and what is pending; with nothing pending, only when `retrying`
    /// (a retry, `flush`, `close`) and failing. While failing, a one-page probe commits first, so a long
    /// backlog is not written again and again to a full disk.
    private func attempt(retrying: Bool) {
        attemptScheduled = false
        takeInbox(attempting: true)
        let units = pending
        pending = []
        if closed { return refuse(units) }
        guard !units.isEmpty || (retrying && (episode != nil || !backlog.isEmpty)) else { return }
        let held = backlog.removeAll()
        var dropped: [String] = []
        var results: [Result<Void, StoreError>] = []
        var droppedHeld = 0
        let rebuilt: Bool
        do {
            let database = try ready()
            if episode != nil {
                try database.execute("BEGIN IMMEDIATE")
                try database.execute("PRAGMA user_version = \(settings.version)")
                try commit(database)
            }
            rebuilt = needsSnapshot
            try database.execute("BEGIN IMMEDIATE")
            if rebuilt { try writeSnapshot(database, dropped: &dropped) }
            droppedHeld = try writeBackground(held, database, dropped: &dropped)
            // Units of a kind one after the other are written together, in their order: background
            // changes (a cancel's deletions come a removal step each: together they are a few set-wise
            // statements, not a few per step), and callers' batches (a connection's pipelined `ADD`s,
            // one savepoint for them all instead of one each).
            var background: [StoreChange] = []
            var batches: [[StoreChange]] = []
            for unit in units {
                switch unit {
                case .critical(let changes, _):
                    _ = try writeBackground(background, database, dropped: &dropped)
                    background.removeAll()
                    batches.append(changes)
                case .background(let changes):
                    results += try writeEach(batches, database).map { $0.map { .failure($0) } ?? .success(()) }
                    batches.removeAll()
                    background += changes
                }
            }
            results += try writeEach(batches, database).map { $0.map { .failure($0) } ?? .success(()) }
            _ = try writeBackground(background, database, dropped: &dropped)
            try commit(database)
        } catch {
            return failed(error, units: units, held: held)
        }
        counters.transactions += 1
        counters.dropped += dropped.count
        needsSnapshot = needsSnapshot && !rebuilt
        let ended = episode
        if ended != nil {
            episode = nil
            stopRetrying()
        }
        publish()
        if let ended {
            healthHandler?(.recovered(
                after: settings.clock.monotonicNow - ended.start, written: held.count - droppedHeld, lost: ended.lost,
                rebuilt: rebuilt))
        }
        for line in dropped { diagnosticHandler?(line) }
        var outcomes = results.makeIterator()
        for case .critical(_, let done) in units { done(outcomes.next()!) }
    }

    /// The transaction failed as a whole: nothing of it was written.
    private func failed(_ error: StoreError, units: [Unit], held: [StoreChange]) {
        // Never leave a transaction open (after some errors SQLite keeps it: the next statements would run
        // inside it and nothing be written until a ROLLBACK), nor trust the handle: the next attempt opens
        // the file again.
        if let database, database.inTransaction { try? database.execute("ROLLBACK") }
        database?.close()
        database = nil
        let background = units.flatMap { unit -> [StoreChange] in
            if case .background(let changes) = unit { changes } else { [] }
        }
        let first = episode == nil
        if first {
            let now = settings.clock.now()
            episode = Episode(since: now.wall, start: now.mono, reason: error.reason)
        }
        episode?.reason = error.reason
        counters.writeErrors += 1
        hold(held + background)
        publish()
        if first, let episode { healthHandler?(.failing(since: episode.since, reason: episode.reason)) }
        scheduleRetry()
        for case .critical(_, let done) in units { done(.failure(error)) }
    }

    /// The store is closed: batches fail, background changes are lost.
    private func refuse(_ units: [Unit]) {
        for unit in units {
            switch unit {
            case .critical(_, let done): done(.failure(.closed(settings.path)))
            case .background(let changes): counters.lost += changes.count
            }
        }
        publish()
    }

    /// Appends to the backlog (failing), counting what its limit gives up.
    private func hold(_ changes: [StoreChange]) {
        let lost = backlog.append(contentsOf: changes)
        counters.lost += lost
        episode?.lost += lost
    }

    /// The next attempt after `retryDelay`, which doubles up to `longestRetry` (instead of an earlier one).
    private func scheduleRetry() {
        guard !closed else { return }
        let timer = retryTimer ?? DispatchSource.makeTimerSource(queue: queue)
        if retryTimer == nil {
            retryTimer = timer
            timer.setEventHandler { [weak self] in
                guard let self, episode != nil else { return }
                attempt(retrying: true)
            }
            timer.activate()
        }
        timer.schedule(deadline: .now() + .nanoseconds(Int(retryDelay.nanoseconds)))
        retryDelay = min(retryDelay * 2, settings.longestRetry)
    }

    private func stopRetrying() {
        retryTimer?.cancel()
        retryTimer = nil
        retryDelay = settings.firstRetry
    }

    private func publish() {
        var counters = counters
        counters.backlog = backlog.count
        let health = episode.map { StoreHealth.failing(since: $0.since, reason: $0.reason) } ?? .ok
        published.withLock { $0 = Published(health: health, counters: counters) }
    }

    /// The open database, checked: the path still names its file, and no transaction is open.
    private func ready() throws(StoreError) -> Database {
        guard let database else { return try reopen() }
        do {
            try pin?.check(settings.path)
        } catch {
            // SQLite neither checkpoints nor deletes the log of a file that moved when it closes it: left at
            // the path, the next database there would take its pages for its own. Into the file it belongs
            // to (wherever that is now), and the log left empty.
            try? database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            throw error
        }
        if database.inTransaction { try database.execute("ROLLBACK") }
        return database
    }

    /// Opens the file again: the same file as before, or (removed, replaced) whatever is at the path now,
    /// a new database if nothing is (the directory made again, mode 0700), and then the jobs are written
    /// to it again before anything else.
    private func reopen() throws(StoreError) -> Database {
        let path = settings.path
        try Files.makeDirectories(settings.directory)
        if let pin, pin.isAt(path) {
            database = try StoreFile.reopen(path, synchronous: settings.synchronous)
        } else {
            let opened = try StoreFile.open(path, migrations: settings.migrations, synchronous: settings.synchronous)
            database = opened.database
            pin = opened.pin
            needsSnapshot = true
            try Files.syncDirectory(settings.directory)
            if let recovered = opened.recovered { diagnosticHandler?(recovered) }
        }
        return database!
    }

    /// COMMIT, unless the failpoint's file exists: then the transaction stays open and this throws as
    /// SQLite's SQLITE_IOERR would, so the path that cleans up after a failed COMMIT runs.
    private func commit(_ database: Database) throws(StoreError) {
        if let file = settings.faultFile, Files.exists(file) {
            throw .fault(
                "\(settings.path): disk I/O error (injected: \(file) exists)",
                reason: "I/O error (SQLITE_IOERR, injected: \(file) exists)", sqliteCode: SQLITE_IOERR)
        }
        try database.execute("COMMIT")
    }

    /// The jobs as the daemon has them, in place of the stored ones (the history stays).
    /// Without them (no provider, or none ready yet) this attempt fails as a storage fault and a later one
    /// tries again: a fresh file without the jobs would lose them at the next start.
    private func writeSnapshot(_ database: Database, dropped: inout [String]) throws(StoreError) {
        guard let jobs = snapshotProvider?() else {
            throw .fault(
                "\(settings.path): a fresh state database waits for the daemon's jobs",
                reason: "\(settings.path) is new: waiting for the jobs to write into it")
        }
        try database.execute("DELETE FROM jobs")
        try database.execute("DELETE FROM config_job_fires")
        _ = try writeBackground(jobs, database, dropped: &dropped)
    }

    /// `changes` in a savepoint of their own: nil when written, the error when SQLite refused one of them
    /// for what it is (none of them is written then). Storage faults throw.
    private func writeIsolated(_ changes: [StoreChange], _ database: Database) throws(StoreError) -> StoreError? {
        try database.execute("SAVEPOINT unit")
        do {
            try database.apply(changes)
            try database.execute("RELEASE unit")
            return nil
        } catch {
            guard !error.isStorageFault && database.inTransaction else { throw error }
            try database.execute("ROLLBACK TO unit")
            try database.execute("RELEASE unit")
            return error
        }
    }

    /// Groups of changes, all in one savepoint, or each group in a savepoint of its own when SQLite
    /// refuses one (not a storage fault): what SQLite refused of each group, nil where it was written.
    private func writeEach(_ groups: [[StoreChange]], _ database: Database) throws(StoreError) -> [StoreError?] {
        if groups.count > 1, try writeIsolated(groups.flatMap { $0 }, database) == nil {
            return Array(repeating: nil, count: groups.count)
        }
        return try groups.map { changes throws(StoreError) in try writeIsolated(changes, database) }
    }

    /// Background changes: together, or one by one when SQLite refuses one, which is then dropped with a
    /// line in `dropped` (never retried: it would fail again). Returns how many were dropped.
    private func writeBackground(
        _ changes: [StoreChange], _ database: Database, dropped: inout [String]
    ) throws(StoreError) -> Int {
        var count = 0
        for (change, error) in zip(changes, try writeEach(changes.map { [$0] }, database)) {
            guard let error else { continue }
            dropped.append("dropped a background change (\(change.summary)) that the state database refuses: \(error.message)")
            count += 1
        }
        return count
    }
}
