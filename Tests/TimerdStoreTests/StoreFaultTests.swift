import Glibc
import Synchronization
import Testing
import TimerdCore
@testable import TimerdStore

/// Storage faults: a failed batch leaves nothing, background changes are held and written once writes
/// work again, health changes are reported once each, a removed or replaced file is made again.
@Suite struct StoreFaultTests {
    /// Retries fast, so the tests wait for them in milliseconds.
    static let retry = (first: Duration.milliseconds(10), longest: Duration.milliseconds(50))

    /// What the store reported, kept apart from the fixture so that its handlers do not hold the store.
    final class Reports: Sendable {
        let changes = Mutex<[StoreHealthChange]>([])
        let diagnostics = Mutex<[String]>([])
    }

    /// A store in `<temporary>/state` with the failpoint `<temporary>/fault`, a manual clock and the health
    /// changes it reports.
    final class Fixture: Sendable {
        let dir: TemporaryDirectory
        let store: StateStore
        let clock = ManualClock(wall: t0)
        let reports = Reports()
        var stateDirectory: String { dir.path + "/state" }
        var path: String { stateDirectory + "/state.db" }
        var faultFile: String { dir.path + "/fault" }

        init(in dir: TemporaryDirectory? = nil, stateDirectory: String? = nil, backlogLimit: Int = 100_000) throws {
            let dir = try dir ?? TemporaryDirectory()
            self.dir = dir
            store = try StateStore.open(
                directory: stateDirectory ?? dir.path + "/state", migrations: Schema.migrations, synchronous: .full,
                clock: clock, faultFile: dir.path + "/fault", backlogLimit: backlogLimit, retry: StoreFaultTests.retry
            ).store
            store.onHealthChange { [reports] change in reports.changes.withLock { $0.append(change) } }
            store.onDiagnostic { [reports] line in reports.diagnostics.withLock { $0.append(line) } }
        }

        func close() {
            store.close()
            dir.remove()
        }

        func injectFault() throws { try writeBytes(faultFile, []) }
        func healFault() { unlink(faultFile) }

        var reported: [StoreHealthChange] { reports.changes.withLock { $0 } }
        var diagnostics: [String] { reports.diagnostics.withLock { $0 } }
        var isFailing: Bool { if case .failing = store.health { true } else { false } }

        /// Waits for writes to work again (the store's own retries, no new request), and for the handler
        /// to have heard of it (health is published before the handler is called).
        func waitForRecovery() -> Bool {
            eventually {
                guard store.health == .ok else { return false }
                if case .recovered? = reported.last { return true }
                return reported.isEmpty
            }
        }

        /// The jobs in the file, read by a connection of its own.
        func jobsInFile() throws -> [String] {
            let database = try Database(path: path)
            defer { database.close() }
            return try database.strings("SELECT name FROM jobs ORDER BY name")
        }
    }

    @Test func aFailedBatchLeavesNothingAndHeldChangesAreWrittenOnceWritesWork() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let store = fixture.store
        try store.applyAndWait([.putJob(job("a")), .recordRun(run("a", 1), keep: 10)])
        #expect(store.health == .ok)

        try fixture.injectFault()
        let error = try #require(throws: StoreError.self) {
            try store.applyAndWait([.putJob(job("b")), .recordRun(run("b", 1), keep: 10), .deleteJob("a")])
        }
        #expect(error.isStorageFault)
        #expect(error.reason.contains("I/O error (SQLITE_IOERR"), "\(error.reason)")
        #expect(store.health == .failing(since: t0, reason: error.reason))
        #expect(store.counters.writeErrors >= 1)
        // None of the batch: b is not there and a is.
        #expect(try fixture.jobsInFile() == ["a"])
        // And no transaction was left open (the failpoint leaves it open before COMMIT): another connection
        // gets the write lock at once.
        do {
            let other = try Database(path: fixture.path)
            defer { other.close() }
            try other.execute("BEGIN IMMEDIATE")
            try other.execute("ROLLBACK")
        }

        // Background changes while failing are held, not lost; the retries go on failing meanwhile.
        store.record([.recordFire("a", runs: 5, lastScheduled: t0 + .seconds(300)), .recordRun(run("a", 2), keep: 10)])
        #expect(eventually { store.counters.backlog == 2 })
        let errorsBefore = store.counters.writeErrors
        #expect(eventually { store.counters.writeErrors > errorsBefore + 2 })
        #expect(fixture.reported.count == 1)
        #expect(try store.history(job: "a", limit: 10).map(\.run) == [1])

        fixture.clock.advance(by: .seconds(42))
        fixture.healFault()
        #expect(fixture.waitForRecovery())
        #expect(fixture.reported == [
            .failing(since: t0, reason: error.reason), .recovered(after: .seconds(42), written: 2, lost: 0, rebuilt: false),
        ])
        #expect(store.counters.backlog == 0)
        #expect(store.counters.lost == 0)
        var expected = job("a")
        expected.runs = 5
        expected.lastScheduled = t0 + .seconds(300)
        #expect(try store.jobs() == [expected])
        #expect(try store.history(job: "a", limit: 10).map(\.run) == [2, 1])
        #expect(try store.history(job: "b", limit: 10) == [])

        // The next write starts clean: it commits, and nothing of the failed batch comes with it.
        let transactions = store.counters.transactions
        try store.applyAndWait([.putJob(job("c"))])
        #expect(store.counters.transactions == transactions + 1)
        #expect(try fixture.jobsInFile() == ["a", "c"])
        #expect(fixture.reported.count == 2)
    }

    @Test func aNewBatchTriesAtOnceAndCommitsAfterTheHeldChanges() throws {
        // No retries of its own within the test (a minute): the batch's attempt writes the backlog.
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(
            directory: dir.path + "/state", migrations: Schema.migrations, synchronous: .full, faultFile: dir.path + "/fault",
            retry: (.seconds(60), .seconds(60)))
        defer { store.close() }
        try store.applyAndWait([.putJob(job("a"))])
        try writeBytes(dir.path + "/fault", [])
        #expect(throws: StoreError.self) { try store.applyAndWait([.putJob(job("b"))]) }
        store.record([.recordRun(run("a", 1), keep: 10), .recordRun(run("a", 2), keep: 10)])
        #expect(eventually { store.counters.backlog == 2 })
        unlink(dir.path + "/fault")
        // The held runs of a come first, so deleting a leaves none of them.
        try store.applyAndWait([.deleteJob("a")])
        #expect(store.health == .ok)
        #expect(store.counters.backlog == 0)
        #expect(try store.jobs() == [])
        #expect(try store.history(job: "a", limit: 10) == [])
    }

    @Test func heldChangesAreCoalescedAndTheLimitCostsHistoryOnly() throws {
        let fixture = try Fixture(backlogLimit: 10)
        defer { fixture.close() }
        let store = fixture.store
        try store.applyAndWait([.putJob(job("a")), .putJob(job("gone")), .recordRun(run("gone", 1), keep: 10)])
        try fixture.injectFault()
        #expect(throws: StoreError.self) { try store.applyAndWait([.putJob(job("b"))]) }
        // 20 fires of a: one held. Runs of gone, then gone deleted: none held, and its stored run goes too.
        for number in 1...20 {
            store.record([.recordFire("a", runs: number, lastScheduled: t0 + .seconds(Int64(number)))])
        }
        store.record([.recordRun(run("gone", 2), keep: 10), .deleteJob("gone")])
        // 12 runs of x (keep 5): 5 held, 7 pruned as writing them would have, not lost.
        store.record((1...12).map { .recordRun(run("x", $0), keep: 5) })
        #expect(eventually { store.counters.backlog == 7 })
        #expect(store.counters.lost == 0)
        // Over the limit of 10: the oldest runs of x go, counted as lost; job rows never.
        store.record((1...6).map { .putJob(job("new-\($0)")) })
        #expect(eventually { store.counters.backlog == 10 })
        #expect(store.counters.lost == 3)
        fixture.healFault()
        #expect(fixture.waitForRecovery())
        #expect(fixture.reported.last == .recovered(after: .zero, written: 10, lost: 3, rebuilt: false))
        #expect(try store.jobs().map(\.name) == ["a"] + (1...6).map { "new-\($0)" })
        #expect(try store.jobs().first?.runs == 20)
        #expect(try store.history(job: "gone", limit: 10) == [])
        #expect(try store.history(job: "x", limit: 20).map(\.run) == [12, 11])
        #expect(store.counters.lost == 3)
    }

    @Test func aChangeSQLiteRefusesIsDroppedOnceAndReported() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let store = fixture.store
        // A change SQLite refuses for what it is (SQLITE_CONSTRAINT): a trigger the test adds.
        let database = try Database(path: fixture.path)
        try database.executeScript("CREATE TRIGGER refuse BEFORE INSERT ON runs WHEN NEW.job = 'refused' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
        database.close()
        store.record([.putJob(job("a")), .recordRun(run("refused", 1), keep: 10), .recordRun(run("a", 1), keep: 10)])
        store.flush()
        #expect(store.health == .ok)
        #expect(store.counters.dropped == 1)
        #expect(store.counters.writeErrors == 0)
        #expect(try store.jobs().map(\.name) == ["a"])
        #expect(try store.history(job: "a", limit: 10).map(\.run) == [1])
        let lines = fixture.diagnostics
        #expect(lines.count == 1)
        #expect(lines.first?.contains("recordRun 1 of refused") == true, "\(lines)")
        // A caller's batch with it fails whole, and the transaction goes on.
        let error = try #require(throws: StoreError.self) {
            try store.applyAndWait([.putJob(job("c")), .recordRun(run("refused", 2), keep: 10)])
        }
        #expect(!error.isStorageFault)
        #expect(try store.jobs().map(\.name) == ["a"])
        #expect(store.health == .ok)
        #expect(fixture.reported == [])
        // Callers' batches that share a transaction are written together; the one SQLite refuses fails
        // alone, and the others before and after it are written.
        let results = Mutex<[Result<Void, StoreError>]?>(nil)
        store.apply(batches: [
            [.putJob(job("d"))], [.putJob(job("e")), .recordRun(run("refused", 3), keep: 10)], [.putJob(job("f"))],
        ]) { outcome in results.withLock { $0 = outcome } }
        #expect(eventually { results.withLock { $0 != nil } })
        let outcomes = try #require(results.withLock { $0 })
        #expect(outcomes.map { (try? $0.get()) != nil } == [true, false, true])
        #expect(try store.jobs().map(\.name) == ["a", "d", "f"])
        #expect(store.counters.writeErrors == 0)
    }

    @Test func aRemovedDirectoryIsMadeAgainWithTheDaemonsJobs() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let store = fixture.store
        let memory = [StoredJob(name: "a", options: [], runs: 3, addedAt: t0), StoredJob(name: "b", options: [], addedAt: t0)]
        store.setSnapshotProvider { memory.map { .putJob($0) } + [.recordConfigJobFire("from-config", lastScheduled: t0)] }
        try store.applyAndWait(memory.map { .putJob($0) } + [.recordRun(run("a", 1), keep: 10), .putJob(job("old"))])

        TemporaryDirectory.removeTree(fixture.stateDirectory)
        let error = try #require(throws: StoreError.self) { try store.applyAndWait([.putJob(job("c"))]) }
        #expect(error.isStorageFault)
        #expect(error.reason == "\(fixture.path) was removed")
        store.record([.recordRun(run("a", 2), keep: 10)])
        #expect(fixture.waitForRecovery())
        #expect(fixture.reported == [
            .failing(since: t0, reason: error.reason), .recovered(after: .zero, written: 1, lost: 0, rebuilt: true),
        ])
        #expect(fileMode(fixture.stateDirectory) == 0o700)
        #expect(fileMode(fixture.path) == 0o600)
        store.close()
        // A fresh open sees the jobs as the daemon had them; the history before is gone, the held run not.
        let (reopened, recovered) = try StateStore.open(directory: fixture.stateDirectory)
        defer { reopened.close() }
        #expect(recovered == nil)
        #expect(try reopened.jobs() == memory)
        #expect(try reopened.configJobFires() == ["from-config": t0])
        #expect(try reopened.history(job: "a", limit: 10).map(\.run) == [2])
    }

    @Test func aReplacedFileGetsTheDaemonsJobsAndKeepsItsHistory() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let store = fixture.store
        store.setSnapshotProvider { [.putJob(job("mine"))] }
        try store.applyAndWait([.putJob(job("mine")), .recordRun(run("mine", 1), keep: 10)])
        // Another valid database, with a job and a run of its own.
        let other = fixture.dir.path + "/other"
        do {
            let (store, _) = try StateStore.open(directory: other)
            try store.applyAndWait([.putJob(job("theirs")), .recordRun(run("theirs", 7), keep: 10)])
            store.close()
        }
        #expect(rename(fixture.path, fixture.path + ".moved") == 0)
        #expect(rename(other + "/state.db", fixture.path) == 0)

        let error = try #require(throws: StoreError.self) { try store.applyAndWait([.putJob(job("c"))]) }
        #expect(error.reason == "\(fixture.path) was replaced by another file")
        #expect(fixture.waitForRecovery())
        #expect(fixture.reported.last == .recovered(after: .zero, written: 0, lost: 0, rebuilt: true))
        #expect(try store.jobs().map(\.name) == ["mine"])
        #expect(try store.history(job: "theirs", limit: 10).map(\.run) == [7])
        #expect(try store.history(job: "mine", limit: 10) == [])
        // The file moved away has what was written to it, its log included.
        do {
            let moved = try Database(path: fixture.path + ".moved")
            defer { moved.close() }
            #expect(try moved.strings("SELECT job || ' ' || run FROM runs") == ["mine 1"])
        }
        try store.applyAndWait([.recordRun(run("mine", 2), keep: 10)])
        store.close()
        let (reopened, _) = try StateStore.open(directory: fixture.stateDirectory)
        defer { reopened.close() }
        #expect(try reopened.jobs().map(\.name) == ["mine"])
        #expect(try reopened.history(job: "mine", limit: 10).map(\.run) == [2])
    }

    @Test func flushWaitsForWhatWasSubmittedAndNoTimerRunsWhileHealthy() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let store = fixture.store
        for number in 1...50 { store.record([.recordRun(run("a", number), keep: 100)]) }
        store.flush()
        #expect(try store.history(job: "a", limit: 100).count == 50)
        let transactions = store.counters.transactions
        // Nothing waits: flush writes nothing, and the store does nothing on its own.
        store.flush()
        #expect(store.counters.transactions == transactions)
        #expect(store.counters == { var counters = StoreCounters(); counters.transactions = transactions; return counters }())
    }

    @Test func closingWhileFailingCountsWhatIsStillHeldAsLost() throws {
        let fixture = try Fixture()
        defer { fixture.dir.remove() }
        let store = fixture.store
        try fixture.injectFault()
        store.record([.recordRun(run("a", 1), keep: 10), .putJob(job("a"))])
        store.flush()
        #expect(fixture.isFailing)
        store.close()
        #expect(store.counters.lost == 2)
        #expect(store.counters.backlog == 0)
        #expect(throws: StoreError.self) { try store.jobs() }
        store.record([.recordRun(run("a", 2), keep: 10)])
        store.flush()
        #expect(store.counters.lost == 3)
    }

    // MARK: Opening

    @Test(.enabled(if: !isRoot, "root writes whatever the permissions; readOnlyFileSystemFailsTheOpen covers it as root"))
    func aWriteProtectedFileFailsTheOpen() throws {
        let dir = try TemporaryDirectory()
        defer {
            chmod(dir.path + "/state", 0o700)
            dir.remove()
        }
        let (store, _) = try StateStore.open(directory: dir.path + "/state")
        store.close()
        chmod(dir.path + "/state/state.db", 0o400)
        chmod(dir.path + "/state", 0o500)
        let error = try #require(throws: StoreError.self) { try StateStore.open(directory: dir.path + "/state") }
        #expect(error.isStorageFault)
        #expect(error.message.contains(dir.path + "/state/state.db"), "\(error)")
        #expect(error.message.contains("(EACCES)"), "\(error)")
    }

    @Test(.enabled(if: isRoot, "mounts a tmpfs, which needs root"))
    func readOnlyFileSystemFailsTheOpen() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let mount = try TemporaryMount(in: dir, size: "1m")
        defer { mount.unmount() }
        let (store, _) = try StateStore.open(directory: mount.path + "/state")
        store.close()
        #expect(mount.remount("ro"))
        let error = try #require(throws: StoreError.self) { try StateStore.open(directory: mount.path + "/state") }
        #expect(error.isStorageFault)
        #expect(error.message == "\(mount.path)/state/state.db is not writable: Read-only file system (EROFS)", "\(error)")
        // A directory that cannot be made there.
        let missing = try #require(throws: StoreError.self) { try StateStore.open(directory: mount.path + "/new") }
        #expect(missing.isStorageFault)
        #expect(missing.message == "cannot create \(mount.path)/new: Read-only file system (EROFS)", "\(missing)")
        // Not a directory: not a storage fault.
        try writeBytes(dir.path + "/file", [])
        let notDirectory = try #require(throws: StoreError.self) { try StateStore.open(directory: dir.path + "/file") }
        #expect(!notDirectory.isStorageFault)
    }

    // MARK: A real file system

    /// A 600 KiB tmpfs filled by background records until SQLITE_FULL, given room, then remounted
    /// read-only and back (only possible while the store has no descriptor open for writing: the kernel
    /// refuses with EBUSY otherwise).
    @Test(.enabled(if: isRoot, "mounts a tmpfs, which needs root"))
    func fullAndReadOnlyFileSystems() throws {
        let dir = try TemporaryDirectory()
        let mount = try TemporaryMount(in: dir, size: "600k")
        defer {
            mount.unmount()
            dir.remove()
        }
        let fixture = try Fixture(in: dir, stateDirectory: mount.path + "/state")
        defer { fixture.store.close() }
        let store = fixture.store
        try store.applyAndWait([.putJob(job("a"))])
        // The kernel refuses to make a file system read-only while a file on it is open for writing.
        #expect(!mount.remount("ro"))

        let output = String(repeating: "x", count: 1000)
        var number = 0
        let filled = eventually(timeout: 60) {
            number += 1
            store.record([.recordRun(StoredRun(job: "a", run: number, startedAt: t0, endedAt: t0, result: "ok", output: output), keep: 100_000)])
            store.flush()
            return fixture.isFailing
        }
        #expect(filled)
        let full = store.counters
        print("a 600k tmpfs was full after \(full.transactions) transactions (\(number) runs of 1 KB each, one transaction each)")
        guard case .failing(_, let reason) = store.health else { return }
        #expect(reason.hasPrefix("disk full (SQLITE_FULL)"), "\(reason)")
        let error = try #require(throws: StoreError.self) { try store.applyAndWait([.putJob(job("critical"))]) }
        #expect(error.isStorageFault)
        store.record([.recordFire("a", runs: number, lastScheduled: t0)])
        #expect(eventually { store.counters.backlog >= 2 })
        let held = store.counters.backlog

        #expect(mount.remount("size=8m"))
        #expect(fixture.waitForRecovery())
        guard case .recovered(_, let written, let lost, let rebuilt) = fixture.reported.last else {
            Issue.record("no recovery reported: \(fixture.reported)")
            return
        }
        #expect((written, lost, rebuilt) == (held, 0, false))
        #expect(try store.jobs().map(\.name) == ["a"])
        #expect(try store.jobs().first?.runs == number)
        #expect(try store.history(job: "a", limit: 1).first?.run == number)

        // Read-only: fail first (the failpoint), so that between attempts no descriptor is open for writing.
        try fixture.injectFault()
        #expect(throws: StoreError.self) { try store.applyAndWait([.putJob(job("critical"))]) }
        #expect(eventually { mount.remount("ro") })
        fixture.healFault()
        #expect(eventually { if case .failing(_, let reason) = store.health { reason.contains("(EROFS)") } else { false } })
        store.record([.recordRun(run("a", number + 1), keep: 100_000)])
        #expect(throws: StoreError.self) { try store.applyAndWait([.putJob(job("critical"))]) }
        #expect(mount.remount("rw"))
        #expect(fixture.waitForRecovery())
        #expect(fixture.reported.count == 4)
        #expect(fixture.reported.last.map { if case .recovered(_, 1, 0, false) = $0 { true } else { false } } == true, "\(fixture.reported)")
        #expect(try store.history(job: "a", limit: 1).first?.run == number + 1)
        #expect(try store.jobs().map(\.name) == ["a"])
    }
}
