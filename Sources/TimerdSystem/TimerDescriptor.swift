import CTimerdSys
import Glibc

/// A one-shot timer kept by the kernel (`timerfd`): its descriptor turns readable when the instant it is
/// set for has come, so an `IOWatcher` registration is its handler. For the registry's wake per clock:
/// a Dispatch timer costs two thread wake-ups a fire (libdispatch's manager thread, which owns every
/// Dispatch timer, then a worker for the handler) and one more each time it is set again from its own
/// handler; this costs the watcher's one.
public struct TimerDescriptor: Sendable {
    public enum Clock: Sendable {
        /// `CLOCK_MONOTONIC`, the clock of `DispatchTime.uptimeNanoseconds`.
        case monotonic
        /// `CLOCK_REALTIME`: follows the wall clock when it is set, and counts a suspend.
        case realtime
    }

    public let fd: FileDescriptor

    /// The corresponding C function is `timerfd_create` (`TFD_CLOEXEC | TFD_NONBLOCK`).
    public init(clock: Clock) throws(Errno) {
        let fd = tsys_timer_fd(clock == .realtime ? 1 : 0)
        guard fd >= 0 else { throw Errno.current }
        self.fd = FileDescriptor(rawValue: fd)
    }

    /// Sets it to go off at `nanoseconds` on its clock (at once for an instant already past), replacing
    /// any earlier setting; an expiry not yet read is forgotten.
    ///
    /// The corresponding C function is `timerfd_settime` (`TFD_TIMER_ABSTIME`).
    public func set(at nanoseconds: Int64) throws(Errno) {
        guard tsys_timer_fd_set(fd.rawValue, max(0, nanoseconds)) == 0 else { throw Errno.current }
    }

    /// Sets it to never go off.
    public func disarm() throws(Errno) {
        guard tsys_timer_fd_set(fd.rawValue, -1) == 0 else { throw Errno.current }
    }

    /// After the descriptor turned readable: whether it went off since it was last set (false when it was
    /// set again meanwhile). Makes it unreadable again.
    ///
    /// The corresponding C function is `read`.
    public func acknowledge() throws(Errno) -> Bool {
        let result = tsys_timer_fd_drain(fd.rawValue)
        guard result >= 0 else { throw Errno.current }
        return result == 1
    }
}
