/// A wall-clock schedule in a time zone: a cron expression or a systemd calendar spec, and the rules for
/// local times that DST changes skip or repeat. Answers "when is the next fire after this instant".
///
/// Two mechanisms, one per peer:
/// - A calendar spec with neither `dst_gap` nor `dst_repeat` set follows systemd exactly (`CalendarSpec`'s
///   port of its arithmetic, quirks included).
/// - Everything else lists matching local times in order and maps each to the instants it names under the
///   DST rules: a cron expression defaults to cron(8)'s rules, a calendar spec to systemd's (skip, first).
public struct CivilSchedule: Equatable, Sendable {
    public enum Pattern: Equatable, Sendable {
        case cron(CronExpression)
        case calendar(CalendarSpec)
    }

    public let pattern: Pattern
    public let zone: ZoneRules
    /// What the job asked for; nil means the default for its kind.
    public let gapRule: DSTGap?
    public let repeatRule: DSTRepeat?

    public init(pattern: Pattern, zone: ZoneRules, gap: DSTGap? = nil, repeat repeatRule: DSTRepeat? = nil) {
        self.pattern = pattern
        self.zone = zone
        self.gapRule = gap
        self.repeatRule = repeatRule
    }

    /// The rule in force for skipped local times.
    public var gap: DSTGap {
        if let gapRule { return gapRule }
        switch pattern {
        case .cron(let expression): return expression.hasFixedTime ? .shift : .skip
        case .calendar: return .skip
        }
    }

    /// The rule in force for repeated local times.
    public var repeated: DSTRepeat {
        if let repeatRule { return repeatRule }
        switch pattern {
        case .cron(let expression): return expression.hasFixedTime ? .first : .both
        case .calendar: return .first
        }
    }

    /// True when the schedule is computed by systemd's own algorithm (a calendar spec, no DST keys).
    public var followsSystemd: Bool {
        if case .calendar = pattern { return gapRule == nil && repeatRule == nil }
        return false
    }

    /// The first fire strictly after `time`, or nil when there is none (an impossible date, `@reboot`).
    public func next(after time: WallTime) -> WallTime? {
        let afterMicros = floorDiv(time.nanosecondsSinceEpoch, 1000)
        let next: Int64?
        if followsSystemd, case .calendar(let spec) = pattern {
            next = spec.next(after: afterMicros, in: zone)
        } else {
            next = nextByRules(after: afterMicros)
        }
        // WallTime counts nanoseconds in an Int64: times past April 2262 do not exist for timerd.
        guard let next, next <= RFC3339.latest.nanosecondsSinceEpoch / 1000 else { return nil }
        return WallTime(nanosecondsSinceEpoch: next * 1000)
    }

    /// The next `count` fires after `time`, fewer when the schedule ends.
    public func upcoming(after time: WallTime, count: Int) -> [WallTime] {
        var result: [WallTime] = []
        var cursor = time
        while result.count < count, let next = next(after: cursor) {
            result.append(next)
            cursor = next
        }
        return result
    }

    // MARK: - Matching local times → instants

    /// The first matching local time strictly after `localMicros` (µs of civil time), or nil.
    func nextLocal(after localMicros: Int64) -> Int64? {
        switch pattern {
        case .cron(let expression):
            return expression.next(after: floorDiv(localMicros, 1_000_000)).map { $0 * 1_000_000 }
        case .calendar(let spec):
            // Civil arithmetic is calendar arithmetic in UTC.
            return spec.next(after: localMicros, in: ZoneRules.utc)
        }
    }

    /// The instants (µs) a local time names under the job's DST rules, ascending.
    func instants(ofLocal localMicros: Int64) -> [Int64] {
        let seconds = floorDiv(localMicros, 1_000_000)
        let fraction = localMicros - seconds * 1_000_000
        switch zone.instants(ofLocal: seconds) {
        case .unique(let instant):
            return [instant * 1_000_000 + fraction]
        case .repeated(let first, let second):
            switch repeated {
            case .first: return [first * 1_000_000 + fraction]
            case .last: return [second * 1_000_000 + fraction]
            case .both: return [first * 1_000_000 + fraction, second * 1_000_000 + fraction]
            }
        case .skipped(let transition):
            return gap == .shift ? [transition * 1_000_000] : []
        }
    }

    private func nextByRules(after afterMicros: Int64) -> Int64? {
        let afterSeconds = floorDiv(afterMicros, 1_000_000)
        let offset = Int64(zone.utcOffset(at: afterSeconds))
        let local = afterMicros + offset * 1_000_000

        // Local times after now's local time: the first one that names an instant after now. Local time
        // only runs backwards at a fall-back, which the second search below covers.
        var best: Int64?
        var cursor = local
        while let candidate = nextLocal(after: cursor) {
            if let instant = instants(ofLocal: candidate).first(where: { $0 > afterMicros }) {
                best = instant
                break
            }
            cursor = candidate
        }

        // Inside the first pass of a repeated hour, local times at or before now's come round again:
        // under `last` or `both` their second occurrences are still ahead.
        if repeated != .first, case .repeated(let first, let second) = zone.instants(ofLocal: floorDiv(local, 1_000_000)),
           afterSeconds == first {
            let later = Int64(zone.utcOffset(at: second))
            // The change is the first instant with the later offset.
            var low = first
            var high = second
            while high - low > 1 {
                let mid = low + (high - low) / 2
                if Int64(zone.utcOffset(at: mid)) == later { high = mid } else { low = mid }
            }
            let repeatStart = (high + later) * 1_000_000
            if let candidate = nextLocal(after: repeatStart - 1), candidate <= local,
               let instant = instants(ofLocal: candidate).last, instant > afterMicros {
                best = min(best ?? instant, instant)
            }
        }
        return best
    }
}

extension RFC3339 {
    /// Formats `time` as local time with its UTC offset, e.g. `2026-03-29T03:00:00+02:00`; microseconds
    /// appear only when there are any.
    public static func format(_ time: WallTime, in zone: ZoneRules) -> String {
        let seconds = floorDiv(time.nanosecondsSinceEpoch, 1_000_000_000)
        let micros = (time.nanosecondsSinceEpoch - seconds * 1_000_000_000) / 1000
        let local = zone.localTime(seconds)
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        var text = "\(pad(local.fullYear, 4))-\(pad(local.month + 1, 2))-\(pad(local.day, 2))T"
            + "\(pad(local.hour, 2)):\(pad(local.minute, 2)):\(pad(local.second, 2))"
        if micros != 0 { text += ".\(pad(Int(micros), 6))" }
        let offset = local.utcOffset
        let magnitude = abs(offset)
        text += "\(offset < 0 ? "-" : "+")\(pad(magnitude / 3600, 2)):\(pad(magnitude / 60 % 60, 2))"
        if magnitude % 60 != 0 { text += ":\(pad(magnitude % 60, 2))" }
        return text
    }
}
