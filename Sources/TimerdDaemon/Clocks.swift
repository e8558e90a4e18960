import Dispatch
import Synchronization
import TimerdCore
import TimerdSystem

/// The host's clocks: the monotonic one as Dispatch counts it (`DispatchTime.uptimeNanoseconds`, so
/// deadlines computed from it and timers armed with them agree) and `CLOCK_REALTIME`.
struct HostClock: Clock {
    func now() -> Instant {
        Instant(mono: MonoInstant(nanosecondsSinceBoot: DispatchTime.now().uptimeNanoseconds), wall: Self.wall())
    }

    static func wall() -> WallTime {
        let now = SystemClock.wallClockNow()
        return WallTime(seconds: now.seconds, nanoseconds: Int64(now.nanoseconds))
    }
}

/// The test clock (failpoint `test-clock`, docs/schedules.md): the host's clocks with the wall clock
/// moved to a time a test chooses, as `settimeofday` would move it, without touching the machine's.
/// One instance, given to every part of the daemon like any other clock.
final class SteppedClock: Clock {
    private let offset = Atomic<Int64>(0)
    private let host = HostClock()

    func now() -> Instant {
        var now = host.now()
        now.wall = now.wall + .nanoseconds(offset.load(ordering: .relaxed))
        return now
    }

    /// Sets the wall clock to `time` from now on.
    func setWall(to time: WallTime) {
        offset.store((time - HostClock.wall()).nanoseconds, ordering: .relaxed)
    }
}
