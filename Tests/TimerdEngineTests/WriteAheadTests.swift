import Testing
import TimerdCore
@testable import TimerdEngine

/// A request's change is written ahead and takes effect only once saved: a write that fails leaves the
/// engine as if the request had never come (`docs/state.md`).
@Suite struct WriteAheadTests {
    static let full = TimerdError(.storageUnavailable, "disk full")

    /// The engine's answer to one input, the store not answering yet.
    private static func unsaved(_ driver: inout Driver, _ input: Input) -> (change: UInt64, records: [Persist])? {
        let effects = driver.engine.handle(input, at: driver.clock.now())
        driver.effects = effects
        for case .writeAhead(let change, let records) in effects { return (change, records) }
        return nil
    }

    private static func isOutward(_ effect: Effect) -> Bool {
        switch effect {
        case .arm, .disarm, .startRun, .stopRun, .decision, .reply, .persist, .unwatchOwner, .notifyTransition: true
        default: false
        }
    }

    @Test func anAddIsInEffectOnlyOnceItsJobIsSaved() throws {
        var driver = Driver()
        let pending = try #require(Self.unsaved(&driver, .add(AddJob(
            spec: T.spec("a", ["every": "10s"]), origin: .runtime, owner: T.root, civil: nil))))
        // Nothing happens before the write: no timer, no decision, no reply; the job is not there.
        #expect(!driver.effects.contains(where: Self.isOutward))
        #expect(pending.records.count == 1)
        guard case .job(let stored) = pending.records.first else { Issue.record("not a job record"); return }
        #expect(stored.name == T.name("a") && !stored.paused && stored.runs == 0)
        #expect(driver.engine.job(T.name("a")) == nil)
        // The same name meanwhile is taken, and a config reload may not declare it.
        #expect(driver.add("a", ["every": "1m"])?.code == .exists)
        driver.handle(.reload([T.declared("a", ["every": "1m"])], maxRunning: 4))
        #expect(driver.reply?.code == .invalidConfig)

        driver.effects = driver.engine.handle(.changeSaved(pending.change), at: driver.clock.now())
        #expect(driver.reply == .success(.done))
        #expect(driver.armed.count == 1)
        #expect(driver.engine.job(T.name("a")) != nil)
        // What was written ahead is not written again.
        #expect(!driver.effects.contains { if case .persist(.job) = $0 { true } else { false } })
    }

    /// The lines of `effects` that say jobs were added.
    private static func addedLines(_ effects: [Effect]) -> [String] {
        effects.compactMap { effect in
            guard case .log(_, _, _, let message) = effect, message.hasPrefix("added") else { return nil }
            return message
        }
    }

    @Test func theJobsABurstOfRequestsAddsAreLoggedWhenItEnds() throws {
        var driver = Driver()
        // One request: its line at once.
        let single = try #require(Self.unsaved(&driver, .add(AddJob(
            spec: T.spec("one", ["every": "10s"]), origin: .runtime, owner: T.root, civil: nil))))
        #expect(Self.addedLines(driver.engine.handle(.changeSaved(single.change), at: driver.clock.now()))
            == ["added (runtime): every 10s: true"])
        // A burst: nothing while more of it comes, even with other inputs between (a job due), then a
        // line each for a few jobs, or one line for many.
        for count in [3, 12] {
            let changes = try (0..<count).map { index in
                try #require(Self.unsaved(&driver, .add(AddJob(
                    spec: T.spec("b\(count)-\(index)", ["every": "1m"]), origin: .runtime, owner: T.root, civil: nil)))).change
            }
            var lines: [String] = []
            for (index, change) in changes.enumerated() {
                let last = index == changes.count - 1
                lines += Self.addedLines(driver.engine.handle(.changeSaved(change, moreToCome: !last), at: driver.clock.now()))
                if !last {
                    #expect(lines.isEmpty)
                    lines += Self.addedLines(driver.engine.handle(.deadlineReached(T.name("one"), jobID: 0), at: driver.clock.now()))
                }
            }
            if count == 3 {
                #expect(lines == Array(repeating: "added (runtime): every 1m: true", count: 3), "\(lines)")
            } else {
                #expect(lines == ["added 12 jobs (runtime): " + (0..<10).map { "b12-\($0)" }.joined(separator: ", ") + " and 2 more"])
            }
        }
        for count in [3, 12] { #expect((0..<count).allSatisfy { driver.engine.job(T.name("b\(count)-\($0)")) != nil }) }
    }

    @Test func anAddThatCannotBeSavedLeavesNothing() throws {
        var driver = Driver()
        driver.saveFailure = Self.full
        #expect(driver.add("a", ["every": "10s"]) == .failure(Self.full))
        #expect(driver.engine.job(T.name("a")) == nil)
        #expect(driver.armed.isEmpty && driver.decisions.isEmpty)
        // The name is free again, and does not count against its owner.
        let alice = Requester(uid: 1000, isAdmin: false, label: "uid 1000")
        var limited = Driver(settings: EngineSettings(userMaxJobs: 1))
        limited.saveFailure = Self.full
        _ = limited.add("mine", ["every": "1m"], owner: alice)
        limited.saveFailure = nil
        #expect(limited.add("mine", ["every": "1m"], owner: alice) == .success(.done))
        driver.saveFailure = nil
        #expect(driver.add("a", ["every": "10s"]) == .success(.done))
    }

    @Test func addsBeingSavedCountAgainstTheirOwnersLimit() throws {
        let alice = Requester(uid: 1000, isAdmin: false, label: "uid 1000")
        var driver = Driver(settings: EngineSettings(userMaxJobs: 1))
        let first = Self.unsaved(&driver, .add(AddJob(spec: T.spec("one", ["every": "1m"]), origin: .runtime, owner: alice, civil: nil)))
        #expect(first != nil)
        _ = Self.unsaved(&driver, .add(AddJob(spec: T.spec("two", ["every": "1m"]), origin: .runtime, owner: alice, civil: nil)))
        #expect(driver.reply?.code == .tooManyJobs)
    }

    @Test(arguments: ["cancel", "pause", "resume", "resume-now", "run"])
    func aChangeThatCannotBeSavedChangesNothing(verb: String) throws {
        var driver = Driver()
        let start = driver.clock.now()
        _ = driver.add("a", ["every": "10s"])
        let name = T.name("a")
        if verb.hasPrefix("resume") { driver.handle(.pause([name], by: T.root, checkOnly: false)) }
        let job = try #require(driver.engine.job(name))
        let before = (state: job.state, runs: job.runs, next: job.nextMono, active: job.active.count)

        driver.saveFailure = Self.full
        driver.clock.advance(by: .seconds(3))
        let input: Input = switch verb {
        case "cancel": .cancel([name], by: T.root, checkOnly: false)
        case "pause": .pause([name], by: T.root, checkOnly: false)
        case "resume": .resume([name], .onSchedule, by: T.root, checkOnly: false)
        case "resume-now": .resume([name], .now, by: T.root, checkOnly: false)
        default: .runNow(name, by: T.root)
        }
        driver.handle(input)
        #expect(driver.reply == .failure(Self.full))
        #expect(driver.effects.filter(Self.isOutward).count == 1)  // the reply only
        let after = try #require(driver.engine.job(name))
        #expect(after === job)
        #expect((after.state, after.runs, after.nextMono, after.active.count) == before)
        #expect(driver.engine.runningTotal == 0)

        // Saved, the same request takes effect and writes each record once.
        driver.saveFailure = nil
        driver.handle(input)
        #expect(driver.reply?.isSuccess == true)
        let written = driver.records
        #expect(written.count == Set(written.map { "\($0)" }).count)
        switch verb {
        case "cancel": #expect(driver.engine.job(name) == nil)
        case "pause": #expect(after.state == .paused)
        case "resume": #expect(after.state == .scheduled && after.nextMono == start.mono + .seconds(10))
        default: #expect(after.runs == 1 && driver.starts.count == 1)
        }
    }

    @Test func checkOnlyWritesNothing() {
        var driver = Driver()
        _ = driver.add("a", ["every": "10s"])
        driver.handle(.pause([T.name("a")], by: T.root, checkOnly: true))
        #expect(driver.reply == .success(.done))
        #expect(driver.records.isEmpty)
        #expect(driver.engine.job(T.name("a"))?.state == .scheduled)
    }

    /// A cancel of many jobs writes one record ahead (their names), then one behind per slice removed
    /// (those jobs' rows go), never a job's delete (each absorbed where the slice's records start: this
    /// took minutes for 100,000 jobs while each was searched for and removed from the front of an
    /// array), and logs one line for them all.
    @Test func aLargeCancelWritesEachDeleteOnceAheadAndLogsOneLine() {
        var driver = Driver()
        let names = (0..<20_000).map { T.name("j\($0)") }
        for name in names { _ = driver.add(name.rawValue, ["every": "1h"]) }
        driver.handle(.cancel(names, by: T.root, checkOnly: false))
        #expect(driver.reply == .success(.done))
        #expect(driver.engine.jobs.count == 0)
        guard case .cancelJobs(let change, let marked)? = driver.records.first else {
            Issue.record("no cancel record ahead")
            return
        }
        #expect(marked == names)
        let slice = Engine.cancelRemoveSlice
        let gone = stride(from: 0, to: names.count, by: slice).map { start -> Persist in
            let end = min(start + slice, names.count)
            return .cancelledGone(change, Array(names[start..<end]), done: end, finished: end == names.count)
        }
        #expect(Array(driver.records.dropFirst()) == gone)
        // One log line for them all; watchers still hear of each.
        let logs = driver.effects.compactMap { if case .log(_, let job, _, let line) = $0 { (job, line) } else { nil } }
        #expect(logs.count == 1 && logs.first?.0 == nil)
        #expect(logs.first?.1 == "cancelled 20000 jobs: j0, j1, j2, j3, j4, j5, j6, j7, j8, j9 and 19990 more")
        #expect(driver.decisions.filter { if case .cancelled = $0 { true } else { false } }.count == names.count)
    }

    /// More jobs than a slice: checked a slice per input (jobs of the cancel still fire meanwhile), then
    /// all deletes written ahead at once; once saved, the jobs leave the table a slice per input, none of
    /// those left fires meanwhile, other jobs do, and the answer and the one log line come with the last.
    @Test func aCancelOfManyJobsTakesEffectInSlicesAndNoneOfThemFiresOnceItIsSaved() throws {
        var driver = Driver()
        let count = Engine.cancelSlice * 2 + 1
        let names = (0..<count).map { T.name("j\($0)") }
        for name in names { _ = driver.add(name.rawValue, ["every": "10s"]) }
        _ = driver.add("other", ["every": "10s"])

        driver.effects = driver.engine.handle(.cancel(names, by: T.root, checkOnly: false), at: driver.clock.now())
        guard case .success(.partlyApplied(let change))? = driver.reply else {
            Issue.record("not checked in part: \(String(describing: driver.reply))")
            return
        }
        // Not in effect while it is checked: a job of the cancel still fires.
        driver.reach(names.last!.rawValue, after: .seconds(10))
        #expect(driver.starts.map(\.job) == [names.last!])
        driver.effects = driver.engine.handle(.continueChange(change), at: driver.clock.now())
        #expect(driver.reply == .success(.partlyApplied(change)))
        driver.effects = driver.engine.handle(.continueChange(change), at: driver.clock.now())
        let pending = try #require(driver.effects.compactMap { effect -> [Persist]? in
            if case .writeAhead(change, let records) = effect { records } else { nil }
        }.first)
        #expect(pending == [.cancelJobs(change, names)])
        #expect(driver.engine.jobs.count == count + 1)

        driver.effects = driver.engine.handle(.changeSaved(change), at: driver.clock.now())
        #expect(driver.reply == .success(.partlyApplied(change)))
        #expect(driver.engine.isApplyingCancel(change))
        // None removed yet (the first slice goes with the next input)...
        #expect(driver.engine.jobs.count == count + 1)
        #expect(driver.engine.cancelRemovedCount(change) == 0)
        #expect(driver.records.isEmpty)
        // ...but gone for every request already: not among the jobs there are, nor counted.
        #expect(driver.engine.liveJobs.map(\.name.rawValue) == ["other"])
        #expect(driver.engine.cancelPendingCount == count)
        driver.effects = driver.engine.handle(.continueChange(change), at: driver.clock.now())
        #expect(driver.engine.jobs.count == count + 1 - Engine.cancelRemoveSlice)
        #expect(driver.engine.cancelRemovedCount(change) == Engine.cancelRemoveSlice)
        #expect(driver.engine.cancelPendingCount == count - Engine.cancelRemoveSlice)
        // Behind: the first slice's rows go (no job's delete of its own).
        let slice = Engine.cancelRemoveSlice
        #expect(driver.records == [.cancelledGone(change, Array(names.prefix(slice)), done: slice, finished: false)])
        // Due meanwhile: a job of the cancel not removed yet does not fire; another job does.
        driver.reach(names.last!.rawValue, after: .seconds(10))
        #expect(driver.starts.isEmpty)
        driver.reach("other", after: .zero)
        #expect(driver.starts.map(\.job) == [T.name("other")])

        var steps = 1
        repeat {
            driver.effects = driver.engine.handle(.continueChange(change), at: driver.clock.now())
            steps += 1
        } while driver.reply == .success(.partlyApplied(change))
        #expect(steps == (count + Engine.cancelRemoveSlice - 1) / Engine.cancelRemoveSlice)
        #expect(driver.reply == .success(.done))
        #expect(driver.engine.jobs.keys.map(\.rawValue) == ["other"])
        #expect(driver.engine.cancelPendingCount == 0 && driver.engine.cancelRemovedCount(change) == nil)
        let last = (count - 1) / slice * slice
        #expect(driver.records == [.cancelledGone(change, Array(names[last...]), done: count, finished: true)])
        let logs = driver.effects.compactMap { if case .log(_, nil, _, let line) = $0 { line } else { nil } }
        #expect(logs == [Engine.cancelledSummary(names)])
    }

    /// Once a cancel of many jobs is on disk its jobs are gone for every request, though they leave the
    /// table a slice per input: they no longer count against their owner's `user_max_jobs`. (Their names
    /// the daemon holds until their slice's turn: a request naming one waits, then finds it gone.)
    @Test func aCancelOnDiskFreesItsOwnersLimitAtOnce() {
        let alice = Requester(uid: 1000, isAdmin: false, label: "uid 1000")
        let count = Engine.cancelSlice + 1
        var driver = Driver(settings: EngineSettings(userMaxJobs: count))
        let names = (0..<count).map { T.name("j\($0)") }
        for name in names { #expect(driver.add(name.rawValue, ["every": "10s"], owner: alice) == .success(.done)) }
        #expect(driver.add("more", ["every": "10s"], owner: alice)?.code == .tooManyJobs)
        driver.effects = driver.engine.handle(.cancel(names, by: alice, checkOnly: false), at: driver.clock.now())
        guard case .success(.partlyApplied(let change))? = driver.reply else {
            Issue.record("not checked in part: \(String(describing: driver.reply))")
            return
        }
        driver.effects = driver.engine.handle(.continueChange(change), at: driver.clock.now())
        driver.effects = driver.engine.handle(.changeSaved(change), at: driver.clock.now())
        #expect(driver.reply == .success(.partlyApplied(change)))
        #expect(driver.engine.jobs.count == count)
        // The owner's limit counts none of them.
        #expect(driver.add("more", ["every": "10s"], owner: alice) == .success(.done))
        #expect(driver.engine.liveJobs.map(\.name.rawValue) == ["more"])
        while driver.engine.cancelRemovedCount(change) != nil {
            driver.effects = driver.engine.handle(.continueChange(change), at: driver.clock.now())
        }
        #expect(driver.engine.jobs.keys.map(\.rawValue) == ["more"])
        #expect(driver.engine.jobs.countByOwner[1000] == 1 && driver.engine.cancelPendingCount == 0)
    }

    /// A refusal in any slice of the check refuses the whole cancel: nothing written, every job still
    /// there and firing; so does a write that fails.
    @Test func aCancelOfManyJobsRefusedOrNotSavedChangesNothing() {
        var driver = Driver()
        let names = (0..<(Engine.cancelSlice * 2)).map { T.name("j\($0)") }
        for name in names { _ = driver.add(name.rawValue, ["every": "10s"]) }
        driver.handle(.cancel(names + [T.name("nope")], by: T.root, checkOnly: false))
        #expect(driver.reply?.code == .noSuchJob)
        #expect(!driver.effects.contains { if case .writeAhead = $0 { true } else { false } })
        driver.saveFailure = Self.full
        driver.handle(.cancel(names, by: T.root, checkOnly: false))
        #expect(driver.reply?.code == .storageUnavailable)
        #expect(driver.engine.jobs.count == names.count)
        driver.reach(names[0].rawValue, after: .seconds(10))
        #expect(driver.starts.map(\.job) == [names[0]])
    }

    @Test func jobsThatAreNotKeptAreChangedAtOnce() {
        var driver = Driver()
        // owner=connection jobs end with their connection: nothing of them is written.
        #expect(driver.add("mine", ["every": "10s", "owner": "connection"], connection: 7) == .success(.done))
        #expect(driver.effects.allSatisfy { if case .writeAhead = $0 { false } else { true } })
        driver.handle(.pause([T.name("mine")], by: T.root, checkOnly: false))
        #expect(driver.effects.allSatisfy { if case .writeAhead = $0 { false } else { true } })
        #expect(driver.reply == .success(.done))
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
}
