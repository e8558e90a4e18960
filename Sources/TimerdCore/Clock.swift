import Synchronization

/// An instant on the monotonic clock: nanoseconds since boot (`CLOCK_MONOTONIC`, which is what
/// `DispatchTime.uptimeNanoseconds` counts on Linux). It decides *when* interval timers fire and never
/// mixes with wall time; the two meet only in `Instant.wall(of:)` and `Instant.mono(of:)`.
///
/// Arithmetic saturates at both ends instead of wrapping: an instant before boot is boot, and a span too
/// long to represent ends at the far future.
public struct MonoInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since boot. Read it only to hand the instant to the OS (a Dispatch deadline) or to
    /// store it; compute with the operators.
    public let nanosecondsSinceBoot: UInt64

    public init(nanosecondsSinceBoot: UInt64) { self.nanosecondsSinceBoot = nanosecondsSinceBoot }

    /// Boot: the earliest instant.
    public static let zero = MonoInstant(nanosecondsSinceBoot: 0)

    public static func < (lhs: MonoInstant, rhs: MonoInstant) -> Bool {
        lhs.nanosecondsSinceBoot < rhs.nanosecondsSinceBoot
    }

    /// `lhs` moved by `rhs` (negative spans move it back), clamped to the representable range.
    public static func + (lhs: MonoInstant, rhs: Duration) -> MonoInstant {
        let delta = rhs.nanoseconds
        if delta >= 0 {
            let (sum, overflow) = lhs.nanosecondsSinceBoot.addingReportingOverflow(UInt64(delta))
            return MonoInstant(nanosecondsSinceBoot: overflow ? .max : sum)
        }
        let back = delta.magnitude
        return MonoInstant(nanosecondsSinceBoot: lhs.nanosecondsSinceBoot > back ? lhs.nanosecondsSinceBoot - back : 0)
    }

    public static func - (lhs: MonoInstant, rhs: Duration) -> MonoInstant { lhs + (.zero - rhs) }

    /// The span from `rhs` to `lhs` (negative when `lhs` is earlier), clamped to `Int64` nanoseconds.
    public static func - (lhs: MonoInstant, rhs: MonoInstant) -> Duration {
        if lhs >= rhs {
            let span = lhs.nanosecondsSinceBoot - rhs.nanosecondsSinceBoot
            return .nanoseconds(Int64(clamping: span))
        }
        let span = rhs.nanosecondsSinceBoot - lhs.nanosecondsSinceBoot
        return .nanoseconds(-Int64(clamping: span))
    }

    public static func += (lhs: inout MonoInstant, rhs: Duration) { lhs = lhs + rhs }

    public var description: String { "mono \(nanosecondsSinceBoot)ns" }
}

/// One moment read off both clocks: the monotonic instant and the wall-clock time.
///
/// Conversions between the clocks happen here and nowhere else. They assume the wall clock runs at the
/// monotonic clock's pace from this moment on, which holds until the wall clock is set (the daemon
/// learns of that as an input and converts again).
public struct Instant: Equatable, Sendable {
    public var mono: MonoInstant
    public var wall: WallTime

    public init(mono: MonoInstant, wall: WallTime) {
        self.mono = mono
        self.wall = wall
    }

    /// The wall-clock time of a monotonic instant (for display and `TIMERD_SCHEDULED_AT`).
    public func wall(of instant: MonoInstant) -> WallTime { wall + (instant - mono) }

    /// The monotonic instant at which the wall clock will read `time` (past times give past instants).
    public func mono(of time: WallTime) -> MonoInstant { mono + (time - wall) }

    /// This moment `span` later on both clocks.
    public static func + (lhs: Instant, rhs: Duration) -> Instant {
        Instant(mono: lhs.mono + rhs, wall: lhs.wall + rhs)
    }
}

/// Where "now" comes from (it shadows the standard library's `Clock` in timerd's modules): the host's clocks in the daemon, a `ManualClock` in tests, virtual time in
/// `timerctl simulate`. Everything that needs the time is given a clock; nothing reads the OS clocks
/// directly (except the clock that wraps them).
public protocol Clock: Sendable {
    /// Both clocks, read together.
    func now() -> Instant
}

extension Clock {
    public var monotonicNow: MonoInstant { now().mono }
    public var wallNow: WallTime { now().wall }
}

/// A clock that moves only when told: tests advance it, or set its wall clock as `settimeofday` would.
/// Safe to share between threads (each clock reads atomically; a reader may see one clock moved before
/// the other while a test moves both).
public final class ManualClock: Clock {
    private let mono: Atomic<UInt64>
    private let wall: Atomic<Int64>

    public init(_ start: Instant) {
        mono = Atomic(start.mono.nanosecondsSinceBoot)
        wall = Atomic(start.wall.nanosecondsSinceEpoch)
    }

    /// Starts at `wall` on the wall clock and one hour after boot on the monotonic clock.
    public convenience init(wall: WallTime) {
        self.init(Instant(mono: MonoInstant(nanosecondsSinceBoot: 3_600_000_000_000), wall: wall))
    }

    public func now() -> Instant {
        Instant(mono: MonoInstant(nanosecondsSinceBoot: mono.load(ordering: .acquiring)),
                wall: WallTime(nanosecondsSinceEpoch: wall.load(ordering: .acquiring)))
    }

    /// Both clocks move on by `span` (time passes).
    public func advance(by span: Duration) {
        mono.store((MonoInstant(nanosecondsSinceBoot: mono.load(ordering: .acquiring)) + span).nanosecondsSinceBoot, ordering: .releasing)
        wall.add(span.nanoseconds, ordering: .releasing)
    }

    /// The wall clock jumps to `time`; the monotonic clock does not move (a clock step).
    public func setWall(_ time: WallTime) {
        wall.store(time.nanosecondsSinceEpoch, ordering: .releasing)
    }
}
