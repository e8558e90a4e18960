/// The next-elapse search, following `calendar_spec_next_usec`, `find_next`, `find_matching_component`,
/// `find_end_of_month`, `tm_within_bounds` and `matches_weekday` in systemd v252's
/// `src/shared/calendarspec.c`.
///
/// Like systemd, it works on broken-down local time (`struct tm` conventions) and leans on `mktime`
/// normalisation: every candidate is checked by converting a copy and comparing the fields, so a wall time
/// that does not exist (a spring-forward gap, the 31st of a short month) is "out of bounds" and the search
/// moves on from the normalised time. All `mktime` calls of one search share one remembered offset
/// (`guess`), as glibc's single static offset does, which decides the instant an ambiguous fall-back time
/// maps to.
extension CalendarSpec {
    /// The first elapse strictly after `afterMicroseconds` (µs since the Unix epoch, UTC), or nil when the
    /// spec never elapses again (`*-02-30`, a past year, or later than 2199). Computed in `zone`; a spec in
    /// UTC (a `UTC` suffix or an `@timestamp`) always uses UTC rules, whatever `zone` is. Like systemd, an
    /// instant after 9999-12-30 23:59:59 UTC (or before the epoch) has no next elapse.
    public func next(after afterMicroseconds: Int64, in zone: some LocalTimeConversion) -> Int64? {
        if utc { return nextElapse(after: afterMicroseconds, rules: GregorianUTC()) }
        return nextElapse(after: afterMicroseconds, rules: zone)
    }

    private func nextElapse<Zone: LocalTimeConversion>(after: Int64, rules: Zone) -> Int64? {
        guard after >= 0, after <= Self.maxBaseMicroseconds else { return nil }
        let start = after + 1
        let usecPerSecond = Int64(Self.usecPerSecond)
        var time = rules.localTime(start / usecPerSecond)
        var micro = Int(start % usecPerSecond)
        var search = Search(spec: self, rules: rules, guess: -Int64(time.utcOffset))
        guard search.findNext(&time, &micro) else { return nil }
        guard let seconds = search.makeTime(&time), seconds >= 0 else { return nil }
        return seconds * usecPerSecond + Int64(micro)
    }
}

/// One next-elapse computation: the spec, the zone, and the `mktime` offset threaded through every call.
private struct Search<Zone: LocalTimeConversion> {
    let spec: CalendarSpec
    let rules: Zone
    var guess: Int64

    /// systemd's `MAX_CALENDAR_ITERATIONS`, a safety valve against a search that makes no progress.
    static var maxIterations: Int { 1000 }

    /// `mktime`: nil where systemd treats the result as an error (`< 0`).
    mutating func makeTime(_ time: inout BrokenDownTime) -> Int64? {
        guard let seconds = rules.makeTime(&time, guess: &guess), seconds >= 0 else { return nil }
        return seconds
    }

    /// Resets every field below `level`; `micro` is the sub-second part.
    enum Level { case year, month, day, hour, minute }
    private func reset(_ time: inout BrokenDownTime, _ micro: inout Int, below level: Level) {
        switch level {
        case .year: time.month = 0; fallthrough
        case .month: time.day = 1; fallthrough
        case .day: time.hour = 0; fallthrough
        case .hour: time.minute = 0; fallthrough
        case .minute: time.second = 0; micro = 0
        }
    }

    /// Moves `time` to the earliest matching instant at or after it (`find_next`). Returns false when there
    /// is none.
    mutating func findNext(_ time: inout BrokenDownTime, _ micro: inout Int) -> Bool {
        var c = time
        var usec = micro
        // Set once a match turned out not to be after the start: from then on the DST flag that mktime
        // found is kept, so that a time mktime moved backwards (out of a gap) gets moved forwards instead.
        var keepDST = false
        for _ in 0..<Self.maxIterations {
            // Normalise the candidate, then let mktime work out DST for it afresh.
            _ = makeTime(&c)
            if !keepDST { c.isDST = -1 }

            var year = c.year + 1900
            var r = matchComponent(spec.years, isDay: false, time: c, &year)
            c.year = year - 1900
            if r > 0 { reset(&c, &usec, below: .year) }
            if r < 0 { return false }
            if withinBounds(&c) <= 0 { return false }

            var month = c.month + 1
            r = matchComponent(spec.months, isDay: false, time: c, &month)
            c.month = month - 1
            if r > 0 { reset(&c, &usec, below: .month) }
            if r < 0 { r = -1 } else { r = withinBounds(&c) }
            if r < 0 {
                c.year += 1
                reset(&c, &usec, below: .year)
                continue
            }
            if r == 0 { continue }

            var day = c.day
            r = matchComponent(spec.days, isDay: true, time: c, &day)
            c.day = day
            if r > 0 { reset(&c, &usec, below: .day) }
            if r < 0 { r = -1 } else { r = withinBounds(&c) }
            if r < 0 {
                c.month += 1
                reset(&c, &usec, below: .month)
                continue
            }
            if r == 0 { continue }

            if !matchesWeekday(c) {
                c.day += 1
                reset(&c, &usec, below: .day)
                continue
            }

            r = matchComponent(spec.hours, isDay: false, time: c, &c.hour)
            if r > 0 { reset(&c, &usec, below: .hour) }
            if r < 0 { r = -1 } else { r = withinBounds(&c) }
            if r < 0 {
                c.day += 1
                reset(&c, &usec, below: .day)
                continue
            }
            // The hour just set may not exist (a DST change): start again from the normalised time.
            if r == 0 { continue }

            r = matchComponent(spec.minutes, isDay: false, time: c, &c.minute)
            if r > 0 { reset(&c, &usec, below: .minute) }
            if r < 0 { r = -1 } else { r = withinBounds(&c) }
            if r < 0 {
                c.hour += 1
                reset(&c, &usec, below: .hour)
                continue
            }
            if r == 0 { continue }

            var combined = c.second * CalendarSpec.usecPerSecond + usec
            r = matchComponent(spec.microseconds, isDay: false, time: c, &combined)
            usec = combined % CalendarSpec.usecPerSecond
            c.second = combined / CalendarSpec.usecPerSecond
            if r < 0 { r = -1 } else { r = withinBounds(&c) }
            if r < 0 {
                c.minute += 1
                reset(&c, &usec, below: .minute)
                continue
            }
            if r == 0 { continue }

            // A match at or before the start means normalisation took us backwards (a gap that mktime
            // resolves to the earlier side): move on an hour, keeping mktime's DST flag.
            var order = Self.compare(time, c)
            if order == 0 { order = micro < usec + 1 ? -1 : (micro > usec + 1 ? 1 : 0) }
            if order >= 0 {
                keepDST = true
                c.hour += 1
                continue
            }

            time = c
            micro = usec
            return true
        }
        return false
    }

    /// The earliest value at or after `value` that one list element allows (`find_matching_component`).
    /// Returns 1 when `value` changed, 0 when it already matched (or the list is `*`), -1 when nothing
    /// at or after it matches. `time` is used only for days counted from the end of the month.
    mutating func matchComponent(_ list: [CalendarSpec.Component], isDay: Bool, time: BrokenDownTime,
                                 _ value: inout Int) -> Int {
        guard !list.isEmpty else { return 0 }
        let fromEnd = spec.endOfMonth && isDay
        var best: Int?
        for c in list {
            var start = c.start
            var stop = c.stop
            if fromEnd {
                start = endOfMonthDay(time, c.start)
                stop = endOfMonthDay(time, c.stop)
                if stop > 0 { swap(&start, &stop) }
            }
            if start >= value {
                if best == nil || start < best! { best = start }
            } else if c.repeat > 0 {
                let steps = (value - start + c.repeat - 1) / c.repeat
                let k = start + c.repeat * steps
                if (best == nil || k < best!) && (stop < 0 || k <= stop) { best = k }
            }
        }
        guard let best else { return -1 }
        let changed = value != best
        value = best
        return changed ? 1 : 0
    }

    /// The day of the month that is `day` days from its end (1 = the last day), or -1 (`find_end_of_month`).
    mutating func endOfMonthDay(_ time: BrokenDownTime, _ day: Int) -> Int {
        var t = time
        t.month += 1
        t.day = 1 - day
        guard makeTime(&t) != nil, t.month == time.month else { return -1 }
        return t.day
    }

    /// Whether `time` is a real local time (`tm_within_bounds`): 1 when it is; 0 when `mktime` changed it,
    /// in which case `time` becomes the normalised time with the unit below the first changed one reset;
    /// -1 past `maxYear`, on error, or if normalisation would go backwards.
    mutating func withinBounds(_ time: inout BrokenDownTime) -> Int {
        guard time.year + 1900 <= CalendarSpec.maxYear else { return -1 }
        var t = time
        guard makeTime(&t) != nil else { return -1 }
        func compare(_ a: Int, _ b: Int) -> Int { a < b ? -1 : (a > b ? 1 : 0) }
        // Normalisation may have skipped a match (the 33rd of March is the 2nd of April, skipping the
        // 1st), so the unit below the first changed one starts over.
        let order: Int
        if t.year != time.year {
            order = compare(t.year, time.year)
            t.month = 0
            t.day = 1
        } else if t.month != time.month {
            order = compare(t.month, time.month)
            t.day = 1
        } else if t.day != time.day {
            order = compare(t.day, time.day)
            t.hour = 0
        } else if t.hour != time.hour {
            order = compare(t.hour, time.hour)
            t.minute = 0
        } else if t.minute != time.minute {
            order = compare(t.minute, time.minute)
            t.second = 0
        } else {
            order = compare(t.second, time.second)
        }
        if order < 0 { return -1 }
        if order > 0 { time = t }
        return order == 0 ? 1 : 0
    }

    /// Orders two broken-down times by their fields, year first (`tm_compare`).
    static func compare(_ a: BrokenDownTime, _ b: BrokenDownTime) -> Int {
        let left = (a.year, a.month, a.day, a.hour, a.minute, a.second)
        let right = (b.year, b.month, b.day, b.hour, b.minute, b.second)
        return left < right ? -1 : (left > right ? 1 : 0)
    }

    /// Whether `time`'s weekday is in the spec (`matches_weekday`).
    mutating func matchesWeekday(_ time: BrokenDownTime) -> Bool {
        let bits = spec.weekdays
        if bits < 0 || bits >= 127 { return true }
        var t = time
        guard makeTime(&t) != nil else { return false }
        let mondayBased = t.weekday == 0 ? 6 : t.weekday - 1
        return bits & (1 << mondayBased) != 0
    }
}

/// `timegm`/`gmtime_r` with glibc's normalisation of out-of-range fields, for specs in UTC.
struct GregorianUTC: LocalTimeConversion {
    func localTime(_ utcSeconds: Int64) -> BrokenDownTime {
        var days = utcSeconds / 86_400
        var secondOfDay = utcSeconds % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        let (year, month, day) = RFC3339.civilFromDays(days)
        let january1 = RFC3339.daysFromCivil(year: year, month: 1, day: 1)
        var weekday = (days + 4) % 7
        if weekday < 0 { weekday += 7 }
        return BrokenDownTime(
            year: Int(year) - 1900, month: Int(month) - 1, day: Int(day),
            hour: Int(secondOfDay / 3600), minute: Int(secondOfDay / 60 % 60), second: Int(secondOfDay % 60),
            weekday: Int(weekday), yearDay: Int(days - january1), isDST: 0, utcOffset: 0)
    }

    func makeTime(_ time: inout BrokenDownTime, guess: inout Int64) -> Int64? {
        // Years far outside what a calendar search can reach are refused, as mktime refuses overflow.
        guard abs(time.year) < 1_000_000, abs(time.month) < 1_000_000, abs(time.day) < 100_000_000,
              abs(time.hour) < 100_000_000, abs(time.minute) < 100_000_000, abs(time.second) < 100_000_000
        else { return nil }
        var month = Int64(time.month)
        var year = Int64(time.year) + 1900 + month / 12
        month %= 12
        if month < 0 { month += 12; year -= 1 }
        let days = RFC3339.daysFromCivil(year: year, month: month + 1, day: 1) + Int64(time.day) - 1
        let seconds = days * 86_400 + Int64(time.hour) * 3600 + Int64(time.minute) * 60 + Int64(time.second)
        time = localTime(seconds)
        guess = 0
        return seconds
    }
}
