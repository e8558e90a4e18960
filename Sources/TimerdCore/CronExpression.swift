/// A crontab(5) schedule in Vixie cron / cronie syntax: five fields (minute hour day-of-month month
/// day-of-week), or six with a leading seconds field, or one of the `@` macros.
///
/// Times are *local civil* times encoded as seconds since 1970-01-01T00:00:00 of the same calendar, as if
/// the local time were UTC ("localSeconds"). No time zone is involved here: the caller maps local times to
/// instants, and uses `hasFixedTime` to apply cron(8)'s daylight-saving rules.
///
/// Field syntax: `*`, numbers, ranges `a-b`, steps `*/n`, `a-b/n` and `a/n` (meaning `a-max/n`, where max
/// is the field's largest value, so 7 in day-of-week: `1/2` there is Monday, Wednesday, Friday, Sunday),
/// lists of these separated by commas (a `*` item may stand anywhere in a list, as in cron), month names `jan`–`dec` and weekday names `sun`–`sat` (any case, also in
/// ranges such as `mon-fri`), and day-of-week 0–7 where both 0 and 7 are Sunday. When both day fields are
/// restricted (neither starts with `*`), a day matching either one fires; when one of them starts with `*`
/// (including `*/n`), a day must match both. That is Vixie cron's DOM_STAR/DOW_STAR rule.
public struct CronExpression: Equatable, Sendable {
    /// The expression as given.
    public let text: String

    // One bit per allowed value.
    let secondBits: UInt64
    let minuteBits: UInt64
    let hourBits: UInt64
    /// Bits 1–31.
    let dayOfMonthBits: UInt64
    /// Bits 1–12.
    let monthBits: UInt64
    /// Bits 0–6, Sunday = 0 (a 7 in the text is folded into bit 0).
    let dayOfWeekBits: UInt64
    /// Both day fields are restricted: a day matching either fires (Vixie's rule); otherwise both must match.
    let eitherDay: Bool
    let reboot: Bool
    let fixedTime: Bool

    /// `@reboot`: the expression names no calendar times at all (`matches` is always false, `next` nil).
    public var isReboot: Bool { reboot }

    /// cron(8)'s distinction for daylight-saving changes: true when neither the minute nor the hour field
    /// starts with `*` (a "fixed-time" job, run once when its time is skipped or repeated); false for
    /// wildcard jobs such as `*/10 * * * *` or `@hourly`. `@daily`, `@weekly`, `@monthly`, `@yearly` are
    /// fixed-time. The seconds field does not count. False for `@reboot`, which has no times.
    public var hasFixedTime: Bool { fixedTime }

    /// The macros and what they stand for. `@hourly` is `0 * * * *`, so it is not fixed-time.
    static let macros: [(name: String, fields: String)] = [
        ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"), ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ]

    /// Parses 5-field crontab syntax, 6 fields with a leading seconds field, or one of `@hourly`, `@daily`,
    /// `@midnight`, `@weekly`, `@monthly`, `@yearly`, `@annually`, `@reboot` (lowercase, as cron spells
    /// them). Throws `bad-argument` (key `cron`) naming the offending field.
    public static func parse(_ text: String) throws(TimerdError) -> CronExpression {
        let words = CronSyntax.split(text)
        func fail(_ why: String) -> TimerdError {
            TimerdError(.badArgument, "invalid cron expression \"\(text)\": \(why)", key: "cron")
        }
        if let first = words.first, first.hasPrefix("@") {
            guard words.count == 1 else {
                throw fail("\(first) stands alone, but \(words.count - 1) more field(s) follow it")
            }
            if first == "@reboot" {
                return CronExpression(text: text, seconds: 0, minutes: 0, hours: 0, daysOfMonth: 0, months: 0,
                                      daysOfWeek: 0, eitherDay: false, reboot: true, fixedTime: false)
            }
            guard let macro = macros.first(where: { $0.name == first }) else {
                throw fail("unknown macro \"\(first)\" (expected @reboot, @yearly, @annually, @monthly, @weekly, "
                    + "@daily, @midnight or @hourly)")
            }
            return try parseFields(text: text, words: CronSyntax.split(macro.fields), fail: fail)
        }
        guard words.count == 5 || words.count == 6 else {
            throw fail("expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, "
                + "got \(words.count)")
        }
        return try parseFields(text: text, words: words, fail: fail)
    }

    private static func parseFields(
        text: String, words: [Substring], fail: (String) -> TimerdError
    ) throws(TimerdError) -> CronExpression {
        let fields: [CronSyntax.Field] = words.count == 6
            ? [.second, .minute, .hour, .dayOfMonth, .month, .dayOfWeek]
            : [.minute, .hour, .dayOfMonth, .month, .dayOfWeek]
        var bits: [CronSyntax.Field: UInt64] = [.second: 1]
        var starts: [CronSyntax.Field: Bool] = [:]
        for (field, word) in zip(fields, words) {
            do {
                bits[field] = try CronSyntax.parseField(word, field)
            } catch {
                throw fail("\(field.name) field \"\(word)\": \(error.message)")
            }
            starts[field] = word.hasPrefix("*")
        }
        var dayOfWeek = bits[.dayOfWeek]!
        if dayOfWeek & (1 << 7) != 0 { dayOfWeek = (dayOfWeek | 1) & ~(1 << 7) }
        return CronExpression(
            text: text, seconds: bits[.second]!, minutes: bits[.minute]!, hours: bits[.hour]!,
            daysOfMonth: bits[.dayOfMonth]!, months: bits[.month]!, daysOfWeek: dayOfWeek,
            eitherDay: !starts[.dayOfMonth]! && !starts[.dayOfWeek]!, reboot: false,
            fixedTime: !starts[.minute]! && !starts[.hour]!)
    }

    init(text: String, seconds: UInt64, minutes: UInt64, hours: UInt64, daysOfMonth: UInt64, months: UInt64,
         daysOfWeek: UInt64, eitherDay: Bool, reboot: Bool, fixedTime: Bool) {
        self.text = text
        self.secondBits = seconds
        self.minuteBits = minutes
        self.hourBits = hours
        self.dayOfMonthBits = daysOfMonth
        self.monthBits = months
        self.dayOfWeekBits = daysOfWeek
        self.eitherDay = eitherDay
        self.reboot = reboot
        self.fixedTime = fixedTime
    }

    // MARK: - Matching

    /// Whether the local civil time `localSeconds` matches (second granularity; a 5-field expression
    /// matches only at second 0).
    public func matches(localSeconds: Int64) -> Bool {
        guard !reboot else { return false }
        let time = CivilTime(localSeconds)
        guard Self.has(secondBits, time.second), Self.has(minuteBits, time.minute), Self.has(hourBits, time.hour),
              Self.has(monthBits, Int(time.month)) else { return false }
        let weekday = Int(CivilTime.weekday(ofDay: time.days))
        let byMonth = Self.has(dayOfMonthBits, Int(time.day))
        let byWeek = Self.has(dayOfWeekBits, weekday)
        return eitherDay ? (byMonth || byWeek) : (byMonth && byWeek)
    }

    /// The first matching local civil time strictly after `localSeconds`, or nil when there is none up to
    /// the end of the civil year `searchYears` after the year of `localSeconds`, or for `@reboot`.
    ///
    /// The Gregorian calendar repeats every 400 years, weekdays included, so a schedule with no time in
    /// the next 400 years has none ever: nil with the default means "never" (`0 0 30 2 *`), and a larger
    /// `searchYears` searches no further. Advances field by field (month, day, hour, minute, second), so a
    /// call costs a handful of steps, and at most a few per year searched.
    public func next(after localSeconds: Int64, searchYears: Int = 400) -> Int64? {
        guard !reboot, localSeconds < Int64.max else { return nil }
        let start = CivilTime(localSeconds + 1)
        var year = start.year, month = Int(start.month), day = Int(start.day)
        var hour = start.hour, minute = start.minute, second = start.second
        let (sum, overflow) = year.addingReportingOverflow(Int64(min(max(searchYears, 0), 400)))
        let lastYear = overflow ? Int64.max : sum
        while year <= lastYear {
            guard let nextMonth = Self.nextBit(monthBits, from: month) else {
                guard year < lastYear else { return nil }
                year += 1
                (month, day, hour, minute, second) = (1, 1, 0, 0, 0)
                continue
            }
            if nextMonth != month { (month, day, hour, minute, second) = (nextMonth, 1, 0, 0, 0) }
            guard let nextDay = nextDay(year: year, month: month, from: day) else {
                (month, day, hour, minute, second) = (month + 1, 1, 0, 0, 0)
                continue
            }
            if nextDay != day { (day, hour, minute, second) = (nextDay, 0, 0, 0) }
            guard let nextHour = Self.nextBit(hourBits, from: hour) else {
                (day, hour, minute, second) = (day + 1, 0, 0, 0)
                continue
            }
            if nextHour != hour { (hour, minute, second) = (nextHour, 0, 0) }
            guard let nextMinute = Self.nextBit(minuteBits, from: minute) else {
                (hour, minute, second) = (hour + 1, 0, 0)
                continue
            }
            if nextMinute != minute { (minute, second) = (nextMinute, 0) }
            guard let nextSecond = Self.nextBit(secondBits, from: second) else {
                (minute, second) = (minute + 1, 0)
                continue
            }
            return CivilTime.encode(year: year, month: Int64(month), day: Int64(day),
                                    secondOfDay: Int64(hour * 3600 + minute * 60 + nextSecond))
        }
        return nil
    }

    /// The first day of `month` from `day` on whose date fires, by the day-of-month/day-of-week rule.
    private func nextDay(year: Int64, month: Int, from day: Int) -> Int? {
        let length = Int(RFC3339.daysInMonth(year: year, month: Int64(month)))
        guard day <= length else { return nil }
        let firstWeekday = Int(CivilTime.weekday(ofDay: RFC3339.daysFromCivil(year: year, month: Int64(month), day: 1)))
        // The month's days (bits 1–31) whose weekday is allowed: each allowed weekday repeats every 7 days.
        var byWeek: UInt64 = 0
        for first in 1...7 where Self.has(dayOfWeekBits, (firstWeekday + first - 1) % 7) {
            byWeek |= (0x1020_4081 as UInt64) << first  // bits first, first + 7, ..., first + 28
        }
        let inMonth: UInt64 = ((1 << (length + 1)) - 1) & ~1
        let candidates = (eitherDay ? (dayOfMonthBits | byWeek) : (dayOfMonthBits & byWeek)) & inMonth
        return Self.nextBit(candidates, from: day)
    }

    @inline(__always)
    static func has(_ bits: UInt64, _ value: Int) -> Bool { value >= 0 && value < 64 && bits & (1 << value) != 0 }

    /// The lowest set bit at or above `value`, or nil.
    @inline(__always)
    static func nextBit(_ bits: UInt64, from value: Int) -> Int? {
        guard value < 64 else { return nil }
        let masked = value <= 0 ? bits : bits & (~0 << UInt64(value))
        return masked == 0 ? nil : masked.trailingZeroBitCount
    }
}

extension CronExpression {
    /// A local civil time broken into calendar fields (proleptic Gregorian, floor division for negatives).
    struct CivilTime {
        var days: Int64
        var year: Int64
        var month: Int64
        var day: Int64
        var hour: Int
        var minute: Int
        var second: Int

        init(_ localSeconds: Int64) {
            var days = localSeconds / 86_400
            var secondOfDay = localSeconds % 86_400
            if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
            self.days = days
            (year, month, day) = RFC3339.civilFromDays(days)
            hour = Int(secondOfDay / 3600)
            minute = Int(secondOfDay / 60 % 60)
            second = Int(secondOfDay % 60)
        }

        /// 0 = Sunday; day 0 (1970-01-01) was a Thursday.
        static func weekday(ofDay days: Int64) -> Int64 {
            let weekday = (days + 4) % 7
            return weekday < 0 ? weekday + 7 : weekday
        }

        /// Local seconds for a civil date and second of the day, or nil when it does not fit in Int64.
        static func encode(year: Int64, month: Int64, day: Int64, secondOfDay: Int64) -> Int64? {
            // Before 1970 count from the end of the day, so a time within a day of Int64.min still fits.
            let days = RFC3339.daysFromCivil(year: year, month: month, day: day)
            let (scaled, overflow1) = (days < 0 ? days + 1 : days).multipliedReportingOverflow(by: 86_400)
            let (total, overflow2) = scaled.addingReportingOverflow(days < 0 ? secondOfDay - 86_400 : secondOfDay)
            return overflow1 || overflow2 ? nil : total
        }
    }
}

/// The field grammar: `item ("," item)*` with `item = ("*" | value ["-" value]) ["/" step]`.
enum CronSyntax {
    enum Field: Hashable {
        case second, minute, hour, dayOfMonth, month, dayOfWeek

        var name: String {
            switch self {
            case .second: "second"
            case .minute: "minute"
            case .hour: "hour"
            case .dayOfMonth: "day-of-month"
            case .month: "month"
            case .dayOfWeek: "day-of-week"
            }
        }

        /// Values accepted in the text (day-of-week 7 is Sunday again).
        var range: ClosedRange<Int> {
            switch self {
            case .second, .minute: 0...59
            case .hour: 0...23
            case .dayOfMonth: 1...31
            case .month: 1...12
            case .dayOfWeek: 0...7
            }
        }

        /// Names by value, starting at `namesStart`; empty when the field takes no names.
        var names: [String] {
            switch self {
            case .month: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
            case .dayOfWeek: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
            default: []
            }
        }

        var namesStart: Int { self == .month ? 1 : 0 }
    }

    /// Splits on spaces and tabs, dropping empty pieces (so leading, trailing and repeated blanks are fine).
    static func split(_ text: String) -> [Substring] {
        text.split(whereSeparator: { $0 == " " || $0 == "\t" })
    }

    /// The bit set of one field. The error's message says what is wrong, without naming the field.
    static func parseField(_ word: Substring, _ field: Field) throws(TimerdError) -> UInt64 {
        var bits: UInt64 = 0
        for item in word.split(separator: ",", omittingEmptySubsequences: false) {
            guard !item.isEmpty else { throw TimerdError(.badArgument, "empty list item") }
            bits |= try parseItem(Array(item.utf8), field)
        }
        return bits
    }

    private static func parseItem(_ item: [UInt8], _ field: Field) throws(TimerdError) -> UInt64 {
        let text = String(decoding: item, as: UTF8.self)
        func fail(_ why: String) -> TimerdError { TimerdError(.badArgument, why) }
        let range = field.range
        var index = 0

        /// A number or (in month and day-of-week) a name, checked against the field's range.
        func value() throws(TimerdError) -> Int {
            let start = index
            var number = 0
            while index < item.count, item[index] >= 48, item[index] <= 57 {
                number = min(number * 10 + Int(item[index] - 48), 1_000_000)
                index += 1
            }
            if index > start {
                let digits = String(decoding: item[start..<index], as: UTF8.self)
                guard range.contains(number) else {
                    throw fail("\(digits) is out of range \(range.lowerBound)-\(range.upperBound)")
                }
                return number
            }
            while index < item.count, (item[index] | 0x20) >= 97, (item[index] | 0x20) <= 122 { index += 1 }
            guard index > start else {
                let rest = String(decoding: item[start...], as: UTF8.self)
                throw fail(start < item.count ? "expected a number at \"\(rest)\" in \"\(text)\"" : "expected a number after \"\(text)\"")
            }
            let word = String(decoding: item[start..<index], as: UTF8.self)
            guard !field.names.isEmpty else { throw fail("\"\(word)\" is not a number") }
            guard let position = field.names.firstIndex(of: word.lowercased()) else {
                throw fail("unknown name \"\(word)\" (expected \(field.names.first!)-\(field.names.last!) or a number)")
            }
            return position + field.namesStart
        }

        var low: Int, high: Int
        var isRange = false
        if index < item.count, item[index] == UInt8(ascii: "*") {
            (low, high) = (range.lowerBound, range.upperBound)
            index += 1
            isRange = true
        } else {
            low = try value()
            high = low
            if index < item.count, item[index] == UInt8(ascii: "-") {
                index += 1
                high = try value()
                guard low <= high else { throw fail("range \"\(text)\" is reversed (\(low) is after \(high))") }
                isRange = true
            }
        }
        var step = 1
        if index < item.count, item[index] == UInt8(ascii: "/") {
            index += 1
            let start = index
            var number = 0
            while index < item.count, item[index] >= 48, item[index] <= 57 {
                number = min(number * 10 + Int(item[index] - 48), 1_000_000)
                index += 1
            }
            guard index > start else { throw fail("expected a step number after \"/\" in \"\(text)\"") }
            guard number > 0 else { throw fail("step 0 in \"\(text)\" (a step must be at least 1)") }
            step = min(number, 64)
            // `a/n` means `a-max/n` (an extension over Vixie cron, which only steps `*` and ranges).
            if !isRange { high = range.upperBound }
        }
        guard index == item.count else {
            let rest = String(decoding: item[index...], as: UTF8.self)
            throw fail("unexpected \"\(rest)\" in \"\(text)\"")
        }
        var bits: UInt64 = 0
        for value in stride(from: low, through: high, by: step) { bits |= 1 << value }
        return bits
    }
}
