import Dispatch
import TimerdCore
import TimerdSystem

extension SystemClock {
    /// Now on the wall clock (CLOCK_REALTIME).
    static func wallNow() -> WallTime {
        let now = wallClockNow()
        return WallTime(seconds: now.seconds, nanoseconds: Int64(now.nanoseconds))
    }

    /// Now on the clock Dispatch deadlines use (`DispatchTime.uptimeNanoseconds`), so deadlines computed
    /// here and timers armed with them agree.
    static func monoNow() -> UInt64 {
        DispatchTime.now().uptimeNanoseconds
    }
}
