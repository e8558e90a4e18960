/// When a job fires. Intervals and delays are monotonic spans; `at`, `cron` and `calendar` are wall-clock
/// schedules, computed in the job's time zone (see `CivilSchedule`).
public enum Schedule: Equatable, Sendable {
    /// Repeats every `interval`; the first fire comes after `start` (default: one interval).
    case every(interval: Duration, start: Duration?)
    /// Fires once, `delay` after the job is added (`in=`).
    case after(delay: Duration)
    /// Fires once at a wall-clock instant (`at=`).
    case at(WallTime)
    /// A crontab expression (`cron=`); `@reboot` fires once when the daemon starts. Indirect (like
    /// `calendar`): the parsed forms are large, and every job's spec holds a `Schedule` inline.
    indirect case cron(CronExpression)
    /// A systemd calendar event (`calendar=`).
    indirect case calendar(CalendarSpec)

    public var repeats: Bool {
        switch self {
        case .every, .calendar: return true
        case .cron(let expression): return !expression.isReboot
        case .after, .at: return false
        }
    }

    /// The option key that sets this schedule.
    public var key: String {
        switch self {
        case .every: return "every"
        case .after: return "in"
        case .at: return "at"
        case .cron: return "cron"
        case .calendar: return "calendar"
        }
    }

    /// True for schedules computed on the wall clock in a time zone (cron and calendar).
    public var isCivil: Bool {
        switch self {
        case .cron, .calendar: return true
        default: return false
        }
    }

    /// Human-readable form used by `list` and `show`, e.g. `every 5s`, `every 1m (start 10s)`, `in 30s`.
    public var summary: String {
        switch self {
        case .every(let interval, let start):
            let base = "every \(DurationText.format(interval))"
            return start.map { "\(base) (start \(DurationText.format($0)))" } ?? base
        case .after(let delay):
            return "in \(DurationText.format(delay))"
        case .at(let time):
            return "at \(RFC3339.format(time))"
        case .cron(let expression):
            return "cron \(expression.text)"
        case .calendar(let spec):
            return "calendar \(spec.normalized)"
        }
    }
}

/// The fire instants of a repeating schedule on the monotonic clock: `first + k·interval`.
///
/// Keeping the grid (instead of "last fire + interval") keeps a job's phase: a late fire does not push
/// every later one back, and a resumed job stays on its original beat.
public struct FireGrid: Equatable, Sendable {
    /// Monotonic nanoseconds of fire number 0.
    public var first: UInt64
    public var interval: UInt64

    public init(first: UInt64, interval: Duration) {
        self.first = first
        self.interval = UInt64(max(1, interval.nanoseconds))
    }

    public func instant(_ index: UInt64) -> UInt64 { first &+ index &* interval }

    /// The index of the first grid point strictly after `time` (0 if `time` is before the first one).
    public func index(after time: UInt64) -> UInt64 {
        guard time >= first else { return 0 }
        return (time - first) / interval + 1
    }

    /// The index of the last grid point at or before `time`, or nil when `time` is before the first one.
    public func index(atOrBefore time: UInt64) -> UInt64? {
        guard time >= first else { return nil }
        return (time - first) / interval
    }
}
