/// A systemd calendar event (`OnCalendar=` syntax, systemd.time(7) "CALENDAR EVENTS"), with the exact
/// semantics of systemd 252: the same accepted syntax, the same normalised form, the same next elapse.
///
/// This is a Swift port of the algorithm in systemd v252's `src/shared/calendarspec.c` (parser,
/// `calendar_spec_normalize`, `calendar_spec_valid`, `calendar_spec_to_string`, `find_next`,
/// `calendar_spec_next_usec`) and of `mktime_or_timegm`/`localtime_or_gmtime_r` from
/// `src/basic/time-util.c`. The parser lives in `CalendarSpec+Parse.swift`, the next-elapse search in
/// `CalendarSpec+Next.swift`.
///
/// One systemd feature is not reproduced: a trailing abbreviation of the *local* zone (`CET`, `EDT`), which
/// systemd resolves against `tzname[]` of the process. Here such a token is reported as a zone name in
/// `timeZone` (`CET` and `EST` exist as zone files) for the caller to validate.
public struct CalendarSpec: Equatable, Sendable {
    /// The spec as given.
    public let text: String

    /// One element of a component list: a value, a range `start..stop`, a repetition `start/repeat` or
    /// `start..stop/repeat`. `stop` is -1 when there is no range end, `repeat` 0 when there is no repetition.
    /// Seconds are stored as microseconds.
    struct Component: Hashable, Sendable, Comparable {
        var start: Int
        var stop: Int
        var `repeat`: Int

        init(_ start: Int, stop: Int = -1, repeat: Int = 0) {
            self.start = start
            self.stop = stop
            self.repeat = `repeat`
        }

        static func < (lhs: Component, rhs: Component) -> Bool {
            (lhs.start, lhs.stop, lhs.repeat) < (rhs.start, rhs.stop, rhs.repeat)
        }
    }

    /// Weekday bits, bit 0 = Monday … bit 6 = Sunday; -1 when any weekday matches.
    var weekdays: Int = -1
    /// An empty list means `*` (any value). Years are full years, months 1–12.
    var years: [Component] = []
    var months: [Component] = []
    var days: [Component] = []
    var hours: [Component] = []
    var minutes: [Component] = []
    /// Seconds in microseconds (never empty after parsing; `*` is `0/1s`).
    var microseconds: [Component] = []
    /// The day list counts from the end of the month (`~`).
    var endOfMonth = false
    /// The spec is evaluated in UTC (`UTC` suffix or an `@timestamp`).
    var utc = false
    /// The zone name that followed the spec, if any.
    var zoneName: String?

    static let usecPerSecond = 1_000_000
    static let minYear = 1970
    /// systemd's `MAX_YEAR`: searches give up past this year, so specs that never match end quickly.
    static let maxYear = 2199
    /// systemd's `CALENDARSPEC_COMPONENTS_MAX`: at most this many list elements after the first.
    static let maxListNesting = 240
    /// systemd's `USEC_TIMESTAMP_FORMATTABLE_MAX` on 64-bit: 9999-12-30 23:59:59 UTC.
    static let maxBaseMicroseconds: Int64 = 253_402_214_399_000_000

    init(text: String) { self.text = text }

    /// Parses a calendar spec exactly as systemd 252's `calendar_spec_from_string` does. A trailing token
    /// that looks like an IANA zone name (letters, digits, `/`, `_`, `-`, `+`, at least one letter) is taken
    /// as the zone; the caller checks that it exists.
    public static func parse(_ text: String) throws(TimerdError) -> CalendarSpec {
        var parser = CalendarSpecParser(text: text)
        return try parser.parse()
    }

    /// Exactly systemd-analyze's "Normalized form:" line, e.g. `Mon..Fri *-*-* 09:00:00`,
    /// `*-*-* *:00/15:00`, `*-01,04,07,10-01 00:00:00`, with ` UTC` or ` Europe/Berlin` appended when given.
    public var normalized: String {
        var out = ""
        if weekdays > 0 && weekdays <= 127 {
            out += Self.formatWeekdays(weekdays)
            out += " "
        }
        out += Self.formatList(years, width: 4, seconds: false)
        out += "-"
        out += Self.formatList(months, width: 2, seconds: false)
        out += endOfMonth ? "~" : "-"
        out += Self.formatList(days, width: 2, seconds: false)
        out += " "
        out += Self.formatList(hours, width: 2, seconds: false)
        out += ":"
        out += Self.formatList(minutes, width: 2, seconds: false)
        out += ":"
        out += Self.formatList(microseconds, width: 2, seconds: true)
        if utc {
            out += " UTC"
        } else if let zoneName {
            out += " " + zoneName
        }
        return out
    }

    /// The trailing time zone named in the spec (`UTC`, or an IANA name such as `Europe/Berlin`), or nil.
    /// The caller validates that a named zone exists. (For `@timestamp Zone`, systemd requires the zone to
    /// exist but computes in UTC; the zone name is returned here so that it still gets validated.)
    public var timeZone: String? {
        if let zoneName { return zoneName }
        return utc ? "UTC" : nil
    }

    // MARK: - Normalisation (calendar_spec_normalize)

    /// Two-digit years: 0–69 mean 2000–2069, 70–99 mean 1970–1999 (`fix_year`).
    static func fixYear(_ value: Int) -> Int {
        if value >= 0 && value < 70 { return value + 2000 }
        if value >= 70 && value < 100 { return value + 1900 }
        return value
    }

    /// Shortens each range to a whole number of repetitions, turns ranges that cannot repeat into single
    /// values, then sorts and removes duplicates (`normalize_chain`). Keeps each element's source text
    /// (the last one of equal elements, as systemd keeps the last) for error messages.
    static func normalizeList(_ list: [ParsedComponent]) -> [ParsedComponent] {
        var items = list.map { item -> ParsedComponent in
            var item = item
            var c = item.value
            if c.stop > c.start && c.repeat > 0 {
                c.stop -= (c.stop - c.start) % c.repeat
            }
            if (c.stop > c.start && c.repeat > 0 && c.start + c.repeat > c.stop) || c.start == c.stop {
                c.repeat = 0
                c.stop = -1
            }
            item.value = c
            return item
        }
        guard items.count > 1 else { return items }
        items.sort { $0.value < $1.value }
        var unique: [ParsedComponent] = []
        for item in items {
            if let last = unique.last, last.value == item.value {
                unique[unique.count - 1] = item
            } else {
                unique.append(item)
            }
        }
        return unique
    }

    /// `chain_valid`: values within `from...to`, and a repetition that can fire at least twice. Days
    /// counted from the month's end lose 3 from `to` per list element (systemd subtracts 3 at each step of
    /// its recursion over the sorted list): at most 28 for the first, 25 for the second, and so on.
    static func validate(_ list: [ParsedComponent], field: String, from: Int, to fullTo: Int, endOfMonth: Bool = false,
                         fail: (String) -> TimerdError) throws(TimerdError) {
        let isSeconds = field == "second"
        for (index, item) in list.enumerated() {
            let to = endOfMonth ? fullTo - 3 * (index + 1) : fullTo
            let shownTo = isSeconds ? "59" : String(to)
            let c = item.value
            let quoted = endOfMonth ? "\(field) \"~\(item.source)\"" : "\(field) \"\(item.source)\""
            let range = !endOfMonth ? "\(from)-\(shownTo)"
                : index == 0 ? "\(from)-\(to) (counted from the end of the month)"
                : "\(from)-\(to) (counted from the end of the month, 3 less for each further list element)"
            guard c.start >= from && c.start <= to else { throw fail("\(quoted) is out of range \(range)") }
            guard c.repeat <= to - from else { throw fail("repetition in \(quoted) is larger than the range \(range)") }
            if c.stop >= 0 {
                guard c.stop >= from && c.stop <= to else { throw fail("\(quoted) is out of range \(range)") }
                guard c.start + c.repeat <= c.stop else { throw fail("range \(quoted) ends before it starts") }
            } else if endOfMonth {
                guard c.start - c.repeat >= from else {
                    throw fail("repetition in \(quoted) goes past the end of the month")
                }
            } else {
                guard c.start + c.repeat <= to else {
                    throw fail("repetition in \(quoted) never fires a second time within \(range)")
                }
            }
        }
    }

    // MARK: - Formatting (calendar_spec_to_string)

    static let weekdayNames = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]

    /// Runs of three or more days print as `a..b`, pairs as `a,b` (`format_weekdays`).
    static func formatWeekdays(_ bits: Int) -> String {
        var out = ""
        var runStart = -1
        var needComma = false
        for day in 0..<7 {
            if bits & (1 << day) != 0 {
                if runStart < 0 {
                    if needComma { out += "," } else { needComma = true }
                    out += weekdayNames[day]
                    runStart = day
                }
            } else if runStart >= 0 {
                if day > runStart + 1 {
                    out += day > runStart + 2 ? ".." : ","
                    out += weekdayNames[day - 1]
                }
                runStart = -1
            }
        }
        if runStart >= 0 && 7 > runStart + 1 {
            out += 7 > runStart + 2 ? ".." : ","
            out += weekdayNames[6]
        }
        return out
    }

    /// `*` for an empty list, and for a seconds list when one element is `0/1` (every second).
    static func formatList(_ list: [Component], width: Int, seconds: Bool) -> String {
        if list.isEmpty { return "*" }
        if seconds && list.contains(where: { $0.start == 0 && $0.stop < 0 && $0.repeat == usecPerSecond }) {
            return "*"
        }
        let unit = seconds ? usecPerSecond : 1
        func padded(_ value: Int) -> String {
            let digits = String(value)
            return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
        }
        func fraction(_ value: Int) -> String {
            let digits = String(value)
            return "." + String(repeating: "0", count: max(0, 6 - digits.count)) + digits
        }
        var parts: [String] = []
        for c in list {
            var part = padded(c.start / unit)
            if c.start % unit > 0 { part += fraction(c.start % unit) }
            if c.stop > 0 { part += ".." + padded(c.stop / unit) }
            if c.stop % unit > 0 { part += fraction(c.stop % unit) }
            // A range's default step (1, or 1s for seconds) is implied and not printed.
            if c.repeat > 0 && !(c.stop > 0 && c.repeat == unit) { part += "/" + String(c.repeat / unit) }
            if c.repeat % unit > 0 { part += fraction(c.repeat % unit) }
            parts.append(part)
        }
        return parts.joined(separator: ",")
    }
}

/// A list element with the text it was parsed from, kept until validation so errors can quote it.
struct ParsedComponent: Sendable {
    var value: CalendarSpec.Component
    var source: String
}
