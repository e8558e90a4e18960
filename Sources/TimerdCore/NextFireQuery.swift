/// `NEXT` / `timerctl next`: the next fire times of a schedule, like `systemd-analyze calendar
/// --iterations=N`. One implementation for the daemon's verb and `timerctl`, which computes locally.
public struct NextFireQuery: Equatable, Sendable {
    /// Option keys the query takes.
    public static let keys = ["cron", "calendar", "every", "count", "timezone", "from", "dst_gap", "dst_repeat"]
    public static let defaultCount = 5
    public static let maximumCount = 10_000

    public enum Kind: Equatable, Sendable {
        case civil(Schedule)
        case every(Duration)
    }

    public var kind: Kind
    public var count: Int
    public var timezone: String?
    /// Count from this instant (default: now).
    public var from: WallTime?
    public var dstGap: DSTGap?
    public var dstRepeat: DSTRepeat?

    /// Parses `key=value` options. Throws `bad-argument` naming the bad key, or `missing-argument`.
    public init(options: [KeyValue]) throws(TimerdError) {
        var single: [String: String] = [:]
        for option in options {
            guard Self.keys.contains(option.key) else {
                throw TimerdError(.badArgument, "unknown key \"\(option.key)\" (NEXT takes \(Self.keys.joined(separator: ", ")))", key: option.key)
            }
            guard single[option.key] == nil else {
                throw TimerdError(.badArgument, "\(option.key) is given more than once", key: option.key)
            }
            single[option.key] = option.value
        }
        let given = ["cron", "calendar", "every"].filter { single[$0] != nil }
        guard given.count == 1 else {
            if given.isEmpty { throw TimerdError(.missingArgument, "give a schedule: cron=EXPR, calendar=SPEC or every=DUR") }
            throw TimerdError(.badArgument, "give only one of cron, calendar and every (got \(given.joined(separator: ", ")))", key: given[1])
        }
        // The schedule and its DST keys are checked exactly as a job's are.
        var specOptions = [KeyValue(given[0], single[given[0]]!), KeyValue("command", "true")]
        for key in ["timezone", "dst_gap", "dst_repeat"] where single[key] != nil && given[0] != "every" {
            specOptions.append(KeyValue(key, single[key]!))
        }
        if given[0] == "every", let key = ["dst_gap", "dst_repeat"].first(where: { single[$0] != nil }) {
            throw TimerdError(.badArgument, "\(key) applies only to cron= and calendar=", key: key)
        }
        let spec = try JobSpec(name: try JobName("next"), options: specOptions)
        switch spec.schedule {
        case .every(let interval, _):
            kind = .every(interval)
            if let name = single["timezone"] { try TimeZoneDatabase.validate(name) }
            timezone = single["timezone"]
        case .cron(let expression) where expression.isReboot:
            throw TimerdError(.badArgument, "@reboot has no fire times: it runs once when timerd starts", key: "cron")
        default:
            kind = .civil(spec.schedule)
            timezone = spec.timezone
        }
        dstGap = spec.dstGap
        dstRepeat = spec.dstRepeat
        count = Self.defaultCount
        if let text = single["count"] {
            guard text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text), (1...Self.maximumCount).contains(value) else {
                throw TimerdError(.badArgument, "count: expected a whole number from 1 to \(Self.maximumCount), got \"\(text)\"", key: "count")
            }
            count = value
        }
        if let text = single["from"] {
            do { from = try RFC3339.parse(text) } catch { throw TimerdError(.badArgument, "from: \(error.message)", key: "from") }
        }
    }

    /// The fire times strictly after `from` (or `now`), in `zone` (the query's zone, looked up by the
    /// caller, or the system zone). Throws `bad-argument` when there is none at all.
    public func times(now: WallTime, zone: ZoneRules) throws(TimerdError) -> [WallTime] {
        let start = from ?? now
        switch kind {
        case .every(let interval):
            var times: [WallTime] = []
            for index in 1...Int64(count) {
                let (step, overflow1) = interval.nanoseconds.multipliedReportingOverflow(by: index)
                let (sum, overflow2) = start.nanosecondsSinceEpoch.addingReportingOverflow(step)
                guard !overflow1, !overflow2, sum <= RFC3339.latest.nanosecondsSinceEpoch else { break }
                times.append(WallTime(nanosecondsSinceEpoch: sum))
            }
            guard !times.isEmpty else {
                throw TimerdError(.badArgument, "every \(DurationText.format(interval)) has no fire time before the year 2262", key: "every")
            }
            return times
        case .civil(let schedule):
            let pattern: CivilSchedule.Pattern
            switch schedule {
            case .cron(let expression): pattern = .cron(expression)
            case .calendar(let spec): pattern = .calendar(spec)
            default: preconditionFailure("a civil query holds a cron or calendar schedule")
            }
            let civil = CivilSchedule(pattern: pattern, zone: zone, gap: dstGap, repeat: dstRepeat)
            let times = civil.upcoming(after: start, count: count)
            guard !times.isEmpty else {
                throw TimerdError(
                    .badArgument,
                    "\(schedule.summary) has no fire time after \(RFC3339.format(RFC3339.truncatedToSeconds(start), in: zone))",
                    key: schedule.key)
            }
            return times
        }
    }
}
