import Testing
import TimerdCore
@testable import TimerdEngine

/// The engine on a manual clock: inputs in, effects out, no threads and no sleeping.
@Suite struct EngineTests {
    @Test func anIntervalJobFiresOnItsGridAndKeepsItsPhaseWhenLate() {
        var driver = Driver()
        let start = driver.clock.now()
        #expect(driver.add("tick", ["every": "10s"]) == .success(.done))
        #expect(driver.armed.map(\.1) == [.mono(start.mono + .seconds(10))])

        driver.reach("tick", after: .seconds(10))
        #expect(driver.starts.map(\.scheduled) == [start.wall + .seconds(10)])
        #expect(driver.starts.first?.lateness == .zero)
        #expect(driver.armed.map(\.1) == [.mono(start.mono + .seconds(20))])
        driver.finish(driver.starts[0])

        // Handled 2 s late: the run says so, and the next fire stays on the grid.
        driver.reach("tick", after: .seconds(12))
        #expect(driver.starts.first?.lateness == .seconds(2))
        #expect(driver.armed.map(\.1) == [.mono(start.mono + .seconds(30))])
    }

    @Test func anEarlyTimerEventIsIgnoredAndReArmed() {
        var driver = Driver()
        let start = driver.clock.now()
        _ = driver.add("tick", ["every": "10s"])
        driver.reach("tick", after: .seconds(9))
        #expect(driver.starts.isEmpty)
        #expect(driver.armed.map(\.1) == [.mono(start.mono + .seconds(10))])
    }

    @Test func requestsAreCheckedBeforeAnythingChanges() {
        var driver = Driver()
        _ = driver.add("a", ["every": "1m"])
        #expect(driver.add("a", ["every": "1m"])?.code == .exists)
        #expect(driver.effects.count == 1)  // the reply only
        #expect(driver.add("past", ["at": "2020-01-01T00:00:00Z"])?.code == .badArgument)

        let alice = Requester(uid: 1000, isAdmin: false, label: "uid 1000")
        driver.handle(.cancel([T.name("a")], by: alice, checkOnly: false))
        #expect(driver.reply?.code == .permissionDenied)
        #expect(driver.engine.job(T.name("a")) != nil)
        // All or nothing: one unknown name cancels none.
        driver.handle(.cancel([T.name("a"), T.name("nope")], by: T.root, checkOnly: false))
        #expect(driver.reply?.code == .noSuchJob)
        #expect(driver.engine.job(T.name("a")) != nil)

        var limited = Driver(settings: EngineSettings(userMaxJobs: 1))
        #expect(limited.add("mine", ["every": "1m"], owner: alice) == .success(.done))
        #expect(limited.add("more", ["every": "1m"], owner: alice)?.code == .tooManyJobs)
    }

    @Test func pauseSkipsWhatFallsDueAndResumeKeepsThePhase() {
        var driver = Driver()
        let start = driver.clock.now()
        _ = driver.add("tick", ["every": "10s"])
        driver.clock.advance(by: .seconds(5))
        driver.handle(.pause([T.name("tick")], by: T.root, checkOnly: false))
        #expect(driver.effects.contains { if case .disarm = $0 { return true } else { return false } })
        driver.clock.advance(by: .seconds(30))
        driver.handle(.resume([T.name("tick")], .onSchedule, by: T.root, checkOnly: false))
        #expect(driver.decisions.contains(.skipped(T.name("tick"), scheduled: nil, count: 3, reason: "paused")))
        #expect(driver.armed.map(\.1) == [.mono(start.mono + .seconds(40))])
        #expect(driver.engine.job(T.name("tick"))?.skipped == 3)

        driver.handle(.pause([T.name("tick")], by: T.root, checkOnly: false))
        driver.handle(.resume([T.name("tick")], .after(.seconds(7)), by: T.root, checkOnly: false))
        #expect(driver.armed.map(\.1) == [.mono(driver.clock.now().mono + .seconds(7))])

        driver.handle(.resume([T.name("tick")], .now, by: T.root, checkOnly: false))
        #expect(driver.starts.count == 1)
    }

    @Test func countEndsTheSchedule() {
        var driver = Driver()
        _ = driver.add("three", ["every": "1s", "count": "3"])
        for _ in 0..<3 {
            driver.reach("three", after: .seconds(1))
            for start in driver.starts { driver.finish(start) }
        }
        #expect(driver.engine.job(T.name("three"))?.state == .finished)
        #expect(driver.engine.job(T.name("three"))?.runs == 3)
    }

    @Test func modesHoldOneFireAndReleaseItWhenTheModeReturns() {
        var driver = Driver()
        _ = driver.add("web", ["every": "10s"])
        driver.handle(.switchMode("maintenance"))
        driver.reach("web", after: .seconds(10))
        #expect(driver.starts.isEmpty)
        #expect(driver.decisions.contains { if case .held = $0 { return true } else { return false } })
        driver.reach("web", after: .seconds(10))
        #expect(driver.decisions.contains { if case .skipped(_, _, 1, let reason) = $0 { return reason.contains("one fire is already held") } else { return false } })
        driver.handle(.switchMode("default"))
        #expect(driver.reply == .success(.released([T.name("web")])))
        #expect(driver.starts.count == 1)
    }

    @Test func ownersGoneAndClosedConnectionsRemoveTheirJobs() {
        var driver = Driver()
        _ = driver.add("conn", ["every": "1m", "owner": "connection"], connection: 7)
        _ = driver.add("proc", ["every": "1m", "owner": "pid:4242"])
        #expect(driver.add("noconn", ["every": "1m", "owner": "connection"])?.code == .badArgument)

        driver.handle(.connectionClosed(7))
        #expect(driver.engine.job(T.name("conn")) == nil)
        #expect(driver.decisions.contains { if case .cancelled(let name, _, _, _) = $0 { return name == T.name("conn") } else { return false } })

        let proc = driver.engine.job(T.name("proc"))!
        driver.handle(.ownerGone(proc.spec.name, jobID: proc.id, reason: "cancelled: its owner process 4242 exited"))
        #expect(driver.engine.job(T.name("proc")) == nil)
        #expect(driver.effects.contains { if case .unwatchOwner = $0 { return true } else { return false } })
        // Owner-bound jobs are never stored.
        #expect(!driver.effects.contains { if case .persist = $0 { return true } else { return false } })
    }

    @Test func aRuntimeJobComesBackAfterARestartWithItsMissedFires() {
        var driver = Driver(at: "2026-01-05T00:10:30Z")
        let anchor = T.time("2026-01-05T00:01:00Z")
        let spec = T.spec("backup", ["every": "1m", "misfire": "all"])
        var state = RestoredState()
        state.jobs = [RestoredJob(
            stored: StoredJobState(name: spec.name, options: spec.options, paused: false, runs: 5, addedAt: T.time("2026-01-05T00:00:00Z"),
                                   lastScheduled: T.time("2026-01-05T00:05:00Z"), anchor: anchor, ownerUID: 0, shared: false),
            spec: spec, civil: nil)]
        driver.handle(.restore(state))
        // 00:06 … 00:10 were missed; misfire=all runs them one after another, oldest first.
        #expect(driver.starts.map(\.scheduled) == [T.time("2026-01-05T00:06:00Z")])
        #expect(driver.starts.first?.run == 6)
        #expect(driver.engine.job(spec.name)?.replays.count == 4)
        var replayed: [WallTime] = []
        while let start = driver.starts.first {
            replayed.append(start.scheduled)
            driver.finish(start)
        }
        #expect(replayed.count == 5)
        #expect(replayed.last == T.time("2026-01-05T00:10:00Z"))
        #expect(driver.armed.isEmpty)  // armed at restore for 00:11, not again
    }

    @Test func clusterFiresRunOnlyOnceTheClaimIsWon() {
        var driver = Driver(settings: EngineSettings(clusterNode: "a"))
        _ = driver.add("shared", ["every": "10s"])
        #expect(driver.armed.isEmpty)  // not a member yet
        driver.handle(.clusterView(ClusterView(role: .member, members: [ClusterMember(name: "a")], reason: "joined")))
        #expect(driver.armed.count == 1)
        driver.reach("shared", after: .seconds(10))
        guard case .claim(let name, let jobID, let instant, _, let token)? = driver.effects.first(where: {
            if case .claim = $0 { return true } else { return false }
        }) else {
            Issue.record("no claim")
            return
        }
        #expect(driver.starts.isEmpty)
        driver.handle(.claimDecided(name, jobID: jobID, token: token, won: true, reason: ""))
        #expect(driver.starts.map(\.scheduled) == [instant])

        driver.reach("shared", after: .seconds(10))
        guard case .claim(_, _, _, _, let second)? = driver.effects.first(where: { if case .claim = $0 { return true } else { return false } }) else {
            Issue.record("no second claim")
            return
        }
        driver.handle(.claimDecided(name, jobID: jobID, token: second, won: false, reason: "another node claimed it"))
        #expect(driver.starts.isEmpty)

        // Another member joins and wins the job: it stops here.
        driver.handle(.clusterView(ClusterView(role: .member, members: [ClusterMember(name: "a"), ClusterMember(name: "b")], reason: "b joined")))
        let owner = driver.engine.owner(of: driver.engine.job(T.name("shared"))!)
        #expect(driver.effects.contains { if case .disarm = $0 { return true } else { return false } } == (owner == "b"))
        driver.handle(.clusterView(ClusterView(role: .unavailable, members: [ClusterMember(name: "a"), ClusterMember(name: "b")], reason: "lease lost")))
        #expect(driver.engine.owner(of: driver.engine.job(T.name("shared"))!) == nil)
    }

    @Test func aRunsEndTriggersTheJobsThatFollowItAsTheirAfterResultSays() {
        var driver = Driver()
        _ = driver.add("a", ["every": "10s", "overlap": "allow"])
        _ = driver.add("b", ["after": "a"])
        _ = driver.add("c", ["after": "a", "after_result": "failure"])
        _ = driver.add("d", ["every": "1h", "after": "a", "after_result": "any"])
        #expect(driver.add("e", ["after": "nope"])?.code == .badArgument)
        #expect(driver.engine.job(T.name("b"))!.spec.schedule == .triggered && driver.armed.isEmpty)
        driver.reach("a", after: .seconds(10))
        let first = driver.starts[0]
        driver.finish(first, .ok)
        #expect(driver.starts.map(\.job.rawValue) == ["b", "d"])
        #expect(driver.starts.allSatisfy { $0.trigger == RunTrigger(job: T.name("a"), run: first.run) })
        // d keeps its own schedule: still armed for its hour.
        #expect(driver.engine.job(T.name("d"))!.nextMono != nil)
        for start in driver.starts { driver.finish(start) }
        driver.reach("a", after: .seconds(10))
        let second = driver.starts[0]
        driver.finish(second, .failed)
        #expect(driver.starts.map(\.job.rawValue) == ["c", "d"])
        // A paused follower does not fire, and says why.
        for start in driver.starts { driver.finish(start) }
        driver.handle(.pause([T.name("b")], by: T.root, checkOnly: false))
        driver.reach("a", after: .seconds(10))
        driver.finish(driver.starts[0], .ok)
        #expect(driver.starts.map(\.job.rawValue) == ["d"])
        #expect(driver.decisions.contains { decision in
            if case .skipped(T.name("b"), _, 1, let reason) = decision { return reason.hasPrefix("paused when a run ") }
            return false
        })
    }

    @Test func aPoolCapsItsJobsRunsWithoutHoldingUpOthers() {
        var settings = EngineSettings(maxRunning: 10)
        settings.pools = ["heavy": 1]
        var driver = Driver(settings: settings)
        _ = driver.add("a", ["every": "10s", "pool": "heavy"])
        _ = driver.add("b", ["every": "10s", "pool": "heavy"])
        _ = driver.add("c", ["every": "10s"])
        #expect(driver.add("d", ["every": "10s", "pool": "nope"])?.code == .badArgument)
        driver.clock.advance(by: .seconds(10))
        let a = driver.engine.job(T.name("a"))!, b = driver.engine.job(T.name("b"))!, c = driver.engine.job(T.name("c"))!
        driver.handle(.deadlineReached(a.spec.name, jobID: a.id))
        let run = driver.starts[0]
        driver.handle(.deadlineReached(b.spec.name, jobID: b.id))
        #expect(driver.starts.isEmpty)
        #expect(driver.decisions.contains { decision in
            if case .queued(b.spec.name, _, let reason) = decision { return reason.contains("slot of pool heavy") }
            return false
        })
        // Outside the pool, c starts though b waits.
        driver.handle(.deadlineReached(c.spec.name, jobID: c.id))
        #expect(driver.starts.map(\.job) == [c.spec.name])
        driver.finish(run)
        #expect(driver.starts.map(\.job) == [b.spec.name])
    }

    @Test func maxRunningParksFiresUntilASlotFrees() {
        var driver = Driver(settings: EngineSettings(maxRunning: 1))
        _ = driver.add("a", ["every": "10s", "overlap": "allow"])
        _ = driver.add("b", ["every": "10s", "start": "10s", "overlap": "allow"])
        driver.clock.advance(by: .seconds(10))
        let a = driver.engine.job(T.name("a"))!, b = driver.engine.job(T.name("b"))!
        driver.handle(.deadlineReached(a.spec.name, jobID: a.id))
        let run = driver.starts[0]
        driver.handle(.deadlineReached(b.spec.name, jobID: b.id))
        #expect(driver.starts.isEmpty)
        #expect(driver.decisions.contains { if case .queued(let name, _, _) = $0 { return name == b.spec.name } else { return false } })
        driver.clock.advance(by: .seconds(3))
        driver.finish(run)
        #expect(driver.starts.map(\.job) == [b.spec.name])
        #expect(driver.starts.first?.lateness == .seconds(3))
    }

    /// A second run by hand while the first still waits for a run slot is `skipped` under overlap=skip
    /// (RUN's reply, docs/protocol.md): counted with its reason, and nothing more waits.
    @Test func aSecondRunByHandWhileTheFirstWaitsForASlotIsSkipped() {
        var driver = Driver(settings: EngineSettings(maxRunning: 1))
        _ = driver.add("long", ["every": "1h"])
        _ = driver.add("b", ["every": "1h"])
        driver.handle(.runNow(T.name("long"), by: T.root))
        #expect(driver.reply == .success(.fire("started")))
        driver.handle(.runNow(T.name("b"), by: T.root))
        #expect(driver.reply == .success(.fire("waiting")))
        driver.handle(.runNow(T.name("b"), by: T.root))
        #expect(driver.reply == .success(.fire("skipped")))
        let b = driver.engine.job(T.name("b"))!
        #expect(b.skipped == 1 && b.waitingForSlot == 1)
        #expect(driver.decisions.contains {
            if case .skipped(_, _, _, let reason) = $0 { return reason == "the previous fire is still waiting for a run slot (overlap=skip)" }
            return false
        })
        // Forced, it waits for a slot as well.
        driver.handle(.runNow(T.name("b"), by: T.root, force: true))
        #expect(driver.reply == .success(.fire("waiting")))
        #expect(b.waitingForSlot == 2)
    }

    /// A finished one-shot cannot be paused: a config job is told to change its config (as CANCEL tells
    /// it, which no longer offers a pause), a runtime job to cancel it and add it again.
    @Test func aFinishedOneShotsHintsAgreeWithWhereItIsDeclared() {
        var driver = Driver()
        driver.handle(.reload([T.declared("once", ["in": "1s"])], maxRunning: 4))
        _ = driver.add("mine", ["in": "1s"])
        driver.clock.advance(by: .seconds(1))
        for name in ["once", "mine"] {
            let job = driver.engine.job(T.name(name))!
            driver.handle(.deadlineReached(job.spec.name, jobID: job.id))
            driver.finish(driver.starts[0])
            #expect(job.state == .finished, "\(name)")
        }
        func message(_ input: Input) -> String? {
            driver.handle(input)
            if case .failure(let error)? = driver.reply { return error.message }
            return nil
        }
        #expect(message(.pause([T.name("once")], by: T.root, checkOnly: false))
            == "once has finished its schedule; RUN it by hand, or give it a new schedule in test.conf:1 and reload")
        #expect(message(.cancel([T.name("once")], by: T.root, checkOnly: false)) == "once is declared in test.conf:1; remove it there and reload")
        #expect(message(.pause([T.name("mine")], by: T.root, checkOnly: false))
            == "mine has finished its schedule; RUN it by hand, or cancel it and add it again")
    }

    /// Delivers the job's retry (its armed deadline) and returns the run it started.
    static func retry(_ driver: inout Driver, _ name: String) -> RunStart? {
        guard case .mono(let due)? = driver.armed.last?.1 else { return nil }
        let job = driver.engine.job(T.name(name))!
        driver.clock.advance(by: due - driver.clock.monotonicNow)
        driver.handle(.deadlineReached(job.spec.name, jobID: job.id))
        return driver.starts.first
    }

    @Test func aFailedRunIsRetriedWithBackoffAndOnlyTheLastAttemptIsTold() {
        var driver = Driver()
        _ = driver.add("r", ["in": "10s", "retries": "2", "retry_backoff": "10s", "on_failure": "true", "on_recovery": "true"])
        let name = T.name("r")
        driver.reach("r", after: .seconds(10))
        let first = driver.starts[0]
        #expect(first.attempt == 1)
        driver.clock.advance(by: .seconds(1))
        driver.finish(first, .failed)
        // The one-shot is finished, but its fire has two attempts left: the first in [5s, 10s].
        guard case .mono(let due)? = driver.armed.last?.1 else { Issue.record("no retry armed: \(driver.effects)"); return }
        #expect(due - driver.clock.monotonicNow >= .seconds(5) && due - driver.clock.monotonicNow <= .seconds(10))
        #expect(driver.decisions.contains { if case .retrying(name, first.run, 2, _, _) = $0 { return true } else { return false } })
        #expect(!driver.effects.contains { if case .notifyTransition = $0 { return true } else { return false } })
        let second = Self.retry(&driver, "r")
        #expect(second?.attempt == 2 && second?.scheduled == first.scheduled)
        driver.finish(second!, .timeout)
        // The second retry's backoff doubles: [10s, 20s].
        guard case .mono(let later)? = driver.armed.last?.1 else { Issue.record("no second retry"); return }
        #expect(later - driver.clock.monotonicNow >= .seconds(10) && later - driver.clock.monotonicNow <= .seconds(20))
        let third = Self.retry(&driver, "r")
        #expect(third?.attempt == 3)
        driver.finish(third!, .failed)
        // No attempts left: told once, and nothing more is armed.
        let told = driver.effects.filter { if case .notifyTransition(_, _, _, false) = $0 { return true } else { return false } }
        #expect(told.count == 1)
        #expect(driver.armed.isEmpty && driver.engine.job(name)?.pendingRetry == nil)
        let history = driver.records.compactMap { record -> FinishedRun? in
            if case .run(let run, _) = record { return run }
            return nil
        }
        #expect(history.map(\.attempt) == [3])
    }

    @Test func aRetryThatSucceedsEndsTheFireOkAndAStoppedRunIsNotRetried() {
        var driver = Driver()
        _ = driver.add("s", ["every": "1h", "retries": "3", "retry_backoff": "1s", "on_failure": "true"])
        driver.reach("s", after: .seconds(3600))
        driver.finish(driver.starts[0], .failed)
        let again = Self.retry(&driver, "s")!
        driver.finish(again, .ok)
        #expect(driver.engine.job(T.name("s"))!.lastFinalResult == .ok)
        #expect(!driver.effects.contains { if case .notifyTransition = $0 { return true } else { return false } })
        // Killed (stopped, or by a signal): not retried.
        driver.reach("s", after: .seconds(3600))
        driver.finish(driver.starts[0], .killed)
        #expect(driver.engine.job(T.name("s"))!.pendingRetry == nil)
        // Retries are not counted as fires of the schedule (`count`), and a pause drops a pending one.
        driver.reach("s", after: .seconds(3600))
        driver.finish(driver.starts[0], .failed)
        #expect(driver.engine.job(T.name("s"))!.pendingRetry != nil)
        driver.handle(.pause([T.name("s")], by: T.root, checkOnly: false))
        #expect(driver.engine.job(T.name("s"))!.pendingRetry == nil)
    }

    @Test func failuresInARowPauseTheJobAndResumeCountsAgain() {
        var driver = Driver()
        _ = driver.add("f", ["every": "10s", "pause_after_failures": "2", "on_failure": "true", "overlap": "queue"])
        let name = T.name("f")
        driver.reach("f", after: .seconds(10))
        driver.finish(driver.starts[0], .failed)
        #expect(driver.engine.job(name)!.consecutiveFailures == 1 && driver.engine.job(name)!.state == .scheduled)
        // A success starts the count again.
        driver.reach("f", after: .seconds(10))
        driver.finish(driver.starts[0], .ok)
        #expect(driver.engine.job(name)!.consecutiveFailures == 0)
        driver.reach("f", after: .seconds(10))
        driver.finish(driver.starts[0], .failed)
        driver.reach("f", after: .seconds(10))
        let second = driver.starts[0]
        // A fire queued behind the second failure does not run once the job is paused.
        driver.reach("f", after: .seconds(10))
        driver.finish(second, .failed)
        let job = driver.engine.job(name)!
        #expect(job.state == .paused)
        let reason = "paused after 2 failed runs in a row (pause_after_failures=2); RESUME it once the cause is fixed"
        #expect(job.pauseReason == reason)
        #expect(driver.starts.isEmpty)
        #expect(driver.decisions.contains { if case .paused(name, reason) = $0 { return true } else { return false } })
        let told = driver.effects.compactMap { effect -> String? in
            if case .notifyTransition(_, _, let outcome, false) = effect { return outcome.reason }
            return nil
        }
        #expect(told == ["exited with status 1; the job was \(reason)"])
        let records = driver.effects.compactMap { effect -> FireRecord? in
            if case .persist(.fireRecord(let record, _)) = effect { return record }
            return nil
        }
        #expect(records.contains { $0.outcome == .ran && $0.result == .failed && $0.reason == "the job was \(reason)" })
        #expect(records.contains { $0.outcome == .skipped && $0.reason == "the job was \(reason)" })
        // Nothing fires while paused; RESUME counts again from zero.
        #expect(driver.armed.isEmpty)
        driver.handle(.resume([name], .onSchedule, by: T.root, checkOnly: false))
        #expect(job.state == .scheduled && job.consecutiveFailures == 0 && job.pauseReason == nil)
    }

    @Test func fireRecordsFollowAFireFromQueuedToFinished() {
        var driver = Driver()
        _ = driver.add("q", ["every": "10s", "overlap": "queue"])
        driver.reach("q", after: .seconds(10))
        let first = driver.starts[0]
        driver.reach("q", after: .seconds(10))
        let records = driver.effects.compactMap { effect -> FireRecord? in
            if case .persist(.fireRecord(let record, _)) = effect { return record }
            return nil
        }
        #expect(records.map(\.outcome) == [.queued])
        #expect(records.first?.sequence == 2)
        driver.finish(first)
        let after = driver.effects.compactMap { effect -> FireRecord? in
            if case .persist(.fireRecord(let record, _)) = effect { return record }
            return nil
        }
        #expect(after.map(\.outcome) == [.ran, .ran])
        #expect(after.map(\.sequence) == [1, 2])
        #expect(after[0].result == .ok)
        #expect(after[1].run == 2)
    }
}

extension Result where Failure == TimerdError {
    var code: TimerdError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
