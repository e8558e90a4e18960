import Dispatch
import Glibc
import Synchronization
import Testing
import TimerdProtocol
import TimerdCore
@testable import TimerdStore

@Suite struct StateStoreTests {
    static let trickyOptions = [
        KeyValue("every", "5m"),
        KeyValue("command", "echo \"quoted\" 'single' \\back\\slash $HOME; exit 0"),
        KeyValue("env", "A=b=c==d"),
        KeyValue("env", "MULTI=line one\nline two\r\n\ttabbed"),
        KeyValue("meta", "greeting=héllo wörld ✓ 日本語 🎉"),
        KeyValue("header", "X-Json: {\"a\":[1,2],\"b\":\"]\"}"),
        KeyValue("tag", ""),
        KeyValue("body", "ctl \u{01}\u{1F}\u{7F} / \u{2028}"),
        KeyValue("[\"odd\",\"key\"]", "],["),
    ]

    @Test func jobsRunsAndConfigFiresRoundTripAcrossReopen() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let jobs = [
            StoredJob(
                name: "zeta", options: Self.trickyOptions, paused: true, runs: 42,
                addedAt: WallTime(nanosecondsSinceEpoch: -1_234_567_891), lastScheduled: t0, anchor: t0 + .seconds(-3600)),
            StoredJob(name: "alpha", options: [], addedAt: t0),
            StoredJob(name: "mid", options: [KeyValue("at", "2026-11-29T16:00:00Z")], runs: 1, addedAt: t0 + .nanoseconds(1)),
        ]
        let runs = [
            StoredRun(
                job: "zeta", run: 41, scheduledAt: nil, startedAt: t0, endedAt: t0 + .seconds(2), result: "timeout",
                exitCode: nil, httpStatus: 503, latenessMs: 12.625, output: "tail with NUL \u{0} inside\nand ünïcode\n"),
            StoredRun(
                job: "zeta", run: 42, scheduledAt: t0 + .seconds(60), startedAt: t0 + .seconds(61),
                endedAt: t0 + .seconds(62), result: "failed", exitCode: -9, httpStatus: nil, latenessMs: nil, output: "",
                cpuUsageMs: 1234.567, memoryPeakBytes: 52_428_800, ioReadBytes: 4096, ioWriteBytes: 0),
        ]
        do {
            let (store, recovered) = try StateStore.open(directory: dir.path)
            #expect(recovered == nil)
            try store.applyAndWait(
                jobs.map { .putJob($0) } + runs.map { .recordRun($0, keep: 10) }
                    + [.recordConfigJobFire("from-config", lastScheduled: t0), .recordConfigJobFire("other", lastScheduled: t0)]
                    + [.recordConfigJobFire("gone", lastScheduled: t0)])
            try store.applyAndWait([.recordConfigJobFire("other", lastScheduled: t0 + .seconds(5))])
            // A job that left the config: its last fire is forgotten.
            try store.applyAndWait([.recordConfigJobFire("gone", lastScheduled: nil)])
            #expect(try store.jobs() == jobs.sorted { $0.name < $1.name })
            store.close()
        }
        let (store, recovered) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        #expect(recovered == nil)
        #expect(try store.jobs() == jobs.sorted { $0.name < $1.name })
        #expect(try store.jobs().map(\.name) == ["alpha", "mid", "zeta"])
        #expect(try store.history(job: "zeta", limit: 10) == runs.reversed())
        #expect(try store.history(job: "zeta", limit: 1) == [runs[1]])
        #expect(try store.history(job: "zeta", limit: 0) == [])
        #expect(try store.history(job: "nobody", limit: 10) == [])
        #expect(try store.configJobFires() == ["from-config": t0, "other": t0 + .seconds(5)])
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func updatesPauseFireAndReplace() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        try store.applyAndWait([.putJob(job("a")), .recordRun(run("a", 1), keep: 5)])
        try store.applyAndWait([.setPaused("a", true), .recordFire("a", runs: 7, lastScheduled: t0 + .seconds(70))])
        var expected = job("a")
        expected.paused = true
        expected.runs = 7
        expected.lastScheduled = t0 + .seconds(70)
        #expect(try store.jobs() == [expected])
        // An unscheduled fire (RUN) counts but keeps the last scheduled time.
        try store.applyAndWait([.recordFire("a", runs: 8, lastScheduled: nil), .setPaused("a", false)])
        expected.runs = 8
        expected.paused = false
        #expect(try store.jobs() == [expected])
        // Changes naming a job that is not stored do nothing (and do not fail the batch).
        try store.applyAndWait([.setPaused("ghost", true), .recordFire("ghost", runs: 1, lastScheduled: t0)])
        #expect(try store.jobs() == [expected])
        // putJob replaces the whole row and keeps the runs.
        let replaced = StoredJob(name: "a", options: [KeyValue("in", "1h")], runs: 0, addedAt: t0 + .seconds(1))
        try store.applyAndWait([.putJob(replaced)])
        #expect(try store.jobs() == [replaced])
        #expect(try store.history(job: "a", limit: 5).count == 1)
    }

    @Test func optionsAreStoredAsJSONThatSQLiteReads() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        try store.applyAndWait([.putJob(job("j", options: Self.trickyOptions))])
        store.close()
        let database = try Database(path: dir.path + "/state.db")
        defer { database.close() }
        let stored = try database.strings("SELECT options FROM jobs")[0]
        #expect(try database.query("SELECT json_valid(?1)", [.text(stored)]) { $0.int(0) } == [1])
        let pairs = try database.query(
            "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1) ORDER BY key",
            [.text(stored)]
        ) { KeyValue($0.text(0), $0.text(1)) }
        #expect(pairs == Self.trickyOptions)
        // And the other way: SQLite's own JSON (with its escapes) decodes to the same options.
        for option in Self.trickyOptions {
            let json = try database.query(
                "SELECT json_array(json_array(?1, ?2))", [.text(option.key), .text(option.value)]) { $0.text(0) }[0]
            #expect(try OptionsCoding.decode(json) == [option])
        }
        #expect(try OptionsCoding.decode(#" [ [ "k" , "\u00e9\ud83c\udf89\/" ] ] "#) == [KeyValue("k", "é🎉/")])
        #expect(try OptionsCoding.decode("[]") == [])
        // Written without an encoder, byte for byte as the encoder writes it.
        for options in [Self.trickyOptions, [], [KeyValue("a", "")]] {
            #expect(OptionsCoding.encode(options) == Payload.encode(options.map { [$0.key, $0.value] }))
        }
        for bad in ["", "[", "[[\"a\"]]", "[[\"a\",\"b\"]", "[[\"a\",\"b\"]]x", "[[\"a\",1]]", "[[\"\\ud800\",\"\"]]",
            "[[\"a\n\",\"\"]]"]
        {
            #expect(throws: StoreError.self) { try OptionsCoding.decode(bad) }
        }
    }

    @Test func groupCommitSharesTransactions() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        let before = store.transactions
        let succeeded = Atomic<Int>(0)
        let order = Mutex<[Int]>([])
        for index in 0..<1000 {
            store.apply([.putJob(job("job-\(index)"))]) { result in
                if case .success = result { succeeded.add(1, ordering: .relaxed) }
                order.withLock { $0.append(index) }
            }
        }
        try store.applyAndWait([.putJob(job("last"))])
        let transactions = store.transactions - before
        // Every submission before applyAndWait is committed (and told) by the time it returns.
        #expect(succeeded.load(ordering: .relaxed) == 1000)
        #expect(order.withLock { $0 } == Array(0..<1000))
        #expect(try store.jobs().count == 1001)
        // One fsync for many: a handful of transactions, not 1001.
        #expect(transactions >= 1)
        #expect(transactions <= 20, "\(transactions) transactions for 1001 submissions")
        print("group commit: 1001 submissions in \(transactions) transactions")
    }

    @Test func backgroundRecordsWaitForCompanyAndAReadWritesThemFirst() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // A delay no test outlasts: only a read (or a caller's batch) can write these records.
        let (store, _) = try StateStore.open(
            directory: dir.path, migrations: Schema.migrations, synchronous: .full, backgroundDelay: .seconds(3600))
        defer { store.close() }
        try store.applyAndWait([.putJob(job("a"))])
        let before = store.transactions
        for number in 1...50 {
            store.record([.recordFire("a", runs: number, lastScheduled: t0 + .seconds(Int64(number))), .recordRun(run("a", number), keep: 100)])
            // Whatever the store's queue has been given so far has run (and any attempt it started).
            store.connection.queue.sync {}
            store.connection.queue.sync {}
        }
        #expect(store.transactions == before)
        // The read comes after the records on the store's queue, and writes them in one transaction first.
        #expect(try store.history(job: "a", limit: 100).count == 50)
        #expect(store.transactions == before + 1)
        #expect(try store.jobs().first?.runs == 50)
    }

    @Test func historyIsPrunedToKeep() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        for number in 1...10 {
            try store.applyAndWait([.recordRun(run("a", number), keep: 3), .recordRun(run("b", number), keep: 100)])
        }
        #expect(try store.history(job: "a", limit: 100).map(\.run) == [10, 9, 8])
        #expect(try store.history(job: "b", limit: 100).map(\.run) == Array((1...10).reversed()))
        #expect(try store.history(job: "b", limit: 4).map(\.run) == [10, 9, 8, 7])
        // Shrinking keep prunes at the next run; keep 0 keeps nothing.
        try store.applyAndWait([.recordRun(run("b", 11), keep: 2)])
        #expect(try store.history(job: "b", limit: 100).map(\.run) == [11, 10])
        try store.applyAndWait([.recordRun(run("a", 11), keep: 0)])
        #expect(try store.history(job: "a", limit: 100) == [])
    }

    @Test func dueFiresAreRewrittenByNumberPrunedAndDeletedWithTheirJob() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        func fire(_ job: String, _ sequence: UInt64, _ outcome: String, result: String? = nil) -> StoredFire {
            StoredFire(job: job, sequence: sequence, scheduled: t0 + .seconds(Int64(sequence)), outcome: outcome,
                       run: outcome == "ran" ? Int(sequence) : nil, latenessMs: outcome == "ran" ? 1.5 : nil, result: result,
                       reason: outcome == "ran" ? nil : "run 1 is still going (overlap=skip)")
        }
        for sequence in 1...6 as ClosedRange<UInt64> {
            try store.applyAndWait([.recordDueFire(fire("a", sequence, sequence % 2 == 0 ? "skipped" : "queued"), keep: 4)])
        }
        // A queued fire that ran later replaces its record (same job and number).
        try store.applyAndWait([.recordDueFire(fire("a", 5, "ran", result: "ok"), keep: 4), .recordDueFire(fire("b", 9, "missed"), keep: 4)])
        let fires = try store.dueFires(job: "a", limit: 10)
        #expect(fires.map(\.sequence) == [6, 5, 4, 3])
        #expect(fires[1] == fire("a", 5, "ran", result: "ok"))
        #expect(try store.dueFires(job: "a", limit: 2).map(\.sequence) == [6, 5])
        #expect(try store.dueFireSequences() == ["a": 6, "b": 9])
        try store.applyAndWait([.deleteJob("a")])
        #expect(try store.dueFires(job: "a", limit: 10) == [])
        #expect(try store.dueFireSequences() == ["b": 9])
    }

    @Test func deleteJobRemovesItsRunsOnly() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        try store.applyAndWait([
            .putJob(job("a")), .putJob(job("b")), .recordRun(run("a", 1), keep: 10), .recordRun(run("a", 2), keep: 10),
            .recordRun(run("b", 1), keep: 10), .recordConfigJobFire("a", lastScheduled: t0),
        ])
        try store.applyAndWait([.deleteJob("a")])
        #expect(try store.jobs().map(\.name) == ["b"])
        #expect(try store.history(job: "a", limit: 10) == [])
        #expect(try store.history(job: "b", limit: 10) == [run("b", 1)])
        // The config-job table is separate.
        #expect(try store.configJobFires() == ["a": t0])
        try store.applyAndWait([.deleteJob("never-existed")])
    }

    /// A batch with many deletes (a `CANCEL tag=T`) deletes them a chunk at a time: every named job goes
    /// with its runs and due fires, the others stay, and the batch's order holds around the deletes.
    @Test func manyDeletesInOneBatchGoTogetherInOrder() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        // More than two chunks, the last one short.
        let names = (0..<(2 * Database.deleteChunk + 37)).map { "j\($0)" }
        var setup: [StoreChange] = []
        for name in names {
            setup += [
                .putJob(job(name)), .recordRun(run(name, 1), keep: 10),
                .recordDueFire(StoredFire(job: name, sequence: 1, scheduled: t0, outcome: "skipped", reason: "paused"), keep: 4),
            ]
        }
        try store.applyAndWait(setup)
        let kept = names.enumerated().filter { $0.offset % 10 == 0 }.map(\.element)
        let gone = names.filter { !kept.contains($0) }
        // A job deleted, put back and deleted again in the same batch: its last change wins.
        try store.applyAndWait(
            [.deleteJob("j1"), .putJob(job("j1")), .setPaused("j1", true)] + gone.map { .deleteJob($0) }
                + [.putJob(job("j3")), .deleteJob("never-existed")])
        #expect(try store.jobs().map(\.name) == (kept + ["j3"]).sorted())
        for name in gone where name != "j3" {
            #expect(try store.history(job: name, limit: 10) == [])
            #expect(try store.dueFires(job: name, limit: 10) == [])
        }
        #expect(try store.history(job: "j3", limit: 10) == [])
        #expect(try store.history(job: kept[1], limit: 10) == [run(kept[1], 1)])
        #expect(try store.dueFireSequences() == Dictionary(uniqueKeysWithValues: kept.map { ($0, 1) }))
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func migrationStepsRunForwardAndANewerFileIsMovedAside() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path + "/state.db"
        // Version 0 -> current on an existing empty file.
        try writeBytes(path, [])
        do {
            let (store, recovered) = try StateStore.open(directory: dir.path)
            #expect(recovered == nil)
            try store.applyAndWait([.putJob(job("kept")), .recordRun(run("kept", 1), keep: 5)])
            store.close()
        }
        do {
            let database = try Database(path: path)
            #expect(try database.userVersion == Schema.currentVersion)
            database.close()
        }
        // A later build's step: ADD COLUMN with a default, on the existing rows.
        let next = Schema.currentVersion + 1
        let v2 = Schema.migrations + [
            Migration(version: next, statements: ["ALTER TABLE jobs ADD COLUMN note TEXT NOT NULL DEFAULT 'none'"])
        ]
        do {
            let (store, recovered) = try StateStore.open(directory: dir.path, migrations: v2, synchronous: .full)
            #expect(recovered == nil)
            #expect(try store.jobs() == [job("kept")])
            #expect(try store.history(job: "kept", limit: 5) == [run("kept", 1)])
            store.close()
            let database = try Database(path: path)
            #expect(try database.userVersion == next)
            #expect(try database.strings("SELECT note FROM jobs") == ["none"])
            database.close()
        }
        // Reopening at that version runs nothing more.
        do {
            let (store, recovered) = try StateStore.open(directory: dir.path, migrations: v2, synchronous: .full)
            #expect(recovered == nil)
            #expect(try store.jobs().count == 1)
            store.close()
        }
        // This build does not downgrade: the file is moved aside, untouched.
        let before = try readBytes(path)
        let (store, recovered) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        let message = try #require(recovered)
        #expect(message.contains("schema version \(next), newer than this build knows (\(Schema.currentVersion))"))
        let aside = try #require(dir.entries().first { $0.hasPrefix("state.db.corrupt-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") })
        #expect(message.contains(dir.path + "/" + aside))
        #expect(try readBytes(dir.path + "/" + aside) == before)
        #expect(try store.jobs() == [])
    }

    @Test func version1JobsBelongToTimerdsOwnUserAfterTheOwnerMigration() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        do {
            let (store, _) = try StateStore.open(directory: dir.path, migrations: Array(Schema.migrations.prefix(1)), synchronous: .full)
            store.close()
            let database = try Database(path: dir.path + "/state.db")
            try database.executeScript("INSERT INTO jobs (name, options, added_at) VALUES ('old', '[]', 0)")
            database.close()
        }
        let (store, recovered) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        #expect(recovered == nil)
        #expect(try store.jobs().map(\.ownerUID) == [nil])
        var owned = job("new")
        owned.ownerUID = 1001
        try store.applyAndWait([.putJob(owned)])
        #expect(try store.jobs().map(\.name) == ["new", "old"])
        #expect(try store.jobs().map(\.ownerUID) == [1001, nil])
    }

    @Test func version2RunsHaveNoNodeAndJobsAreNotSharedAfterTheClusterMigration() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        do {
            let (store, _) = try StateStore.open(directory: dir.path, migrations: Array(Schema.migrations.prefix(2)), synchronous: .full)
            store.close()
            let database = try Database(path: dir.path + "/state.db")
            try database.executeScript("""
                INSERT INTO jobs (name, options, added_at) VALUES ('old', '[]', 0);
                INSERT INTO runs (job, run, started_at, ended_at, result, output) VALUES ('old', 1, 0, 1, 'ok', '')
                """)
            database.close()
        }
        let (store, recovered) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        #expect(recovered == nil)
        #expect(try store.jobs().map(\.shared) == [false])
        #expect(try store.history(job: "old", limit: 5).map(\.node) == [nil])
        var shared = job("new")
        shared.shared = true
        try store.applyAndWait([
            .putJob(shared),
            .recordRun(StoredRun(job: "new", run: 1, startedAt: WallTime(nanosecondsSinceEpoch: 5), endedAt: WallTime(nanosecondsSinceEpoch: 6),
                                 result: "ok", node: "node-b"), keep: 10),
        ])
        #expect(try store.jobs().map(\.shared) == [true, false])
        #expect(try store.history(job: "new", limit: 5).map(\.node) == ["node-b"])
    }

    /// A `CANCEL` of many jobs is one row (`markCancelled`), its jobs' rows deleted behind it in steps
    /// (`deleteCancelled`): a file opened with the row still there (a crash in between) has none of the
    /// jobs not deleted yet, keeps the rest, and a job added again after its own deletion.
    @Test func openingDeletesTheJobsOfACancelLeftUnfinished() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let names = (0..<20).map { "a\($0)" }
        do {
            let (store, _) = try StateStore.open(directory: dir.path)
            try store.applyAndWait(
                (names + ["keep"]).map { .putJob(job($0)) } + (names + ["keep"]).map { .recordRun(run($0, 1), keep: 10) })
            try store.applyAndWait([.markCancelled(id: 7, names: names)])
            try store.applyAndWait([.deleteCancelled(id: 7, names: Array(names.prefix(5)), done: 5, finished: false)])
            // Added again after its deletion (the daemon lets the name go only then).
            try store.applyAndWait([.putJob(job("a2"))])
            #expect(try store.jobs().map(\.name) == ["a10", "a11", "a12", "a13", "a14", "a15", "a16", "a17", "a18", "a19", "a2",
                                                     "a5", "a6", "a7", "a8", "a9", "keep"])
            store.close()
        }
        do {
            let (store, recovered) = try StateStore.open(directory: dir.path)
            #expect(recovered == nil)
            #expect(try store.jobs().map(\.name) == ["a2", "keep"])
            #expect(try store.history(job: "a9", limit: 5) == [])
            #expect(try store.history(job: "keep", limit: 5) == [run("keep", 1)])
            store.close()
            let database = try Database(path: dir.path + "/state.db")
            #expect(try database.strings("SELECT count(*) FROM cancels UNION ALL SELECT count(*) FROM cancels_done") == ["0", "0"])
            database.close()
        }
        // A cancel that finished leaves no row; its jobs are gone, the others stay.
        let (store, _) = try StateStore.open(directory: dir.path)
        try store.applyAndWait([.putJob(job("b1")), .putJob(job("b2"))])
        try store.applyAndWait([.markCancelled(id: 8, names: ["b1", "b2"])])
        try store.applyAndWait([.deleteCancelled(id: 8, names: ["b1", "b2"], done: 2, finished: true)])
        #expect(try store.jobs().map(\.name) == ["a2", "keep"])
        store.close()
        let database = try Database(path: dir.path + "/state.db")
        defer { database.close() }
        #expect(try database.strings("SELECT (SELECT count(*) FROM cancels) + (SELECT count(*) FROM cancels_done)") == ["0"])
    }

    /// A cancel's deletions behind the `OK` come one background change per removal step; those waiting
    /// together are written together (set-wise), in order with what comes between them: a job added again
    /// after its deletion stays, the row's progress follows, and the row goes with the last.
    @Test func aCancelsDeletionsWaitingTogetherAreWrittenInOrder() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(
            directory: dir.path, migrations: Schema.migrations, synchronous: .full, backgroundDelay: .seconds(3600))
        let names = (0..<30).map { "a\($0)" }
        try store.applyAndWait((names + ["keep"]).map { .putJob(job($0)) })
        try store.applyAndWait([.markCancelled(id: 4, names: names)])
        let before = store.transactions
        store.record([.deleteCancelled(id: 4, names: Array(names[0..<10]), done: 10, finished: false)])
        store.record([.deleteCancelled(id: 4, names: Array(names[10..<20]), done: 20, finished: false)])
        store.record([.putJob(job("a3"))])
        store.record([.deleteCancelled(id: 4, names: Array(names[20..<25]), done: 25, finished: false)])
        #expect(try store.jobs().map(\.name) == ["a25", "a26", "a27", "a28", "a29", "a3", "keep"])
        #expect(store.transactions == before + 1)
        store.close()
        // Killed here: opening deletes the rest, not the job added again.
        let (again, _) = try StateStore.open(directory: dir.path)
        defer { again.close() }
        #expect(try again.jobs().map(\.name) == ["a3", "keep"])
    }

    /// A file of schema version 4 gets the cancel tables (version 5) and keeps its jobs.
    @Test func version4FilesGetTheCancelTablesAndKeepTheirJobs() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        do {
            let (store, _) = try StateStore.open(directory: dir.path, migrations: Array(Schema.migrations.prefix(4)), synchronous: .full)
            try store.applyAndWait([.putJob(job("old")), .putJob(job("gone"))])
            store.close()
        }
        let (store, recovered) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        #expect(recovered == nil)
        #expect(try store.jobs().map(\.name) == ["gone", "old"])
        try store.applyAndWait([.markCancelled(id: 1, names: ["gone"])])
        try store.applyAndWait([.deleteCancelled(id: 1, names: ["gone"], done: 1, finished: true)])
        #expect(try store.jobs().map(\.name) == ["old"])
    }

    /// A file of schema version 5 gets the usage columns (version 6); its runs keep theirs, with no usage.
    @Test func version5FilesGetTheUsageColumnsAndKeepTheirRuns() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let t0 = WallTime(nanosecondsSinceEpoch: 1_764_000_000_000_000_000)
        let old = StoredRun(job: "a", run: 1, startedAt: t0, endedAt: t0 + .seconds(1), result: "ok", exitCode: 0)
        do {
            let (store, _) = try StateStore.open(directory: dir.path, migrations: Array(Schema.migrations.prefix(5)), synchronous: .full)
            try store.applyAndWait([.putJob(job("a"))])
            store.close()
            // The run as a timerd of version 5 wrote it (this build's INSERT names the new columns).
            let database = try Database(path: dir.path + "/state.db")
            try database.executeScript("""
                INSERT INTO runs (job, run, scheduled_at, started_at, ended_at, result, exit_code, http_status, lateness_ms,
                    output, node)
                VALUES ('a', 1, NULL, \(t0.nanosecondsSinceEpoch), \((t0 + .seconds(1)).nanosecondsSinceEpoch), 'ok', 0, NULL,
                    NULL, '', NULL)
                """)
            #expect(try database.userVersion == 5)
            database.close()
        }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        var new = old
        new.run = 2
        new.cpuUsageMs = 5.5
        new.memoryPeakBytes = 1 << 20
        try store.applyAndWait([.recordRun(new, keep: 10)])
        #expect(try store.history(job: "a", limit: 10) == [new, old])
    }

    /// A file of schema version 8 gets the reason and signal columns (version 9): its runs have neither,
    /// new runs keep both.
    @Test func version8FilesGetTheReasonAndSignalColumns() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let old = StoredRun(job: "a", run: 1, startedAt: t0, endedAt: t0 + .seconds(1), result: "ok", exitCode: 0)
        do {
            let (store, _) = try StateStore.open(directory: dir.path, migrations: Array(Schema.migrations.prefix(8)), synchronous: .full)
            store.close()
            // The run as a timerd of version 8 wrote it (this build's INSERT names the new columns).
            let database = try Database(path: dir.path + "/state.db")
            try database.executeScript("""
                INSERT INTO runs (job, run, started_at, ended_at, result, exit_code, output)
                VALUES ('a', 1, \(t0.nanosecondsSinceEpoch), \((t0 + .seconds(1)).nanosecondsSinceEpoch), 'ok', 0, '')
                """)
            #expect(try database.userVersion == 8)
            database.close()
        }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        let new = StoredRun(job: "a", run: 2, startedAt: t0 + .seconds(2), endedAt: t0 + .seconds(3), result: "timeout",
                            reason: "timed out after 1s; killed with SIGTERM", signal: 15)
        try store.applyAndWait([.recordRun(new, keep: 10)])
        #expect(try store.history(job: "a", limit: 10) == [new, old])
    }

    /// A job's highest run number, from its history or its due fires (a job with `history_limit=0` has
    /// only those); jobs with neither are left out.
    @Test func highestRunsComeFromTheHistoryOrTheDueFires() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        try store.applyAndWait([
            .recordRun(run("a", 2), keep: 10), .recordRun(run("a", 1), keep: 10), .recordRun(run("b", 1), keep: 10),
            .recordDueFire(StoredFire(job: "b", sequence: 1, scheduled: t0, outcome: "ran", run: 7), keep: 50),
            .recordDueFire(StoredFire(job: "c", sequence: 1, scheduled: t0, outcome: "ran", run: 4), keep: 50),
            .recordDueFire(StoredFire(job: "d", sequence: 1, scheduled: t0, outcome: "skipped"), keep: 50),
        ])
        #expect(try store.highestRuns(of: ["a", "b", "c", "d", "none"]) == ["a": 2, "b": 7, "c": 4])
        #expect(try store.highestRuns(of: []) == [:])
    }

    @Test func failingMigrationLeavesTheVersionAlone() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let bad = Schema.migrations + [
            Migration(version: Schema.currentVersion + 1, statements: ["ALTER TABLE jobs ADD COLUMN x INTEGER", "ALTER TABLE nowhere ADD COLUMN y"])
        ]
        #expect(throws: StoreError.self) {
            _ = try StateStore.open(directory: dir.path, migrations: bad, synchronous: .full)
        }
        let database = try Database(path: dir.path + "/state.db")
        defer { database.close() }
        #expect(try database.userVersion == Schema.currentVersion)
        // The step's first statement was rolled back with it.
        #expect(try database.query("SELECT count(*) FROM pragma_table_info('jobs') WHERE name = 'x'") { $0.int(0) } == [0])
    }

    @Test func garbageFileIsMovedAsideWithItsWAL() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path + "/state.db"
        let bytes = garbage(10_000)
        try writeBytes(path, bytes)
        try writeBytes(path + "-wal", Array("not a wal".utf8))
        let (store, recovered) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        let message = try #require(recovered)
        #expect(message.contains("is not a SQLite database"))
        let aside = try #require(
            dir.entries().first { $0.hasPrefix("state.db.corrupt-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") })
        #expect(aside.wholeMatch(of: /state\.db\.corrupt-\d{8}T\d{6}Z/) != nil, "\(aside)")
        #expect(message.contains("moved it to \(dir.path)/\(aside)"))
        #expect(try readBytes(dir.path + "/" + aside) == bytes)
        #expect(try readBytes(dir.path + "/" + aside + "-wal") == Array("not a wal".utf8))
        // The fresh database works.
        try store.applyAndWait([.putJob(job("fresh"))])
        #expect(try store.jobs() == [job("fresh")])
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func corruptPagesFailQuickCheckAndAreMovedAside() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path + "/state.db"
        do {
            let (store, _) = try StateStore.open(directory: dir.path)
            let big = String(repeating: "x", count: 3000)
            try store.applyAndWait((0..<200).map { .putJob(job("job-\($0)", options: [KeyValue("command", big)])) })
            store.close()
        }
        let size = try readBytes(path).count
        #expect(size > 20 * 4096)
        // Scribble over pages in the middle (page 1, the header and schema, stays intact).
        try writeBytes(path, garbage(8 * 4096), at: 8 * 4096)
        // A log SQLite cannot use: it must be moved aside too, not deleted on close.
        let wal = Array("not a wal".utf8)
        try writeBytes(path + "-wal", wal)
        let corrupted = try readBytes(path)
        let (store, recovered) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        let message = try #require(recovered)
        #expect(message.contains("integrity check") || message.contains("corrupt"), "\(message)")
        let aside = try #require(
            dir.entries().first { $0.hasPrefix("state.db.corrupt-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") })
        #expect(try readBytes(dir.path + "/" + aside) == corrupted)
        #expect(try readBytes(dir.path + "/" + aside + "-wal") == wal)
        #expect(try store.jobs() == [])
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func sqliteHeaderFollowedByGarbageIsMovedAside() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let bytes = Array("SQLite format 3\0".utf8) + garbage(5000)
        try writeBytes(dir.path + "/state.db", bytes)
        let (store, recovered) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        let message = try #require(recovered)
        #expect(message.contains("not a SQLite database") || message.contains("corrupt"), "\(message)")
        let aside = try #require(dir.entries().first { $0.hasPrefix("state.db.corrupt-") })
        #expect(try readBytes(dir.path + "/" + aside) == bytes)
        try store.applyAndWait([.putJob(job("a"))])
        #expect(try store.jobs().count == 1)
    }

    @Test func versionNinetyNineIsMovedAside() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path + "/state.db"
        do {
            let database = try Database(path: path)
            try database.executeScript("CREATE TABLE future (x); INSERT INTO future VALUES (1); PRAGMA user_version = 99")
            database.close()
        }
        let (store, recovered) = try StateStore.open(directory: dir.path)
        let message = try #require(recovered)
        #expect(message.contains("schema version 99"))
        try store.applyAndWait([.putJob(job("a"))])
        store.close()
        let aside = try #require(dir.entries().first { $0.hasPrefix("state.db.corrupt-") })
        let old = try Database(path: dir.path + "/" + aside)
        defer { old.close() }
        #expect(try old.userVersion == 99)
        #expect(try old.strings("SELECT x FROM future") == ["1"])
    }

    @Test func repeatedRecoveriesNeverOverwriteEachOther() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        var contents: [[UInt8]] = []
        for round in 0..<3 {
            let bytes = Array("garbage round \(round) ".utf8) + garbage(600)
            contents.append(bytes)
            try writeBytes(dir.path + "/state.db", bytes)
            let (store, recovered) = try StateStore.open(directory: dir.path)
            #expect(recovered != nil)
            store.close()
        }
        let aside = dir.entries().filter { $0.hasPrefix("state.db.corrupt-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
        #expect(aside.count == 3)
        #expect(Set(try aside.map { try readBytes(dir.path + "/" + $0) }) == Set(contents))
    }

    @Test func createsPrivateDirectoryAndFile() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let nested = dir.path + "/a/b/state"
        let (store, _) = try StateStore.open(directory: nested)
        defer { store.close() }
        #expect(fileMode(dir.path + "/a") == 0o700)
        #expect(fileMode(nested) == 0o700)
        #expect(fileMode(nested + "/state.db") == 0o600)
        #expect(try store.integrityCheck() == "ok")
        try writeBytes(dir.path + "/file", [])
        #expect(throws: StoreError.self) { _ = try StateStore.open(directory: dir.path + "/file") }
    }

    @Test func walModeAndFullSync() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        try store.applyAndWait([.putJob(job("a"))])
        #expect(dir.entries().contains("state.db-wal"))
        let database = try Database(path: dir.path + "/state.db")
        defer { database.close() }
        #expect(try database.strings("PRAGMA journal_mode") == ["wal"])
    }

    @Test func doneMayUseTheStoreAndCloseFailsLaterCalls() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (store, _) = try StateStore.open(directory: dir.path)
        let seen = Mutex<[String]?>(nil)
        let finished = DispatchSemaphore(value: 0)
        store.apply([.putJob(job("a"))]) { _ in
            // Reads and waits from inside `done` run in place instead of deadlocking.
            try? store.applyAndWait([.putJob(job("b"))])
            seen.withLock { $0 = (try? store.jobs())?.map(\.name) }
            finished.signal()
        }
        finished.wait()
        #expect(seen.withLock { $0 } == ["a", "b"])
        store.close()
        #expect(throws: StoreError.self) { try store.jobs() }
        #expect(throws: StoreError.self) { try store.applyAndWait([.putJob(job("c"))]) }
        let failed = Mutex<Bool>(false)
        let told = DispatchSemaphore(value: 0)
        store.apply([.putJob(job("d"))]) { result in
            if case .failure = result { failed.withLock { $0 = true } }
            told.signal()
        }
        told.wait()
        #expect(failed.withLock { $0 })
        store.close()
    }

    @Test func closeCommitsPendingChanges() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        do {
            let (store, _) = try StateStore.open(directory: dir.path)
            for index in 0..<50 { store.apply([.putJob(job("j\(index)"))]) { _ in } }
            store.close()
        }
        let (store, _) = try StateStore.open(directory: dir.path)
        defer { store.close() }
        #expect(try store.jobs().count == 50)
    }
}
