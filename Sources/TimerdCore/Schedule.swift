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
    /// No schedule of its own: the job fires only when a run of its upstream ends (`after=`, with no
    /// `every`, `in`, `at`, `cron` or `calendar`).
    case triggered

    public var repeats: Bool {
        switch self {
        case .every, .calendar, .triggered: return true
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
        case .triggered: return "after"
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
        case .triggered:
            return "when triggered (after=)"
        }
    }
}
