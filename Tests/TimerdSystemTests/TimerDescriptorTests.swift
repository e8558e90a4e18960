import Glibc
import Testing
import TimerdSystem

@Suite struct TimerDescriptorTests {
    /// Whether `timer` turns readable within `milliseconds`.
    func readable(_ timer: TimerDescriptor, within milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: timer.fd.rawValue, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, milliseconds) == 1 && entry.revents & Int16(POLLIN) != 0
    }

    func monotonicNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    @Test func goesOffAtTheInstantItIsSetForAndNeverBefore() throws {
        let timer = try TimerDescriptor(clock: .monotonic)
        defer { try? timer.fd.close() }
        #expect(!readable(timer, within: 0))
        let at = monotonicNow() + 50_000_000
        try timer.set(at: at)
        #expect(readable(timer, within: 10_000))
        #expect(monotonicNow() >= at)
        #expect(try timer.acknowledge())
        // Read: not readable again until it is set again.
        #expect(!readable(timer, within: 0))
        #expect(try timer.acknowledge() == false)
    }

    @Test func anInstantAlreadyPastGoesOffAtOnceAndZeroIsAnInstantNotNever() throws {
        let timer = try TimerDescriptor(clock: .monotonic)
        defer { try? timer.fd.close() }
        try timer.set(at: 0)
        #expect(readable(timer, within: 10_000))
        #expect(try timer.acknowledge())
        try timer.set(at: monotonicNow() - 1_000_000_000)
        #expect(readable(timer, within: 10_000))
    }

    @Test func settingAgainOrDisarmingForgetsAnExpiryNotRead() throws {
        let timer = try TimerDescriptor(clock: .monotonic)
        defer { try? timer.fd.close() }
        try timer.set(at: 0)
        #expect(readable(timer, within: 10_000))
        // Moved to the far future before its expiry was read: what the registry sees when it set the
        // timer again between the expiry and its handler.
        try timer.set(at: monotonicNow() + 3_600_000_000_000)
        #expect(!readable(timer, within: 0))
        #expect(try timer.acknowledge() == false)
        try timer.set(at: 0)
        try timer.disarm()
        #expect(!readable(timer, within: 100))
    }

    @Test func aRealtimeTimerTakesWallClockInstants() throws {
        let timer = try TimerDescriptor(clock: .realtime)
        defer { try? timer.fd.close() }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let wall = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        // An hour from now on the wall clock: a monotonic reading would be taken as long past.
        try timer.set(at: wall + 3_600_000_000_000)
        #expect(!readable(timer, within: 100))
        try timer.set(at: wall + 20_000_000)
        #expect(readable(timer, within: 10_000))
        #expect(try timer.acknowledge())
    }
}
