import Glibc
import Testing
import TimerdCore
import TimerdEngine
import TimerdStore
@testable import TimerdDaemon

/// The registry with a real state store: a change is in effect only once written, a write that fails
/// changes nothing, and requests naming one job take effect in order (`docs/state.md`).
@Suite struct WriteAheadRegistryTests {
    let launcher = FakeLauncher()
    let clock = testClock()
    let directory: String
    let faultFile: String
    let store: StateStore
    let registry: Registry

    init() throws {
        var template = Array("/tmp/timerd-writeahead.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TimerdError(.internal, "mkdtemp failed") }
        directory = String(cString: made)
        faultFile = directory + "/fault"
        store = try StateStore.open(directory: directory + "/state", faultFile: faultFile).store
        registry = Registry(launcher: launcher, log: Logger(sink: MemoryLogSink(), minimum: .debug), maxRunning: 4,
                            baseEnvironment: [], store: store, clock: clock)
    }

    private func removeAll() {
        store.close()
        for name in ["state/state.db", "state/state.db-wal", "state/state.db-shm", "fault"] { unlink(directory + "/" + name) }
        rmdir(directory + "/state")
        rmdir(directory)
    }

    private func setFault(_ on: Bool) {
        if on { close(open(faultFile, O_CREAT | O_WRONLY, 0o600)) } else { unlink(faultFile) }
    }

    @Test func aChangeThatCannotBeWrittenIsRefusedAndChangesNothing() async throws {
        defer { removeAll() }
        let kept = try JobName("kept"), new = try JobName("new")
        try await registry.add(spec("kept", ["every": "1h", "command": "true"]), origin: .runtime)
        setFault(true)
        await #expect(throws: TimerdError(.storageUnavailable, "")) {
            try await registry.add(spec("new", ["every": "1h", "command": "true"]), origin: .runtime)
        }
        await #expect(throws: TimerdError(.storageUnavailable, "")) { try await registry.pause([kept]) }
        await #expect(throws: TimerdError(.storageUnavailable, "")) { try await registry.cancel([kept]) }
        await #expect(throws: TimerdError(.storageUnavailable, "")) { _ = try await registry.runNow(kept) }
        #expect(await registry.engine.job(new) == nil)
        #expect(await registry.engine.job(kept)?.state == .scheduled)
        #expect(launcher.count == 0)
        // The job still fires while the store fails.
        await registry.fireScheduled(kept, clock: clock)
        #expect(launcher.count == 1)

        setFault(false)
        try await registry.add(spec("new", ["every": "1h", "command": "true"]), origin: .runtime)
        try await registry.pause([kept])
        let stored = try store.jobs().map { ($0.name, $0.paused) }
        #expect(stored.map(\.0) == ["kept", "new"])
        #expect(stored.first?.1 == true)
    }

    /// nil when `body` succeeds, else its error's code.
    private static func outcome(_ body: () async throws(TimerdError) -> Void) async -> TimerdError.Code? {
        do {
            try await body()
            return nil
        } catch {
            return error.code
        }
    }

    @Test func requestsNamingOneJobTakeEffectInOrder() async throws {
        defer { removeAll() }
        let registry = self.registry
        let first = try spec("x", ["every": "1h", "command": "true"])
        let second = try spec("x", ["every": "2h", "command": "true"])
        // Both ask at once; the second waits for the first's write, then finds the name taken.
        async let a = Self.outcome { () async throws(TimerdError) in try await registry.add(first, origin: .runtime) }
        async let b = Self.outcome { () async throws(TimerdError) in try await registry.add(second, origin: .runtime) }
        let codes = await [a, b]
        #expect(codes.filter { $0 == nil }.count == 1)
        #expect(codes.contains(TimerdError.Code.exists))
        #expect(try store.jobs().count == 1)
    }

    /// A burst's batch (`Registry.requests`): each request its own answer, requests naming a job an
    /// earlier one names planned after it took effect, one transaction for the lot; when it cannot be
    /// written, every change of the batch is refused and nothing changed.
    @Test func aBatchAnswersEachRequestAndFailsWholeWhenItCannotBeWritten() async throws {
        defer { removeAll() }
        let a = try JobName("a"), b = try JobName("b")
        func add(_ name: String, _ every: String) throws -> NamedRequest {
            let job = try spec(name, ["every": every, "command": "true"])
            return NamedRequest(.add(try Registry.addJob(job, origin: .runtime, owner: .daemon)), naming: [job.name])
        }
        let requester = Client.daemon.requester
        let transactions = store.counters.transactions
        let answers = await registry.requests([
            try add("a", "1h"), try add("b", "1h"), try add("a", "2h"),
            NamedRequest(.pause([a], by: requester, checkOnly: false), naming: [a]),
            NamedRequest(.cancel([try JobName("nosuch")], by: requester, checkOnly: false), naming: [try JobName("nosuch")]),
            NamedRequest(.cancel([b], by: requester, checkOnly: false), naming: [b]),
        ])
        #expect(answers.map { (try? $0.get()) == .done } == [true, true, false, true, false, true])
        #expect(answers[2].errorCode == .exists && answers[4].errorCode == .noSuchJob)
        // Two runs: [a, b] and [a, pause a…] (the second ADD of a and what follows waited for the first).
        #expect(store.counters.transactions - transactions == 2)
        #expect(await registry.engine.job(a)?.state == .paused)
        #expect(await registry.engine.job(b) == nil)
        #expect(try store.jobs().map { ($0.name, $0.paused) }.elementsEqual([("a", true)], by: ==))

        setFault(true)
        let refused = await registry.requests([try add("c", "1h"), NamedRequest(.resume([a], .onSchedule, by: requester, checkOnly: false), naming: [a])])
        #expect(refused.allSatisfy { $0.errorCode == .storageUnavailable })
        #expect(await registry.engine.job(try JobName("c")) == nil)
        #expect(await registry.engine.job(a)?.state == .paused)
        setFault(false)
    }
    /// A job due while the registry plans and applies a batch fires then, not after the whole batch
    /// (with many connections a timer's handler waits behind a turn per connection): `deliverDue`.
    @Test func aJobDueDuringABatchFiresWithinIt() async throws {
        defer { removeAll() }
        try await registry.add(spec("due", ["every": "1h", "command": "true"]), origin: .runtime)
        // Past its deadline; the test clock's Dispatch timers never go off by themselves.
        clock.advance(by: .seconds(3_601))
        let batch = try (0..<40).map { index -> NamedRequest in
            let job = try spec("b\(index)", ["every": "1h", "command": "true"])
            return NamedRequest(.add(try Registry.addJob(job, origin: .runtime, owner: .daemon)), naming: [job.name])
        }
        #expect(launcher.count == 0)
        let answers = await registry.requests(batch)
        #expect(answers.allSatisfy { (try? $0.get()) == .done })
        #expect(launcher.count == 1)
    }

    /// A job due while a long read goes a slice per turn of the registry's queue (`LIST`, the metrics)
    /// or a big cancel's jobs leave the table fires within it, not after it: `deliverDue` at each turn.
    @Test func aJobDueDuringAListTheMetricsOrABigCancelFiresWithinIt() async throws {
        defer { removeAll() }
        let bulk = try (0..<(Engine.cancelSlice * 2 + 1)).map { try JobName("j\($0)") }
        for name in bulk { try await registry.add(spec(name.rawValue, ["every": "1d", "command": "true"]), origin: .runtime) }
        try await registry.add(spec("due", ["every": "1h", "command": "true"]), origin: .runtime)
        let steps: [(String, () async throws -> Void)] = [
            ("LIST", { _ = await JobList.json(self.registry, tag: nil, viewer: .daemon) }),
            ("metrics", { _ = await self.registry.metricsText() }),
            ("cancel", {
                try await self.registry.cancel(bulk)
                await self.registry.cancelsFinished()
            }),
        ]
        for (index, (step, run)) in steps.enumerated() {
            // Past its deadline; the test clock's Dispatch timers never go off by themselves.
            clock.advance(by: .seconds(3_601))
            try await run()
            #expect(launcher.count == index + 1, "\(step)")
            launcher.finish(index)
            await settle(registry)
        }
    }

    /// More jobs than a slice: a write that fails cancels none of them; one that succeeds cancels all,
    /// from memory and from the store, and leaves the others; a refusal of any one refuses the whole.
    @Test func aCancelOfManyJobsIsAllOrNothing() async throws {
        defer { removeAll() }
        let count = Engine.cancelSlice * 3 + 7
        let names = try (0..<count).map { try JobName("j\($0)") }
        for name in names { try await registry.add(spec(name.rawValue, ["every": "1h", "command": "true"]), origin: .runtime) }
        try await registry.add(spec("other", ["every": "1h", "command": "true"]), origin: .runtime)
        setFault(true)
        await #expect(throws: TimerdError(.storageUnavailable, "")) { try await registry.cancel(names) }
        #expect(await registry.engine.jobs.count == count + 1)
        setFault(false)
        try await registry.add(spec("zz", ["every": "1h", "command": "true"]), origin: .config(file: "/etc/t.conf", line: 2))
        await #expect(throws: TimerdError(.declaredInConfig, "")) { try await registry.cancel(names + [JobName("zz")]) }
        #expect(await registry.engine.jobs.count == count + 2)
        try await registry.cancel(names)
        // Answered once on disk (one record of their names: their rows go behind it): gone for every
        // request already, though still leaving the table.
        #expect(await registry.engine.liveJobs.map(\.name.rawValue).sorted() == ["other", "zz"])
        #expect(await registry.counts().jobs == 2)
        await registry.cancelsFinished()
        store.flush()
        #expect(try store.jobs().map(\.name) == ["other"])
        #expect(await registry.engine.jobs.keys.map(\.rawValue).sorted() == ["other", "zz"])
        #expect(await registry.engine.cancelPendingCount == 0)
    }

    /// Two cancels of many jobs at once, naming the same jobs in different orders (their names are taken
    /// a slice at a time, in one order whatever the request's): one cancels them all, the other then
    /// finds no such job and cancels nothing.
    @Test func twoCancelsOfManyJobsAtOnceDoNotWaitForEachOther() async throws {
        defer { removeAll() }
        let count = Registry.namesSlice * 2
        let names = try (0..<count).map { try JobName("j\($0)") }
        for name in names { try await registry.add(spec(name.rawValue, ["every": "1h", "command": "true"]), origin: .runtime) }
        let registry = self.registry
        async let first: TimerdError? = { () async -> TimerdError? in
            do throws(TimerdError) { try await registry.cancel(names); return nil } catch { return error }
        }()
        async let second: TimerdError? = { () async -> TimerdError? in
            do throws(TimerdError) { try await registry.cancel(Array(names[(count / 2)...]) + Array(names[..<(count / 2)])); return nil } catch { return error }
        }()
        let codes = await [first, second].map { $0?.code }
        #expect(codes.filter { $0 == nil }.count == 1)
        #expect(codes.contains(TimerdError.Code.noSuchJob))
        await registry.cancelsFinished()
        #expect(await registry.engine.jobs.count == 0)
        #expect(try store.jobs().isEmpty)
    }
}

extension Result where Failure == TimerdError {
    fileprivate var errorCode: TimerdError.Code? {
        if case .failure(let error) = self { error.code } else { nil }
    }
}
