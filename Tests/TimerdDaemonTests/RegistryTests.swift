import Synchronization
import Testing
import TimerdConfig
import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem
@testable import TimerdDaemon

/// A launcher that starts nothing: it records each request and lets the test end runs.
final class FakeLauncher: RunLauncher {
    final class Handle: RunHandle {
        let stops = Mutex<[String]>([])
        func stop(reason: String) { stops.withLock { $0.append("stop: " + reason) } }
        func kill(reason: String) { stops.withLock { $0.append("kill: " + reason) } }
    }

    let started = Mutex<[(request: RunRequest, events: @Sendable (RunEvent) -> Void, handle: Handle)]>([])

    func start(_ request: RunRequest, events: @escaping @Sendable (RunEvent) -> Void) -> any RunHandle {
        let handle = Handle()
        started.withLock { $0.append((request, events, handle)) }
        return handle
    }

    var count: Int { started.withLock { $0.count } }

    func request(_ index: Int) -> RunRequest { started.withLock { $0[index].request } }
    func handle(_ index: Int) -> Handle { started.withLock { $0[index].handle } }

    /// Ends run `index` with `result` (at `at`, as the real launchers read the wall clock then).
    func finish(_ index: Int, _ result: RunOutcome.Result = .ok, exitCode: Int? = 0, output: String = "", at: WallTime = WallTime(seconds: 0)) {
        let events = started.withLock { $0[index].events }
        events(.finished(RunOutcome(
            result: result, exitCode: exitCode, signal: nil, reason: "test", output: output,
            finishedWall: at, duration: .zero)))
    }
}

func spec(_ name: String, _ options: [String: String]) throws -> JobSpec {
    try JobSpec(name: JobName(name), options: options.sorted { $0.key < $1.key }.map { KeyValue($0.key, $0.value) })
}

/// A manual clock far ahead of the host's monotonic clock: the registry's Dispatch timers, armed on it,
/// do not go off during a test; the test moves it and delivers deadlines itself (`fireScheduled`).
func testClock() -> ManualClock {
    var start = HostClock().now()
    start.mono = start.mono + .seconds(366 * 86_400)
    return ManualClock(start)
}

extension Registry {
    /// A scheduled fire of `name` now, as its timer would deliver it: the clock moves to the job's next
    /// deadline, which is then reached.
    func fireScheduled(_ name: JobName, clock: ManualClock) {
        guard let job = engine.job(name) else { return }
        if let mono = job.nextMono {
            clock.advance(by: max(.zero, mono - clock.monotonicNow))
        } else if let wall = job.nextWall {
            clock.advance(by: max(.zero, wall - clock.wallNow))
        }
        deliver(.deadlineReached(name, jobID: job.id))
    }
}

/// Waits until the registry has processed everything enqueued so far (launcher events hop onto its queue).
func settle(_ registry: Registry) async {
    await withCheckedContinuation { continuation in
        registry.queue.async { continuation.resume() }
    }
}

@Suite struct RegistryTests {
    let launcher = FakeLauncher()
    let sink = MemoryLogSink()
    let clock = testClock()
    let registry: Registry

    init() {
        registry = Registry(launcher: launcher, log: Logger(sink: sink, minimum: .debug), maxRunning: 2,
                            baseEnvironment: [KeyValue("PATH", "/bin")], clock: clock)
    }

    @Test func runNowStartsARunWithTheJobsEnvironment() async throws {
        try await registry.add(spec("a", ["every": "1h", "command": "true", "env": "X=1", "meta": "k=v"]), origin: .runtime)
        #expect(try await registry.runNow(JobName("a")) == "started")
        #expect(launcher.count == 1)
        let request = launcher.request(0)
        #expect(request.runID == 1)
        #expect(request.environment["X"] == "1")
        #expect(request.environment["TIMERD_META_K"] == "v")
        #expect(request.environment["TIMERD_JOB"] == "a")
        // Not due, so no due time (its history's scheduled_at is null) and no lateness.
        #expect(request.environment["TIMERD_SCHEDULED_AT"] == nil)
        #expect(try await registry.show(JobName("a")).last_lateness_ms == nil)
        #expect(request.environment["PATH"] == "/bin")
        #expect(request.workingDirectory == "/")
        launcher.finish(0, .failed, exitCode: 4)
        await settle(registry)
        let info = try await registry.show(JobName("a"))
        #expect(info.last_result == .failed)
        #expect(info.last_exit_code == 4)
        #expect(info.running == 0)
    }

    @Test func overlapSkipRefusesASecondRun() async throws {
        try await registry.add(spec("s", ["every": "1h", "command": "true"]), origin: .runtime)
        _ = try await registry.runNow(JobName("s"))
        await #expect(throws: TimerdError(.busy, "")) { try await registry.runNow(JobName("s")) }
        // A scheduled fire in the same situation is skipped and counted.
        await registry.fireScheduled(try JobName("s"), clock: clock)
        let info = try await registry.show(JobName("s"))
        #expect(info.skipped == 1)
        #expect(info.last_skip?.reason == "run 1 is still going (overlap=skip)")
        #expect(launcher.count == 1)
    }

    @Test func overlapQueueStartsThePendingFireWhenTheRunEnds() async throws {
        try await registry.add(spec("q", ["every": "1h", "command": "true", "overlap": "queue"]), origin: .runtime)
        #expect(try await registry.runNow(JobName("q")) == "started")
        #expect(try await registry.runNow(JobName("q")) == "queued")
        await #expect(throws: TimerdError(.busy, "")) { try await registry.runNow(JobName("q")) }
        #expect(try await registry.show(JobName("q")).pending == 1)
        clock.advance(by: .seconds(2))
        launcher.finish(0)
        await settle(registry)
        #expect(launcher.count == 2)
        #expect(launcher.request(1).runID == 2)
        let info = try await registry.show(JobName("q"))
        #expect(info.pending == 0)
        // Queued by hand, it started 2 s after it was asked for: still no lateness, as in its history.
        #expect(info.last_run == 2 && info.last_lateness_ms == nil)
    }

    @Test func overlapReplaceStopsTheRunningOneFirst() async throws {
        try await registry.add(spec("r", ["every": "1h", "command": "true", "overlap": "replace"]), origin: .runtime)
        _ = try await registry.runNow(JobName("r"))
        #expect(try await registry.runNow(JobName("r")) == "queued")
        #expect(launcher.handle(0).stops.withLock { $0 } == ["stop: replaced by a new fire (overlap=replace)"])
        #expect(launcher.count == 1, "the new run waits for the old one to end")
        launcher.finish(0, .killed, exitCode: nil)
        await settle(registry)
        #expect(launcher.count == 2)
    }

    @Test func overlapAllowRunsSideBySide() async throws {
        try await registry.add(spec("a", ["every": "1h", "command": "true", "overlap": "allow"]), origin: .runtime)
        _ = try await registry.runNow(JobName("a"))
        _ = try await registry.runNow(JobName("a"))
        #expect(launcher.count == 2)
        #expect(try await registry.show(JobName("a")).running == 2)
    }

    @Test func runsOverTheCapWaitForASlot() async throws {
        for name in ["a", "b", "c"] {
            try await registry.add(spec(name, ["every": "1h", "command": "true"]), origin: .runtime)
        }
        #expect(try await registry.runNow(JobName("a")) == "started")
        #expect(try await registry.runNow(JobName("b")) == "started")
        #expect(try await registry.runNow(JobName("c")) == "waiting")
        #expect(try await registry.show(JobName("c")).pending == 1)
        // c is busy while it waits: with overlap=skip a second fire is skipped, not parked twice.
        await registry.fireScheduled(try JobName("c"), clock: clock)
        #expect(try await registry.show(JobName("c")).skipped == 1)
        launcher.finish(1)
        await settle(registry)
        #expect(launcher.count == 3)
        #expect(launcher.request(2).job == "c")
        #expect(sink.all.contains { $0.contains("job=c fire waits for a run slot (max_running=2") })
    }

    @Test func listDescribesEveryJobInNameOrderAcrossItsSlices() async throws {
        // More jobs than one slice (JobList.slice), added out of order, half of them tagged.
        let count = JobList.slice * 2 + 37
        func name(_ index: Int) -> String { "j" + String(repeating: "0", count: 4 - String(index).count) + String(index) }
        for index in (0..<count).reversed() {
            var options = ["every": "1h", "command": "true"]
            if index % 2 == 0 { options["tag"] = "even" }
            try await registry.add(spec(name(index), options), origin: .runtime)
        }
        let names = (0..<count).map(name)
        #expect(await registry.list().map(\.name) == names)
        #expect(await registry.list(tag: "even").map(\.name) == names.enumerated().filter { $0.offset % 2 == 0 }.map(\.element))
    }

    @Test func aRefusedAddLeavesItsConnectionNoClaimOnTheJob() async throws {
        try await registry.add(spec("x", ["every": "1h", "command": "true", "owner": "connection"]), origin: .runtime, connection: 2)
        await #expect(throws: TimerdError(.exists, "")) {
            try await registry.add(spec("x", ["every": "1h", "command": "true", "owner": "connection"]), origin: .runtime, connection: 1)
        }
        await registry.connectionClosed(1)
        #expect(await registry.list().map(\.name) == ["x"], "connection 1 never owned x")
        await registry.connectionClosed(2)
        #expect(await registry.list().isEmpty)
    }

    @Test func cancelIsAllOrNothingAndRefusesConfigJobs() async throws {
        try await registry.add(spec("a", ["every": "1h", "command": "true"]), origin: .runtime)
        try await registry.add(spec("c", ["every": "1h", "command": "true"]), origin: .config(file: "/etc/t.conf", line: 4))
        await #expect(throws: TimerdError(.declaredInConfig, "")) { try await registry.cancel([JobName("a"), JobName("c")]) }
        #expect(await registry.list().count == 2)
        await #expect(throws: TimerdError(.noSuchJob, "")) { try await registry.cancel([JobName("a"), JobName("zz")]) }
        try await registry.cancel([JobName("a")])
        #expect(await registry.list().map(\.name) == ["c"])
    }

    @Test func aCancelledJobsLateRunEndDoesNotTouchANewJobOfTheSameName() async throws {
        try await registry.add(spec("x", ["every": "1h", "command": "true"]), origin: .runtime)
        _ = try await registry.runNow(JobName("x"))
        try await registry.cancel([JobName("x")])
        try await registry.add(spec("x", ["every": "2h", "command": "true"]), origin: .runtime)
        launcher.finish(0, .failed, exitCode: 9)
        await settle(registry)
        let info = try await registry.show(JobName("x"))
        #expect(info.last_result == nil)
        #expect(info.runs == 0)
        #expect(await registry.engine.runningTotal == 0, "the orphan run still freed its slot")
    }

    @Test func generatedNamesSkipEveryNameEverUsed() async throws {
        try await registry.add(spec("exec-1", ["in": "1h", "command": "true"]), origin: .runtime)
        try await registry.cancel([JobName("exec-1")])
        #expect(await registry.generateName().rawValue == "exec-2")
        #expect(await registry.generateName().rawValue == "exec-3")
    }

    @Test func applyConfigDiffsAndRejectsConflictsWhole() async throws {
        func declared(_ name: String, _ every: String, line: Int) throws -> ConfiguredJob {
            ConfiguredJob(spec: try spec(name, ["every": every, "command": "true"]), file: "/c", line: line)
        }
        var summary = try await registry.applyConfig([declared("keep", "1h", line: 1), declared("change", "1h", line: 2), declared("drop", "1h", line: 3)], maxRunning: 2)
        #expect(summary.added == ["keep", "change", "drop"])
        try await registry.pause([JobName("keep")])
        try await registry.add(spec("mine", ["every": "1h", "command": "true"]), origin: .runtime)

        summary = try await registry.applyConfig([declared("keep", "1h", line: 5), declared("change", "2h", line: 6), declared("new", "1h", line: 7)], maxRunning: 5)
        #expect(summary.added == ["new"])
        #expect(summary.changed == ["change"])
        #expect(summary.removed == ["drop"])
        #expect(summary.unchanged == 1)
        #expect(try await registry.show(JobName("keep")).state == .paused, "unchanged jobs keep their state")
        #expect(try await registry.show(JobName("keep")).declared_at == "/c:5")
        #expect(try await registry.show(JobName("change")).schedule == "every 2h")
        #expect(await registry.engine.settings.maxRunning == 5)

        await #expect(throws: TimerdError(.invalidConfig, "")) {
            try await registry.applyConfig([declared("mine", "1h", line: 9)], maxRunning: 5)
        }
        #expect(await registry.list().map(\.name) == ["change", "keep", "mine", "new"], "a rejected config changes nothing")
    }

    @Test func shutdownKillsRunsAfterTheGracePeriod() async throws {
        try await registry.add(spec("long", ["every": "1h", "command": "true"]), origin: .runtime)
        _ = try await registry.runNow(JobName("long"))
        let launcher = self.launcher
        // The fake run ends as soon as it is killed, as a real process group would.
        let watcher = Task {
            while launcher.handle(0).stops.withLock({ $0.isEmpty }) { await Task.yield() }
            launcher.finish(0, .killed, exitCode: nil)
        }
        await registry.shutdown(grace: .milliseconds(50))
        await watcher.value
        #expect(launcher.handle(0).stops.withLock { $0 } == ["kill: timerd stopped and the grace period ran out"])
        await #expect(throws: TimerdError(.shuttingDown, "")) { try await registry.runNow(JobName("long")) }
    }

    @Test func resumeNowOnAOneShotIsItsOnlyFire() async throws {
        try await registry.add(spec("once", ["in": "1h", "command": "true"]), origin: .runtime)
        try await registry.pause([JobName("once")])
        try await registry.resume([JobName("once")], mode: .now)
        #expect(launcher.count == 1)
        let info = try await registry.show(JobName("once"))
        #expect(info.state == .finished)
        #expect(info.next_fire == nil)
    }

    @Test func resumeNowCountsTowardCount() async throws {
        try await registry.add(spec("two", ["every": "1h", "count": "2", "command": "true", "overlap": "allow"]), origin: .runtime)
        try await registry.resume([JobName("two")], mode: .now)
        #expect(try await registry.show(JobName("two")).state == .scheduled)
        try await registry.resume([JobName("two")], mode: .now)
        #expect(try await registry.show(JobName("two")).state == .finished)
        #expect(launcher.count == 2)
    }

    @Test func finishedRuntimeJobsAreForgottenBeyondTheLimit() async throws {
        let total = Engine.finishedRuntimeJobsKept + 5
        for index in 0..<total {
            try await registry.add(spec("o\(index)", ["in": "1h", "command": "true"]), origin: .runtime)
            try await registry.resume([JobName("o\(index)")], mode: .now)
            launcher.finish(index)
            await settle(registry)
        }
        let names = Set(await registry.list().map(\.name))
        #expect(names.count == Engine.finishedRuntimeJobsKept)
        #expect(!names.contains("o0") && !names.contains("o4") && names.contains("o5"))
    }

    @Test func aReleasedHeldFireFollowsTheOverlapPolicy() async throws {
        try await registry.add(spec("h", ["every": "1h", "command": "true"]), origin: .runtime)
        _ = await registry.switchMode(to: "maintenance")
        await registry.fireScheduled(try JobName("h"), clock: clock)
        #expect(try await registry.show(JobName("h")).held_since != nil)
        #expect(launcher.count == 0, "held, not run")
        _ = try await registry.runNow(JobName("h"))  // by hand: ignores the mode
        #expect(launcher.count == 1)
        let info = await registry.switchMode(to: "default")
        #expect(info.released == ["h"])
        #expect(launcher.count == 1, "run 1 is still going and overlap=skip: the released fire is skipped")
        #expect(try await registry.show(JobName("h")).last_skip?.reason == "run 1 is still going (overlap=skip)")
        #expect(try await registry.show(JobName("h")).held_since == nil)
    }
}

/// A job is stored once per job: its inline size is what 100,000 jobs multiply (docs/performance.md).
@Suite struct JobLayoutTests {
    @Test func aJobStaysSmall() {
        #expect(MemoryLayout<EngineJob>.size <= 1_100, "EngineJob is \(MemoryLayout<EngineJob>.size) bytes inline")
        print("MemoryLayout<EngineJob>.size = \(MemoryLayout<EngineJob>.size), JobSpec = \(MemoryLayout<JobSpec>.size)")
    }
}
