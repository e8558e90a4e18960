import Testing
import TimerdCore
@testable import TimerdStore

@Suite struct BacklogTests {
    func fire(_ job: String, _ sequence: UInt64, _ outcome: String = "ran") -> StoredFire {
        StoredFire(job: job, sequence: sequence, scheduled: t0 + .seconds(Int64(sequence)), outcome: outcome)
    }

    @Test func aNewerFireReplacesTheOlderAndKeepsItsScheduledTime() {
        var backlog = Backlog(limit: 100)
        _ = backlog.append(contentsOf: [
            .recordFire("a", runs: 1, lastScheduled: t0), .recordFire("b", runs: 1, lastScheduled: t0),
            .recordFire("a", runs: 2, lastScheduled: t0 + .seconds(60)),
            // A RUN: no scheduled time, so the held one's stays (the stored row would have kept it).
            .recordFire("a", runs: 3, lastScheduled: nil),
            .recordConfigJobFire("c", lastScheduled: t0), .recordConfigJobFire("c", lastScheduled: t0 + .seconds(1)),
        ])
        #expect(backlog.removeAll() == [
            .recordFire("b", runs: 1, lastScheduled: t0), .recordFire("a", runs: 3, lastScheduled: t0 + .seconds(60)),
            .recordConfigJobFire("c", lastScheduled: t0 + .seconds(1)),
        ])
        #expect(backlog.isEmpty)
    }

    @Test func putJobReplacesTheRowsOlderChangesAndDeleteJobEverythingOfTheJob() {
        var backlog = Backlog(limit: 100)
        _ = backlog.append(contentsOf: [
            .putJob(job("a")), .setPaused("a", true), .recordFire("a", runs: 1, lastScheduled: t0),
            .recordRun(run("a", 1), keep: 10), .recordConfigJobFire("a", lastScheduled: t0), .putJob(job("b")),
            .putJob(job("a")), .setPaused("b", true), .setPaused("b", false),
        ])
        #expect(backlog.removeAll() == [
            .recordRun(run("a", 1), keep: 10), .recordConfigJobFire("a", lastScheduled: t0), .putJob(job("b")),
            .putJob(job("a")), .setPaused("b", false),
        ])
        _ = backlog.append(contentsOf: [
            .putJob(job("a")), .recordRun(run("a", 1), keep: 10), .recordDueFire(fire("a", 1), keep: 10),
            .recordRun(run("b", 1), keep: 10), .deleteJob("a"), .recordConfigJobFire("a", lastScheduled: t0),
            .deleteJob("a"), .recordRun(run("a", 2), keep: 10),
        ])
        // The config job's fire is in a table deleteJob does not touch: it stays.
        #expect(backlog.removeAll() == [
            .recordRun(run("b", 1), keep: 10), .recordConfigJobFire("a", lastScheduled: t0), .deleteJob("a"),
            .recordRun(run("a", 2), keep: 10),
        ])
    }

    /// A cancel's record and its deletions are held as they come, in order with the rest, never dropped
    /// (a job added again after its deletion must stay: `StateStoreTests`).
    @Test func aCancelsChangesAreHeldInOrderAndNeverDropped() {
        var backlog = Backlog(limit: 2)
        let changes: [StoreChange] = [
            .markCancelled(id: 3, names: ["a", "b"]), .deleteCancelled(id: 3, names: ["a"], done: 1, finished: false),
            .putJob(job("a")), .recordRun(run("c", 1), keep: 10), .deleteCancelled(id: 3, names: ["b"], done: 2, finished: true),
            .deleteJob("a"),
        ]
        let lost = backlog.append(contentsOf: changes)
        #expect(lost == 1)
        #expect(backlog.removeAll() == [changes[0], changes[1], changes[4], changes[5]])
    }

    @Test func historyBeyondKeepIsNotHeld() {
        var backlog = Backlog(limit: 100)
        for number in 1...10 { #expect(backlog.append(.recordRun(run("a", number), keep: 3)) == 0) }
        _ = backlog.append(.recordRun(run("b", 1), keep: 0))
        #expect(backlog.removeAll() == (8...10).map { .recordRun(run("a", $0), keep: 3) } + [.recordRun(run("b", 1), keep: 0)])
        // Due fires: by number, `keep` below the newest; the same number is rewritten in place of the older.
        for sequence in 1...6 as ClosedRange<UInt64> { _ = backlog.append(.recordDueFire(fire("a", sequence, "queued"), keep: 4)) }
        _ = backlog.append(.recordDueFire(fire("a", 4, "ran"), keep: 4))
        #expect(backlog.removeAll() == [
            .recordDueFire(fire("a", 3, "queued"), keep: 4), .recordDueFire(fire("a", 5, "queued"), keep: 4),
            .recordDueFire(fire("a", 6, "queued"), keep: 4), .recordDueFire(fire("a", 4, "ran"), keep: 4),
        ])
    }

    @Test func theLimitGivesUpTheOldestHistoryNeverJobState() {
        var backlog = Backlog(limit: 5)
        var lost = backlog.append(contentsOf: [.putJob(job("a")), .recordRun(run("a", 1), keep: 10)])
        lost += backlog.append(contentsOf: (1...4).map { .recordDueFire(fire("x", $0), keep: 10) })
        #expect(lost == 1)
        #expect(backlog.count == 5)
        lost += backlog.append(contentsOf: (1...6).map { .putJob(job("job-\($0)")) })
        // Only the four due fires could go; six job rows and a's stay, over the limit.
        #expect(lost == 5)
        #expect(backlog.count == 7)
        #expect(backlog.removeAll() == [.putJob(job("a"))] + (1...6).map { .putJob(job("job-\($0)")) })
    }

    @Test func holesAreCompactedAndTheOrderKept() {
        var backlog = Backlog(limit: 100_000)
        for round in 1...5_000 {
            _ = backlog.append(.recordFire("a", runs: round, lastScheduled: t0))
            _ = backlog.append(.recordFire("b", runs: round, lastScheduled: t0))
        }
        #expect(backlog.count == 2)
        #expect(backlog.removeAll() == [.recordFire("a", runs: 5_000, lastScheduled: t0), .recordFire("b", runs: 5_000, lastScheduled: t0)])
    }

    /// What the backlog keeps, written in order, leaves the file as every change written in order would:
    /// 200 random rounds of 40 changes to three jobs, each written both ways to a store of its own.
    @Test func coalescedChangesWriteWhatAllTheChangesWouldHave() throws {
        let dirs = [try TemporaryDirectory(), try TemporaryDirectory()]
        defer { for dir in dirs { dir.remove() } }
        // Thousands of one-change transactions: NORMAL spares an fsync each.
        let stores = try dirs.map { try StateStore.open(directory: $0.path, migrations: Schema.migrations, synchronous: .normal).store }
        defer { for store in stores { store.close() } }
        let wipes = try dirs.map { try Database(path: $0.path + "/state.db") }
        defer { for wipe in wipes { wipe.close() } }
        func contents(_ store: StateStore) throws -> String {
            var text = "\(try store.jobs())\n\(try store.configJobFires().sorted { $0.key < $1.key })\n"
            for name in ["a", "b", "c"] {
                text += "\(try store.history(job: name, limit: 100))\n\(try store.dueFires(job: name, limit: 100))\n"
            }
            return text
        }
        var random = Deterministic(state: 7)
        var total = 0
        var held = 0
        for _ in 0..<200 {
            var changes: [StoreChange] = []
            var sequences: [String: UInt64] = [:]
            var runs: [String: Int] = [:]
            for _ in 0..<40 {
                let name = ["a", "b", "c"][random.below(3)]
                let keep = [0, 2, 5][random.below(3)]
                switch random.below(9) {
                case 0: changes.append(.putJob(StoredJob(name: name, options: [], runs: random.below(50), addedAt: t0)))
                case 1: changes.append(.deleteJob(name))
                case 2: changes.append(.setPaused(name, random.below(2) == 0))
                case 3, 4:
                    let scheduled = random.below(3) == 0 ? nil : t0 + .seconds(random.below(1000))
                    changes.append(.recordFire(name, runs: random.below(50), lastScheduled: scheduled))
                case 5: changes.append(.recordConfigJobFire(name, lastScheduled: t0 + .seconds(random.below(1000))))
                case 6, 7:
                    runs[name, default: 0] += 1
                    changes.append(.recordRun(run(name, runs[name]!), keep: keep))
                default:
                    // A new fire, or a rewrite of a recent one.
                    let next = sequences[name, default: 0] + 1
                    let back = random.below(2) == 0 ? 0 : UInt64(random.below(4))
                    let sequence = next > back ? next - back : 1
                    sequences[name] = max(sequences[name, default: 0], sequence)
                    let outcome = ["ran", "queued", "skipped"][random.below(3)]
                    changes.append(.recordDueFire(fire(name, sequence, outcome), keep: keep))
                }
            }
            var backlog = Backlog(limit: 100_000)
            #expect(backlog.append(contentsOf: changes) == 0)
            let coalesced = backlog.removeAll()
            for change in changes { try stores[0].applyAndWait([change]) }
            for change in coalesced { try stores[1].applyAndWait([change]) }
            #expect(try contents(stores[0]) == contents(stores[1]), "\(changes)")
            total += changes.count
            held += coalesced.count
            for wipe in wipes {
                try wipe.executeScript("DELETE FROM jobs; DELETE FROM runs; DELETE FROM fires; DELETE FROM config_job_fires")
            }
        }
        #expect(held < total / 2, "\(held) held of \(total)")
    }
}
