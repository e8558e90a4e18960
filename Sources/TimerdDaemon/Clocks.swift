import Dispatch
import Synchronization
import TimerdCore
import TimerdSystem

extension SystemClock {
    /// Now on the wall clock (CLOCK_REALTIME), plus the test clock's offset (always 0 in production).
    static func wallNow() -> WallTime {
        let now = wallClockNow()
        return WallTime(seconds: now.seconds, nanoseconds: Int64(now.nanoseconds) + testOffset.load(ordering: .relaxed))
    }

    /// Nanoseconds added to the real wall clock. Only the `test-clock` failpoint sets it, so tests can put
    /// the daemon just before a DST change or step its clock without touching the machine's.
    static let testOffset = Atomic<Int64>(0)

    /// Sets the daemon's wall clock to `time` (test clock only).
    static func setTestWallClock(to time: WallTime) {
        let now = wallClockNow()
        let real = WallTime(seconds: now.seconds, nanoseconds: Int64(now.nanoseconds))
        testOffset.store((time - real).nanoseconds, ordering: .relaxed)
    }

    /// Now on the clock Dispatch deadlines use (`DispatchTime.uptimeNanoseconds`), so deadlines computed
    /// here and timers armed with them agree.
    static func monoNow() -> UInt64 {
        DispatchTime.now().uptimeNanoseconds
    }
}
