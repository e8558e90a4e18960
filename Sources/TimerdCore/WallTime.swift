/// A wall-clock instant: nanoseconds since the Unix epoch (UTC). Used for `at` schedules and everything
/// shown to people; interval timers use monotonic time instead and never mix with this.
public struct WallTime: Comparable, Hashable, Sendable {
    public var nanosecondsSinceEpoch: Int64

    public init(nanosecondsSinceEpoch: Int64) { self.nanosecondsSinceEpoch = nanosecondsSinceEpoch }

    public init(seconds: Int64, nanoseconds: Int64 = 0) {
        self.nanosecondsSinceEpoch = seconds * 1_000_000_000 + nanoseconds
    }

    public static func < (lhs: WallTime, rhs: WallTime) -> Bool { lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch }

    public static func + (lhs: WallTime, rhs: Duration) -> WallTime {
        WallTime(nanosecondsSinceEpoch: lhs.nanosecondsSinceEpoch + rhs.nanoseconds)
    }

    public static func - (lhs: WallTime, rhs: WallTime) -> Duration {
        .nanoseconds(lhs.nanosecondsSinceEpoch - rhs.nanosecondsSinceEpoch)
    }
}

/// RFC 3339 timestamps (`2026-11-29T16:00:00Z`, `2026-11-29T17:00:00.25+01:00`), without Foundation.
public enum RFC3339 {
    /// Parses a full RFC 3339 date-time. A zone (`Z` or `±hh:mm`) is required, so a time is never
    /// silently taken as UTC or local. `T` may be a space or lowercase, as RFC 3339 allows.
    public static func parse(_ text: String) throws(TimerdError) -> WallTime {
        let bytes = Array(text.utf8)
        var index = 0
        func fail(_ why: String) -> TimerdError {
            TimerdError(.badArgument, "invalid time \"\(text)\": \(why) (expected RFC 3339 such as 2026-11-29T16:00:00Z)")
        }
        func number(_ width: Int) throws(TimerdError) -> Int64 {
            guard index + width <= bytes.count else { throw fail("too short") }
            var value: Int64 = 0
            for _ in 0..<width {
                let byte = bytes[index]
                guard byte >= 48 && byte <= 57 else { throw fail("expected a digit at position \(index + 1)") }
                value = value * 10 + Int64(byte - 48)
                index += 1
            }
            return value
        }
        func expect(_ allowed: [UInt8]) throws(TimerdError) {
            guard index < bytes.count, allowed.contains(bytes[index]) else {
                throw fail("unexpected character at position \(index + 1)")
            }
            index += 1
        }
        let year = try number(4)
        try expect([UInt8(ascii: "-")])
        let month = try number(2)
        try expect([UInt8(ascii: "-")])
        let day = try number(2)
        try expect([UInt8(ascii: "T"), UInt8(ascii: "t"), UInt8(ascii: " ")])
        let hour = try number(2)
        try expect([UInt8(ascii: ":")])
        let minute = try number(2)
        try expect([UInt8(ascii: ":")])
        let second = try number(2)
        var nanos: Int64 = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                if digits < 9 { nanos = nanos * 10 + Int64(bytes[index] - 48) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { throw fail("missing fraction digits") }
            for _ in min(digits, 9)..<9 { nanos *= 10 }
        }
        guard index < bytes.count else { throw fail("missing time zone (add Z for UTC or an offset like +01:00)") }
        var offsetSeconds: Int64 = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            let offsetHours = try number(2)
            try expect([UInt8(ascii: ":")])
            let offsetMinutes = try number(2)
            guard offsetHours < 24, offsetMinutes < 60 else { throw fail("bad zone offset") }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        default:
            throw fail("missing time zone (add Z for UTC or an offset like +01:00)")
        }
        guard index == bytes.count else { throw fail("unexpected text after the time") }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month) else {
            throw fail("no such date")
        }
        guard hour < 24, minute < 60, second < 61 else { throw fail("no such time of day") }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offsetSeconds
        // Int64 nanoseconds since 1970 reach from 1677 to 2262: refuse what does not fit instead of trapping.
        let (scaled, overflow1) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, overflow2) = scaled.addingReportingOverflow(nanos)
        guard !overflow1, !overflow2 else { throw fail("out of range (years 1678 to 2261 are supported)") }
        return WallTime(nanosecondsSinceEpoch: total)
    }

    /// The last instant timerd schedules: 2261-12-31T23:59:59Z, months before Int64 nanoseconds end in
    /// April 2262, so schedule arithmetic on it cannot overflow.
    public static let latest = WallTime(seconds: 9_214_646_399)

    /// `time` cut to whole seconds.
    public static func truncatedToSeconds(_ time: WallTime) -> WallTime {
        WallTime(seconds: floorDiv(time.nanosecondsSinceEpoch, 1_000_000_000))
    }

    /// `time` cut to whole microseconds, the precision timerd shows and stores.
    public static func truncatedToMicroseconds(_ time: WallTime) -> WallTime {
        let ns = time.nanosecondsSinceEpoch
        var remainder = ns % 1_000
        if remainder < 0 { remainder += 1_000 }
        return WallTime(nanosecondsSinceEpoch: ns - remainder)
    }

    /// Formats `time` in UTC with microseconds, e.g. `2026-11-29T16:00:00.000000Z`.
    public static func format(_ time: WallTime) -> String {
        let ns = time.nanosecondsSinceEpoch
        var seconds = ns / 1_000_000_000
        var fraction = ns % 1_000_000_000
        if fraction < 0 { fraction += 1_000_000_000; seconds -= 1 }
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        let (year, month, day) = civilFromDays(days)
        // Digits written into a fixed buffer: this runs for every line of a log and of `simulate`.
        return String(unsafeUninitializedCapacity: 27) { buffer in
            func put(_ value: Int64, _ width: Int, at offset: Int) {
                var rest = value
                for index in stride(from: offset + width - 1, through: offset, by: -1) {
                    buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
            }
            put(year, 4, at: 0)
            buffer[4] = UInt8(ascii: "-")
            put(month, 2, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(day, 2, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(secondOfDay / 3600, 2, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(secondOfDay / 60 % 60, 2, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(secondOfDay % 60, 2, at: 17)
            buffer[19] = UInt8(ascii: ".")
            put(fraction / 1000, 6, at: 20)
            buffer[26] = UInt8(ascii: "Z")
            return 27
        }
    }

    static func isLeap(_ year: Int64) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
