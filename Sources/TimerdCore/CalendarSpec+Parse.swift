/// The calendar spec parser: the syntax systemd 252 accepts and nothing else, following
/// `calendar_spec_from_string`, `parse_weekdays`, `parse_date`, `parse_calendar_time`, `parse_chain`,
/// `prepend_component` and `parse_component_decimal` in systemd v252's `src/shared/calendarspec.c`,
/// then `calendar_spec_normalize` and `calendar_spec_valid`. Unlike systemd, every rejection says what is
/// wrong and where.
struct CalendarSpecParser {
    let text: String
    /// The spec without its zone suffix. Reads past the end give 0, like C's terminating NUL.
    private var bytes: [UInt8] = []
    private var pos = 0
    private var spec: CalendarSpec

    private var weekdayBits = 0
    private var years: [ParsedComponent] = []
    private var months: [ParsedComponent] = []
    private var days: [ParsedComponent] = []
    private var hours: [ParsedComponent] = []
    private var minutes: [ParsedComponent] = []
    private var seconds: [ParsedComponent] = []
    /// The spec was an `@timestamp` (its year is checked with a message about the timestamp).
    private var timestampSource: String?

    init(text: String) {
        self.text = text
        self.spec = CalendarSpec(text: text)
    }

    private static let space = UInt8(ascii: " ")
    private static let comma = UInt8(ascii: ",")
    private static let dot = UInt8(ascii: ".")
    private static let dash = UInt8(ascii: "-")
    private static let tilde = UInt8(ascii: "~")
    private static let colon = UInt8(ascii: ":")
    private static let slash = UInt8(ascii: "/")
    private static let star = UInt8(ascii: "*")

    /// The decimal digits at `t` (advancing past them) as a number, and whether it overflowed.
    func decimal(_ t: inout Int) -> (value: UInt64, overflow: Bool) {
        var value: UInt64 = 0
        var overflow = false
        while Self.isDigit(at(t)) {
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(at(t) - 48))
            if o1 || o2 { overflow = true }
            value = sum
            t += 1
        }
        return (value, overflow)
    }

    private func at(_ index: Int) -> UInt8 { index < bytes.count ? bytes[index] : 0 }

    private func fail(_ why: String) -> TimerdError {
        TimerdError(.badArgument, "invalid calendar spec \"\(text)\": \(why)", key: "calendar")
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 48 && byte <= 57 }
    private static func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= 97 && (byte | 0x20) <= 122 }
    private static func lowercased(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        bytes.map { isLetter($0) ? $0 | 0x20 : $0 }
    }

    /// The text from `index` up to the next separator, for quoting in messages.
    private func word(at index: Int, separators: [UInt8] = [space, comma, colon]) -> String {
        var end = index
        while end < bytes.count && !separators.contains(bytes[end]) { end += 1 }
        if end == index && end < bytes.count { end += 1 }
        return String(decoding: bytes[min(index, bytes.count)..<end], as: UTF8.self)
    }

    private func describe(_ byte: UInt8) -> String {
        byte == 0 ? "end of text" : "\"\(String(decoding: [byte], as: UTF8.self))\""
    }

    // MARK: - Top level

    mutating func parse() throws(TimerdError) -> CalendarSpec {
        var all = Array(text.utf8)
        guard !all.contains(0) else { throw fail("contains a NUL character") }
        // " UTC" (any case) first, then a trailing zone name after the last space.
        if all.count >= 4, Self.lowercased(all.suffix(4)) == Array(" utc".utf8) {
            spec.utc = true
            all.removeLast(4)
        } else if let lastSpace = all.lastIndex(of: Self.space), Self.looksLikeZone(all[(lastSpace + 1)...]) {
            spec.zoneName = String(decoding: all[(lastSpace + 1)...], as: UTF8.self)
            all.removeSubrange(lastSpace...)
        }
        bytes = all
        guard !bytes.isEmpty else {
            if let zone = spec.zoneName { throw fail("nothing before the time zone \"\(zone)\"") }
            throw fail("empty")
        }

        if !parseShorthand() {
            try parseWeekdays()
            if try !parseDate() {
                try parseTime()
            }
            if pos < bytes.count { throw fail("unexpected \"\(word(at: pos))\" at the end") }
        }
        return try finish()
    }

    /// A zone candidate as systemd's `timezone_is_valid` checks its name (no leading, trailing or double
    /// `/`), plus at least one letter: no zone name is all digits, and a token with letters is never a
    /// valid final date or time, so this decides exactly when systemd would look for a zone file.
    static func looksLikeZone(_ token: ArraySlice<UInt8>) -> Bool {
        guard let first = token.first, first != slash, token.last != slash, token.count < 4096 else { return false }
        var hasLetter = false
        var previousSlash = false
        for byte in token {
            let allowed = isDigit(byte) || isLetter(byte) || byte == dash || byte == slash
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "+")
            guard allowed else { return false }
            if byte == slash && previousSlash { return false }
            previousSlash = byte == slash
            if isLetter(byte) { hasLetter = true }
        }
        return hasLetter
    }

    /// `minutely`, `hourly`, `daily`, `weekly`, `monthly`, `yearly`/`annually`, `quarterly`,
    /// `semiannually` (and systemd's alternate spellings), compared without case.
    private mutating func parseShorthand() -> Bool {
        let word = String(decoding: Self.lowercased(bytes), as: UTF8.self)
        func zero() -> ParsedComponent { ParsedComponent(value: .init(0), source: "0") }
        func one(_ value: Int) -> ParsedComponent { ParsedComponent(value: .init(value), source: String(value)) }
        switch word {
        case "minutely":
            seconds = [zero()]
        case "hourly":
            minutes = [zero()]; seconds = [zero()]
        case "daily":
            hours = [zero()]; minutes = [zero()]; seconds = [zero()]
        case "monthly":
            days = [one(1)]; hours = [zero()]; minutes = [zero()]; seconds = [zero()]
        case "annually", "yearly", "anually":
            months = [one(1)]; days = [one(1)]; hours = [zero()]; minutes = [zero()]; seconds = [zero()]
        case "weekly":
            weekdayBits = 1
            hours = [zero()]; minutes = [zero()]; seconds = [zero()]
        case "quarterly":
            months = [one(1), one(4), one(7), one(10)]
            days = [one(1)]; hours = [zero()]; minutes = [zero()]; seconds = [zero()]
        case "biannually", "bi-annually", "semiannually", "semi-annually":
            months = [one(1), one(7)]
            days = [one(1)]; hours = [zero()]; minutes = [zero()]; seconds = [zero()]
        default:
            return false
        }
        return true
    }

    // MARK: - Weekdays

    private static let weekdayTable: [(name: [UInt8], number: Int)] = [
        ("monday", 0), ("mon", 0), ("tuesday", 1), ("tue", 1), ("wednesday", 2), ("wed", 2),
        ("thursday", 3), ("thu", 3), ("friday", 4), ("fri", 4), ("saturday", 5), ("sat", 5),
        ("sunday", 6), ("sun", 6),
    ].map { (Array($0.0.utf8), $0.1) }

    /// Weekday lists and ranges (`Mon..Fri`, `Mon-Fri`, `Sat,Sun`), optional; ends at a space.
    private mutating func parseWeekdays() throws(TimerdError) {
        var rangeStart = -1
        var first = true
        let begin = pos
        while true {
            let wordStart = pos
            var found: (length: Int, number: Int)?
            for entry in Self.weekdayTable {
                let end = pos + entry.name.count
                guard end <= bytes.count, Self.lowercased(bytes[pos..<end]) == entry.name else { continue }
                guard [0, Self.dash, Self.dot, Self.comma, Self.space].contains(at(end)) else {
                    throw fail("unknown weekday \"\(word(at: wordStart, separators: [Self.space, Self.comma, Self.dot, Self.dash]))\"")
                }
                found = (entry.name.count, entry.number)
                break
            }
            guard let (length, number) = found else {
                // Not a weekday: when nothing came yet, the spec simply has no weekday part.
                if first { return }
                throw fail("unknown weekday \"\(word(at: wordStart, separators: [Self.space, Self.comma, Self.dot, Self.dash]))\"")
            }
            weekdayBits |= 1 << number
            if rangeStart >= 0 {
                guard rangeStart <= number else {
                    let range = String(decoding: bytes[begin..<(pos + length)], as: UTF8.self)
                    throw fail("weekday range in \"\(range)\" goes backwards (ranges run Mon..Sun)")
                }
                for day in (rangeStart + 1)..<max(rangeStart + 1, number) { weekdayBits |= 1 << day }
            }
            pos += length
            if at(pos) == 0 { return }
            if at(pos) == Self.space {
                while at(pos) == Self.space { pos += 1 }
                return
            }
            if at(pos) == Self.dot {
                guard rangeStart < 0 else { throw fail("weekday range in \"\(word(at: begin))\" has more than two ends") }
                guard at(pos + 1) == Self.dot else { throw fail("weekday range in \"\(word(at: begin))\" needs \"..\"") }
                rangeStart = number
                pos += 2
            } else if at(pos) == Self.dash {
                guard rangeStart < 0 else { throw fail("weekday range in \"\(word(at: begin))\" has more than two ends") }
                rangeStart = number
                pos += 1
            } else if at(pos) == Self.comma {
                rangeStart = -1
                pos += 1
            }
            // A trailing comma is fine, an open range is not.
            if at(pos) == 0 || at(pos) == Self.space {
                while at(pos) == Self.space { pos += 1 }
                guard rangeStart < 0 else { throw fail("weekday range in \"\(word(at: begin))\" has no end") }
                return
            }
            first = false
        }
    }

    // MARK: - Date

    /// `[[YEAR-]MONTH-]DAY` (or `MONTH~DAY` for days from the end of the month), or `@timestamp`. Returns
    /// true when the spec is complete (a timestamp includes its time). Leaves `pos` alone when what follows
    /// turns out to be a time.
    private mutating func parseDate() throws(TimerdError) -> Bool {
        var t = pos
        if at(t) == 0 { return false }
        if at(t) == UInt8(ascii: "@") {
            try parseTimestamp(&t)
            pos = t
            return true
        }
        if Self.isLetter(at(t)) {
            let what = pos == 0 ? "weekday" : "date or time"
            throw fail("unknown \(what) \"\(word(at: t, separators: [Self.space, Self.comma, Self.dot, Self.dash]))\"")
        }
        let first = try parseList(&t, seconds: false, field: "date/time")
        if at(t) == 0 || at(t) == Self.colon { return false }
        var endOfMonth = false
        if at(t) == Self.tilde {
            endOfMonth = true
        } else if at(t) != Self.dash {
            throw fail("unexpected \(describe(at(t))) after \"\(String(decoding: bytes[pos..<t], as: UTF8.self))\" (expected \"-\", \"~\" or \":\")")
        }
        t += 1
        let second = try parseList(&t, seconds: false, field: "date")
        if at(t) == 0 || at(t) == Self.space {
            while at(t) == Self.space { t += 1 }
            pos = t
            months = first
            days = second
            spec.endOfMonth = endOfMonth
            return false
        }
        if endOfMonth {
            throw fail("\"~\" may only separate the month and the day (as in *-02~03)")
        }
        if at(t) == Self.tilde {
            endOfMonth = true
        } else if at(t) != Self.dash {
            throw fail("unexpected \(describe(at(t))) in date \"\(String(decoding: bytes[pos..<t], as: UTF8.self))\"")
        }
        t += 1
        let third = try parseList(&t, seconds: false, field: "day")
        guard at(t) == 0 || at(t) == Self.space else {
            throw fail("unexpected \(describe(at(t))) after date \"\(String(decoding: bytes[pos..<t], as: UTF8.self))\"")
        }
        while at(t) == Self.space { t += 1 }
        pos = t
        years = first
        months = second
        days = third
        spec.endOfMonth = endOfMonth
        return false
    }

    /// `@SECONDS`: one instant, in UTC. Parsed like `strtoul` (leading blanks and a sign are accepted).
    private mutating func parseTimestamp(_ t: inout Int) throws(TimerdError) {
        let begin = t
        t += 1
        while [9, 10, 11, 12, 13, 32].contains(at(t)) { t += 1 }
        var negative = false
        if at(t) == UInt8(ascii: "+") || at(t) == Self.dash {
            negative = at(t) == Self.dash
            t += 1
        }
        guard Self.isDigit(at(t)) else { throw fail("timestamp \"\(word(at: begin))\" needs seconds since the epoch") }
        let (value, overflow) = decimal(&t)
        let source = String(decoding: bytes[begin..<t], as: UTF8.self)
        let lastSecond = Int64(CalendarSpec.maxYear - 1969) * 366 * 86_400
        guard !overflow, !negative || value == 0, value <= UInt64(lastSecond) else {
            throw fail("timestamp \"\(source)\" is out of range (years 1970 to \(CalendarSpec.maxYear))")
        }
        let seconds = Int64(value)
        let dayNumber = seconds / 86_400
        let secondOfDay = Int(seconds - dayNumber * 86_400)
        let (year, month, day) = RFC3339.civilFromDays(dayNumber)
        func constant(_ v: Int) -> [ParsedComponent] { [ParsedComponent(value: .init(v), source: String(v))] }
        years = constant(Int(year))
        months = constant(Int(month))
        days = constant(Int(day))
        hours = constant(secondOfDay / 3600)
        minutes = constant(secondOfDay / 60 % 60)
        self.seconds = constant(secondOfDay % 60 * CalendarSpec.usecPerSecond)
        spec.utc = true
        timestampSource = source
    }

    // MARK: - Time

    /// `HOUR:MINUTE[:SECOND]`; nothing at all means 00:00:00.
    private mutating func parseTime() throws(TimerdError) {
        let zero = [ParsedComponent(value: .init(0), source: "0")]
        if at(pos) == 0 {
            hours = zero; minutes = zero; seconds = zero
            return
        }
        var t = pos
        if Self.isLetter(at(t)) {
            throw fail("unknown time \"\(word(at: t))\"")
        }
        let hourList = try parseList(&t, seconds: false, field: "hour")
        guard at(t) == Self.colon else {
            throw fail("expected \":\" after hour \"\(String(decoding: bytes[pos..<t], as: UTF8.self))\", found \(describe(at(t)))")
        }
        t += 1
        let minuteStart = t
        let minuteList = try parseList(&t, seconds: false, field: "minute")
        var secondList = zero
        if at(t) != 0 {
            guard at(t) == Self.colon else {
                throw fail("unexpected \(describe(at(t))) after minute \"\(String(decoding: bytes[minuteStart..<t], as: UTF8.self))\"")
            }
            t += 1
            let secondStart = t
            secondList = try parseList(&t, seconds: true, field: "second")
            guard at(t) == 0 else {
                throw fail("unexpected \(describe(at(t))) after second \"\(String(decoding: bytes[secondStart..<t], as: UTF8.self))\"")
            }
        }
        pos = t
        hours = hourList
        minutes = minuteList
        seconds = secondList
    }

    // MARK: - Lists

    /// `*` or a comma-separated list of `a`, `a..b`, `a/n`, `a..b/n`. An empty result means `*`, except for
    /// seconds, where `*` is every whole second (`0/1`).
    private mutating func parseList(_ t: inout Int, seconds: Bool, field: String) throws(TimerdError) -> [ParsedComponent] {
        if at(t) == Self.star {
            t += 1
            return seconds
                ? [ParsedComponent(value: .init(0, repeat: CalendarSpec.usecPerSecond), source: "*")]
                : []
        }
        var list: [ParsedComponent] = []
        let listStart = t
        while true {
            guard list.count <= CalendarSpec.maxListNesting else {
                throw fail("\(field) list has more than \(CalendarSpec.maxListNesting + 1) elements")
            }
            let begin = t
            let start = try decimal(&t, seconds: seconds, field: field, begin: begin, listStart: listStart)
            var stop = -1
            var step = 0
            if at(t) == Self.dot && at(t + 1) == Self.dot {
                t += 2
                stop = try decimal(&t, seconds: seconds, field: field, begin: begin, listStart: listStart)
                step = seconds ? CalendarSpec.usecPerSecond : 1
            }
            if at(t) == Self.slash {
                t += 1
                step = try decimal(&t, seconds: seconds, field: field, begin: begin, listStart: listStart)
                guard step != 0 else {
                    throw fail("\(field) \"\(String(decoding: bytes[begin..<t], as: UTF8.self))\" repeats every 0")
                }
            } else {
                guard start <= Int(Int32.max) - step else { throw fail("\(field) \"\(word(at: begin))\" is too large") }
                // Without an explicit step a seconds range steps by 1s, so it must span at least 1s.
                if seconds && stop >= 0 && start + step > stop {
                    throw fail("second range \"\(String(decoding: bytes[begin..<t], as: UTF8.self))\" is shorter than its 1s step (add /STEP)")
                }
            }
            guard [0, Self.space, Self.comma, Self.dash, Self.tilde, Self.colon].contains(at(t)) else {
                throw fail("unexpected \(describe(at(t))) in \(field) \"\(word(at: begin))\"")
            }
            let source = String(decoding: bytes[begin..<t], as: UTF8.self)
            list.append(ParsedComponent(value: .init(start, stop: stop, repeat: step), source: source))
            guard at(t) == Self.comma else { return list }
            t += 1
        }
    }

    /// A decimal number (`parse_component_decimal`); for seconds, with up to six fraction digits (a seventh
    /// rounds) and returned in microseconds.
    private func decimal(_ t: inout Int, seconds: Bool, field: String, begin: Int, listStart: Int) throws(TimerdError) -> Int {
        guard Self.isDigit(at(t)) else {
            let found = at(t) == 0 ? "nothing" : "\"\(word(at: t, separators: [Self.space, Self.comma, Self.colon, Self.dash]))\""
            let sofar = String(decoding: bytes[listStart..<t], as: UTF8.self)
            let context = sofar.isEmpty ? "in \(field)" : "after \(field) \"\(sofar)\""
            throw fail("expected a number \(context), found \(found)")
        }
        var (value, overflow) = decimal(&t)
        let tooLarge = fail("\(field) \"\(word(at: begin))\" is too large")
        guard !overflow else { throw tooLarge }
        if seconds {
            let (scaled, o) = value.multipliedReportingOverflow(by: UInt64(CalendarSpec.usecPerSecond))
            guard !o else { throw tooLarge }
            value = scaled
            if at(t) == Self.dot && at(t + 1) != Self.dot {
                t += 1
                guard Self.isDigit(at(t)) else {
                    throw fail("expected fraction digits after \".\" in second \"\(word(at: begin))\"")
                }
                var fraction: UInt64 = 0
                var digits = 0
                while digits < 6 {
                    if Self.isDigit(at(t)) {
                        fraction = fraction * 10 + UInt64(at(t) - 48)
                        t += 1
                    } else {
                        fraction *= 10
                    }
                    digits += 1
                }
                if at(t) >= UInt8(ascii: "5") && at(t) <= UInt8(ascii: "9") { fraction += 1 }
                while Self.isDigit(at(t)) { t += 1 }
                value += fraction
            }
        }
        guard value <= UInt64(Int32.max) else { throw tooLarge }
        return Int(value)
    }

    // MARK: - Normalise and validate

    private mutating func finish() throws(TimerdError) -> CalendarSpec {
        if spec.zoneName == "UTC" {
            spec.utc = true
            spec.zoneName = nil
        }
        spec.weekdays = weekdayBits <= 0 || weekdayBits >= 127 ? -1 : weekdayBits
        if spec.endOfMonth && days.isEmpty { spec.endOfMonth = false }
        for index in years.indices {
            years[index].value.start = CalendarSpec.fixYear(years[index].value.start)
            if years[index].value.stop >= 0 { years[index].value.stop = CalendarSpec.fixYear(years[index].value.stop) }
        }
        years = CalendarSpec.normalizeList(years)
        months = CalendarSpec.normalizeList(months)
        days = CalendarSpec.normalizeList(days)
        hours = CalendarSpec.normalizeList(hours)
        minutes = CalendarSpec.normalizeList(minutes)
        seconds = CalendarSpec.normalizeList(seconds)

        if let timestampSource, let year = years.first?.value.start,
           year < CalendarSpec.minYear || year > CalendarSpec.maxYear {
            throw fail("timestamp \"\(timestampSource)\" is out of range (years 1970 to \(CalendarSpec.maxYear))")
        }
        try CalendarSpec.validate(years, field: "year", from: CalendarSpec.minYear, to: CalendarSpec.maxYear, fail: fail)
        try CalendarSpec.validate(months, field: "month", from: 1, to: 12, fail: fail)
        try CalendarSpec.validate(days, field: "day", from: 1, to: 31, endOfMonth: spec.endOfMonth, fail: fail)
        try CalendarSpec.validate(hours, field: "hour", from: 0, to: 23, fail: fail)
        try CalendarSpec.validate(minutes, field: "minute", from: 0, to: 59, fail: fail)
        try CalendarSpec.validate(seconds, field: "second", from: 0, to: 60 * CalendarSpec.usecPerSecond - 1, fail: fail)

        spec.years = years.map(\.value)
        spec.months = months.map(\.value)
        spec.days = days.map(\.value)
        spec.hours = hours.map(\.value)
        spec.minutes = minutes.map(\.value)
        spec.microseconds = seconds.map(\.value)
        return spec
    }
}
