import Testing
import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem
@testable import TimerdDaemon

/// The registry's two Dispatch timers on the host's clocks: jobs fire in deadline order, never early,
/// a disarmed job not at all, and a wall deadline follows the (test) wall clock when it is set.
@Suite(.timeLimit(.minutes(1))) struct RegistryTimerTests {
    let launcher = FakeLauncher()
    let clock = SteppedClock()
    let registry: Registry
    let fired: AsyncStream<WatchEvent>

    init() async {
        registry = Registry(launcher: launcher, log: Logger(sink: MemoryLogSink(), minimum: .debug), maxRunning: 10,
                            baseEnvironment: [], clock: clock)
        let (stream, continuation) = AsyncStream.makeStream(of: WatchEvent.self)
        fired = stream
        await registry.addWatcher(1, filter: .all) { line in
            guard let event = try? Payload.decode(WatchEvent.self, from: line), event.event == "fired" else { return }
            continuation.yield(event)
        }
    }

    /// The next `count` fires, as the watcher saw them.
    func nextFires(_ count: Int) async -> [WatchEvent] {
        var events: [WatchEvent] = []
        for await event in fired {
            events.append(event)
            if events.count == count { break }
        }
        return events
    }

    @Test func monotonicJobsFireInDeadlineOrderNeverEarly() async throws {
        await registry.declare([
            try spec("c", ["in": "90ms", "command": "true"]),
            try spec("a", ["in": "30ms", "command": "true"]),
            try spec("b", ["in": "60ms", "command": "true", "leeway": "5ms"]),
        ])
        let events = await nextFires(3)
        #expect(events.map(\.job) == ["a", "b", "c"])
        for event in events { #expect(event.lateness_ms! >= 0) }
    }

    @Test func aDisarmedJobDoesNotFire() async throws {
        let x = try spec("x", ["in": "20ms", "command": "true"])
        let y = try spec("y", ["in": "60ms", "command": "true"])
        // x is armed first, then dropped from the config (disarmed) in the same step.
        await registry.declare([x, y], then: [y])
        let events = await nextFires(1)
        #expect(events.map(\.job) == ["y"])
        await settle(registry)
        #expect(launcher.count == 1)
    }

    @Test func aWallDeadlineFiresOnItsTimeNeverEarly() async throws {
        let at = clock.wallNow + .milliseconds(50)
        try await registry.add(spec("w", ["at": RFC3339.format(at), "command": "true"]), origin: .runtime)
        let events = await nextFires(1)
        #expect(events.map(\.job) == ["w"])
        #expect(events[0].lateness_ms! >= 0)
        #expect(clock.wallNow >= RFC3339.truncatedToMicroseconds(at))
    }

    @Test func settingTheWallClockMovesTheWallTimer() async throws {
        // Due in an hour of wall time; the clock is then set to 40 ms before it.
        let at = RFC3339.truncatedToMicroseconds(clock.wallNow + .seconds(3_600))
        try await registry.add(spec("later", ["at": RFC3339.format(at), "command": "true"]), origin: .runtime)
        clock.setWall(to: at + .milliseconds(-40))
        await registry.wallClockChanged(reason: "test clock set")
        let events = await nextFires(1)
        #expect(events.map(\.job) == ["later"])
        #expect(clock.wallNow >= at)
    }

    /// `nextWake` says when the first of the two timers goes off, on `CLOCK_MONOTONIC`, a wall deadline
    /// as far from now as it is on the wall clock; nothing armed, `UInt64.max`.
    @Test func theNextWakeIsTheEarlierTimersOnTheMonotonicClock() async throws {
        #expect(registry.nextWake.nanoseconds == .max)
        let hour: UInt64 = 3_600_000_000_000
        var before = SystemClock.monotonicNow()
        try await registry.add(spec("mono", ["in": "1h", "command": "true"]), origin: .runtime)
        #expect((before + hour...SystemClock.monotonicNow() + hour).contains(registry.nextWake.nanoseconds))

        before = SystemClock.monotonicNow()
        let at = RFC3339.truncatedToMicroseconds(clock.wallNow + .seconds(1_800))
        try await registry.add(spec("wall", ["at": RFC3339.format(at), "command": "true"]), origin: .runtime)
        // Within the microsecond the wall deadline was truncated to, and the time the request took.
        #expect((before + hour / 2 - 1_000_000...SystemClock.monotonicNow() + hour / 2).contains(registry.nextWake.nanoseconds))

        try await registry.cancel([JobName("wall")])
        #expect((before + hour - 1_000_000_000...SystemClock.monotonicNow() + hour).contains(registry.nextWake.nanoseconds))
        try await registry.cancel([JobName("mono")])
        #expect(registry.nextWake.nanoseconds == .max)
    }

    /// The status line's next fire is the earlier of the two clocks' first deadlines (a wall deadline
    /// against a monotonic one), never a paused job's, and nothing once nothing is armed.
    @Test func theStatusLineNamesTheJobWhoseTimerGoesOffFirst() async throws {
        #expect(await registry.statusLine() == "0 jobs, 0 running, nothing scheduled")
        try await registry.add(spec("mono", ["in": "1h", "command": "true"]), origin: .runtime)
        #expect(await registry.statusLine().hasPrefix("1 job, 0 running, next: mono at "))

        let wall = RFC3339.truncatedToMicroseconds(clock.wallNow + .seconds(1_800))
        try await registry.add(spec("wall", ["at": RFC3339.format(wall), "command": "true"]), origin: .runtime)
        let expected = SystemClock.localTimeOfDay(wall.nanosecondsSinceEpoch / 1_000_000_000)
        #expect(await registry.statusLine() == "2 jobs, 0 running, next: wall at \(expected)")

        try await registry.add(spec("first", ["in": "10m", "command": "true"]), origin: .runtime)
        #expect(await registry.statusLine().hasPrefix("3 jobs, 0 running, next: first at "))
        try await registry.pause([JobName("first")])
        #expect(await registry.statusLine() == "3 jobs, 0 running, next: wall at \(expected)")
        try await registry.pause([JobName("wall"), JobName("mono")])
        #expect(await registry.statusLine() == "3 jobs, 0 running, nothing scheduled")
    }
}

extension Registry {
    /// Declares `specs` as the config, then `later` (if given), in one step of the registry: the
    /// deadlines count from one now, and nothing fires in between, however slow the machine.
    func declare(_ specs: [JobSpec], then later: [JobSpec]? = nil) {
        func declared(_ specs: [JobSpec]) -> [DeclaredJob] { specs.map { DeclaredJob(spec: $0, file: "test.conf", line: 1, civil: nil) } }
        deliver(.reload(declared(specs), maxRunning: 10))
        if let later { deliver(.reload(declared(later), maxRunning: 10)) }
    }
}
