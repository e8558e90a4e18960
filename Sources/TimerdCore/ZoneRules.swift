/// One time zone's rules, read from the system's tz database (a TZif file, RFC 8536) or a POSIX `TZ`
/// string, answering the questions calendar schedules ask: the local time at an instant, and the instants
/// a local time names.
///
/// `localTime` and `makeTime` reproduce glibc's `localtime_r` and `mktime` (2.36): transitions from the
/// file's table, the footer's POSIX rule after the last one, and `mktime`'s probing, so calendar specs
/// ported from systemd (which calls those two functions) compute what systemd computes.
public struct ZoneRules: LocalTimeConversion, Equatable, Sendable {
    /// The name the zone was loaded by (`Europe/Berlin`, `UTC`).
    public let name: String

    struct LocalType: Equatable, Sendable {
        var utcOffset: Int
        var isDST: Bool
        var abbreviation: String
    }

    /// Transition instants (UTC seconds, ascending) and the local type that starts at each.
    let transitions: [Int64]
    let transitionTypes: [UInt8]
    let types: [LocalType]
    /// The footer's rule, for instants after the last transition.
    let rule: PosixTZ?

    /// UTC, with no transitions.
    public static let utc = ZoneRules(name: "UTC", transitions: [], transitionTypes: [],
                                      types: [LocalType(utcOffset: 0, isDST: false, abbreviation: "UTC")], rule: nil)

    init(name: String, transitions: [Int64], transitionTypes: [UInt8], types: [LocalType], rule: PosixTZ?) {
        self.name = name
        self.transitions = transitions
        self.transitionTypes = transitionTypes
        self.types = types
        self.rule = rule
    }

    /// Parses a TZif file (versions 1 to 4). Leap-second files (`right/…`) are refused: POSIX time, which
    /// timerd and systemd count in, has no leap seconds.
    public init(tzif bytes: [UInt8], name: String) throws(TimerdError) {
        func fail(_ why: String) -> TimerdError {
            TimerdError(.badArgument, "time zone \"\(name)\": not a usable tz database file (\(why))", key: "timezone")
        }
        var reader = ByteReader(bytes: bytes)
        guard reader.take(4) == Array("TZif".utf8) else { throw fail("bad magic") }
        guard let versionByte = reader.byte() else { throw fail("truncated header") }
        let version = versionByte == 0 ? 1 : Int(versionByte) - 48
        reader.skip(15)
        var counts = try Self.counts(&reader, fail)
        if version >= 2 {
            // Skip the 32-bit block; the 64-bit one after the second header has the same data and more range.
            let v1Length = counts.time * 5 + counts.type * 6 + counts.chars + counts.leap * 8 + counts.std + counts.ut
            reader.skip(v1Length)
            guard reader.take(4) == Array("TZif".utf8) else { throw fail("bad second header") }
            reader.skip(16)
            counts = try Self.counts(&reader, fail)
        }
        let timeSize = version >= 2 ? 8 : 4
        guard counts.leap == 0 else { throw fail("it counts leap seconds; use the zone without the right/ prefix") }
        guard counts.type > 0 else { throw fail("no local time types") }
        var transitions: [Int64] = []
        transitions.reserveCapacity(counts.time)
        for _ in 0..<counts.time {
            guard let value = reader.signed(timeSize) else { throw fail("truncated transitions") }
            transitions.append(value)
        }
        guard let transitionTypes = reader.take(counts.time) else { throw fail("truncated transition types") }
        var rawTypes: [(Int, Bool, Int)] = []
        for _ in 0..<counts.type {
            guard let offset = reader.signed(4), let dst = reader.byte(), let index = reader.byte() else {
                throw fail("truncated local time types")
            }
            rawTypes.append((Int(offset), dst != 0, Int(index)))
        }
        guard let chars = reader.take(counts.chars) else { throw fail("truncated abbreviations") }
        reader.skip(counts.std + counts.ut)
        guard transitionTypes.allSatisfy({ Int($0) < counts.type }) else { throw fail("bad transition type") }
        let types = rawTypes.map { offset, dst, index in
            var end = min(index, chars.count)
            while end < chars.count, chars[end] != 0 { end += 1 }
            let abbreviation = index < chars.count ? String(decoding: chars[index..<end], as: UTF8.self) : ""
            return LocalType(utcOffset: offset, isDST: dst, abbreviation: abbreviation)
        }
        var rule: PosixTZ?
        if version >= 2, reader.byte() == UInt8(ascii: "\n") {
            let footer = reader.rest.prefix { $0 != UInt8(ascii: "\n") }
            if !footer.isEmpty {
                rule = PosixTZ(String(decoding: footer, as: UTF8.self))
                if rule == nil { throw fail("bad footer rule") }
            }
        }
        self.init(name: name, transitions: transitions, transitionTypes: transitionTypes, types: types, rule: rule)
    }

    /// A zone given as a POSIX `TZ` rule string such as `CET-1CEST,M3.5.0,M10.5.0/3`.
    public init(posix text: String) throws(TimerdError) {
        guard let rule = PosixTZ(text) else {
            throw TimerdError(.badArgument, "invalid POSIX TZ rule \"\(text)\"", key: "timezone")
        }
        self.init(name: text, transitions: [], transitionTypes: [],
                  types: [LocalType(utcOffset: rule.stdOffset, isDST: false, abbreviation: rule.stdName)], rule: rule)
    }

    private static func counts(
        _ reader: inout ByteReader, _ fail: (String) -> TimerdError
    ) throws(TimerdError) -> (ut: Int, std: Int, leap: Int, time: Int, type: Int, chars: Int) {
        var values: [Int] = []
        for _ in 0..<6 {
            guard let value = reader.signed(4), value >= 0, value < 1 << 20 else { throw fail("bad header counts") }
            values.append(Int(value))
        }
        return (values[0], values[1], values[2], values[3], values[4], values[5])
    }

    public static func == (lhs: ZoneRules, rhs: ZoneRules) -> Bool {
        lhs.name == rhs.name && lhs.transitions == rhs.transitions && lhs.transitionTypes == rhs.transitionTypes
            && lhs.types == rhs.types && lhs.rule == rhs.rule
    }

    // MARK: - Instant → local

    /// The local type in effect at `utcSeconds`, as glibc's `__tzfile_compute` picks it.
    func localType(at utcSeconds: Int64) -> LocalType {
        if transitions.isEmpty || utcSeconds < transitions[0] {
            if transitions.isEmpty, let rule { return rule.localType(at: utcSeconds) }
            // Before the first transition: the first standard-time type.
            return types.first { !$0.isDST } ?? types[0]
        }
        if utcSeconds >= transitions[transitions.count - 1], let rule {
            return rule.localType(at: utcSeconds)
        }
        // The last transition at or before the instant.
        var low = 0
        var high = transitions.count
        while high - low > 1 {
            let mid = (low + high) / 2
            if transitions[mid] <= utcSeconds { low = mid } else { high = mid }
        }
        return types[Int(transitionTypes[low])]
    }

    /// The UTC offset (seconds east) at `utcSeconds`.
    public func utcOffset(at utcSeconds: Int64) -> Int { localType(at: utcSeconds).utcOffset }

    public func localTime(_ utcSeconds: Int64) -> BrokenDownTime {
        let type = localType(at: utcSeconds)
        var time = CivilClock.brokenDown(localSeconds: utcSeconds + Int64(type.utcOffset))
        time.isDST = type.isDST ? 1 : 0
        time.utcOffset = type.utcOffset
        return time
    }

    // MARK: - Local → instant

    public func makeTime(_ time: inout BrokenDownTime, guess: inout Int64) -> Int64? {
        // Follows glibc 2.36's __mktime_internal (time/mktime.c): probe with the remembered offset, follow
        // the error, stop on an oscillation across a spring-forward gap, then honour a requested tm_isdst by
        // borrowing the offset of a nearby instant that has it.
        let requestedSecond = time.second
        var request = time
        request.second = min(max(request.second, 0), 59)
        let wanted = CivilClock.localSeconds(request)
        let isDST = time.isDST
        let t0 = wanted &+ guess
        var t = t0
        var t1 = t0
        var t2 = t0
        var previousWasDST = false
        var probesLeft = 6
        var found = localTime(t)
        func difference(_ local: BrokenDownTime, at instant: Int64) -> Int64 {
            wanted - (instant + Int64(local.utcOffset))
        }
        func isDSTDiffers(_ a: Int, _ b: Int) -> Bool { (a == 0) != (b == 0) && a >= 0 && b >= 0 }

        var settled = false
        while true {
            found = localTime(t)
            let dt = difference(found, at: t)
            if dt == 0 { break }
            let foundDST = found.isDST != 0
            if t == t1, t != t2,
               isDST < 0 ? (previousWasDST ? 1 : 0) <= (foundDST ? 1 : 0) : (isDST != 0) != foundDST {
                settled = true
                break
            }
            probesLeft -= 1
            if probesLeft == 0 { return nil }
            t1 = t2
            t2 = t
            t += dt
            previousWasDST = foundDST
        }
        if !settled, isDSTDiffers(isDST, found.isDST) {
            let stride: Int64 = 601_200
            let bound: Int64 = 457_243_200 / 2 + stride
            var delta = stride
            var matched = false
            search: while delta < bound {
                for direction: Int64 in [-1, 1] {
                    let other = t + delta * direction
                    let otherTime = localTime(other)
                    if !isDSTDiffers(isDST, otherTime.isDST) {
                        let candidate = other + difference(otherTime, at: other)
                        found = localTime(candidate)
                        t = candidate
                        matched = true
                        break search
                    }
                }
                delta += stride
            }
            if !matched {
                // No neighbour has the requested flag (a zone without DST): assume a one-hour difference.
                let dstDifference: Int64 = (isDST == 0 ? 1 : 0) - (found.isDST == 0 ? 1 : 0)
                t += 3600 * dstDifference
                found = localTime(t)
            }
        }
        guess = t - t0 + guess
        if requestedSecond != found.second {
            let adjustment = Int64(requestedSecond - request.second)
            t += adjustment
            found = localTime(t)
        }
        time = found
        return t
    }

    /// What a local civil time (as `CivilClock` local seconds) names in this zone.
    public enum LocalInstants: Equatable, Sendable {
        /// Exactly one instant.
        case unique(Int64)
        /// A fall-back repeats the local time: the first and the second instant.
        case repeated(Int64, Int64)
        /// A spring-forward skips the local time; `transition` is the instant the clock jumped, the first
        /// instant after the skipped interval.
        case skipped(transition: Int64)
    }

    /// The instants at which local civil time `localSeconds` occurs. Assumes at most one offset change
    /// within a day around it, which holds for every zone in the tz database since 1900.
    public func instants(ofLocal localSeconds: Int64) -> LocalInstants {
        let before = Int64(utcOffset(at: localSeconds - 26 * 3600))
        let after = Int64(utcOffset(at: localSeconds + 26 * 3600))
        var found: [Int64] = []
        for offset in before == after ? [before] : [before, after] {
            let candidate = localSeconds - offset
            if Int64(utcOffset(at: candidate)) == offset { found.append(candidate) }
        }
        found.sort()
        if found.count == 2 { return .repeated(found[0], found[1]) }
        if let only = found.first { return .unique(only) }
        // In a gap: find the transition between the two offsets by bisection.
        var low = localSeconds - 26 * 3600
        var high = localSeconds + 26 * 3600
        while high - low > 1 {
            let mid = low + (high - low) / 2
            if Int64(utcOffset(at: mid)) == before { low = mid } else { high = mid }
        }
        return .skipped(transition: high)
    }
}

/// Civil calendar arithmetic with no zone: "local seconds" count seconds since 1970-01-01T00:00:00 of a
/// civil calendar, as if local time were UTC.
public enum CivilClock {
    /// Local seconds of a broken-down time, normalising out-of-range fields the way `mktime` does.
    public static func localSeconds(_ time: BrokenDownTime) -> Int64 {
        var year = Int64(time.year) + 1900
        var month = Int64(time.month)
        year += month >= 0 ? month / 12 : -((11 - month) / 12)
        month = ((month % 12) + 12) % 12
        let days = RFC3339.daysFromCivil(year: year, month: month + 1, day: 1) + Int64(time.day) - 1
        return days * 86_400 + Int64(time.hour) * 3600 + Int64(time.minute) * 60 + Int64(time.second)
    }

    /// The broken-down form of local seconds (isDST unknown, offset 0).
    public static func brokenDown(localSeconds: Int64) -> BrokenDownTime {
        var days = localSeconds / 86_400
        var secondOfDay = localSeconds % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        let (year, month, day) = RFC3339.civilFromDays(days)
        let yearStart = RFC3339.daysFromCivil(year: year, month: 1, day: 1)
        var weekday = (days + 4) % 7  // 1970-01-01 was a Thursday
        if weekday < 0 { weekday += 7 }
        return BrokenDownTime(
            year: Int(year - 1900), month: Int(month - 1), day: Int(day),
            hour: Int(secondOfDay / 3600), minute: Int(secondOfDay / 60 % 60), second: Int(secondOfDay % 60),
            weekday: Int(weekday), yearDay: Int(days - yearStart), isDST: -1, utcOffset: 0)
    }
}

/// A POSIX `TZ` rule (the TZif footer): `std offset [dst [offset] [,start[/time],end[/time]]]`, with the
/// extensions RFC 8536 allows (hours up to ±167 in rule times, `<+1030>`-style quoted names).
struct PosixTZ: Equatable, Sendable {
    var stdName: String
    /// Seconds east of UTC (POSIX writes them west, with the opposite sign).
    var stdOffset: Int
    var dst: (name: String, offset: Int, start: Rule, end: Rule)?

    struct Rule: Equatable, Sendable {
        enum Day: Equatable, Sendable {
            /// `Jn`: day 1–365, February 29 never counted.
            case julianNoLeap(Int)
            /// `n`: day 0–365, February 29 counted.
            case zeroBased(Int)
            /// `Mm.w.d`: weekday d (0 = Sunday) of week w (5 = last) of month m.
            case monthWeekDay(month: Int, week: Int, weekday: Int)
        }
        var day: Day
        /// Seconds after local midnight (may be negative or past 24 h).
        var time: Int
    }

    static func == (lhs: PosixTZ, rhs: PosixTZ) -> Bool {
        lhs.stdName == rhs.stdName && lhs.stdOffset == rhs.stdOffset && lhs.dst?.name == rhs.dst?.name
            && lhs.dst?.offset == rhs.dst?.offset && lhs.dst?.start == rhs.dst?.start && lhs.dst?.end == rhs.dst?.end
    }

    init?(_ text: String) {
        var scanner = TZScanner(bytes: Array(text.utf8))
        guard let stdName = scanner.name(), let stdWest = scanner.offset(maxHours: 24) else { return nil }
        self.stdName = stdName
        self.stdOffset = -stdWest
        if scanner.atEnd { dst = nil; return }
        guard let dstName = scanner.name() else { return nil }
        var dstOffset = stdOffset + 3600
        if let west = scanner.offset(maxHours: 24) { dstOffset = -west }
        var start = Rule(day: .monthWeekDay(month: 3, week: 2, weekday: 0), time: 7200)
        var end = Rule(day: .monthWeekDay(month: 11, week: 1, weekday: 0), time: 7200)
        if scanner.eat(",") {
            guard let first = scanner.rule(), scanner.eat(","), let second = scanner.rule() else { return nil }
            start = first
            end = second
        }
        guard scanner.atEnd else { return nil }
        dst = (dstName, dstOffset, start, end)
    }

    func localType(at utcSeconds: Int64) -> ZoneRules.LocalType {
        let standard = ZoneRules.LocalType(utcOffset: stdOffset, isDST: false, abbreviation: stdName)
        guard let dst else { return standard }
        // glibc's __tz_compute: the changes of the instant's UTC year decide.
        let year = RFC3339.civilFromDays(floorDiv(utcSeconds, 86_400)).0
        let startAt = instant(of: dst.start, year: year) - Int64(stdOffset)
        let endAt = instant(of: dst.end, year: year) - Int64(dst.offset)
        let inDST = startAt > endAt
            ? (utcSeconds < endAt || utcSeconds >= startAt)
            : (utcSeconds >= startAt && utcSeconds < endAt)
        return inDST ? ZoneRules.LocalType(utcOffset: dst.offset, isDST: true, abbreviation: dst.name) : standard
    }

    /// Local seconds at which `rule` changes in `year`.
    private func instant(of rule: Rule, year: Int64) -> Int64 {
        let january1 = RFC3339.daysFromCivil(year: year, month: 1, day: 1)
        var day: Int64
        switch rule.day {
        case .julianNoLeap(let n):
            day = january1 + Int64(n - 1)
            if RFC3339.isLeap(year), n >= 60 { day += 1 }
        case .zeroBased(let n):
            day = january1 + Int64(n)
        case .monthWeekDay(let month, let week, let weekday):
            let first = RFC3339.daysFromCivil(year: year, month: Int64(month), day: 1)
            let firstWeekday = ((first + 4) % 7 + 7) % 7
            var dayOfMonth = 1 + (Int64(weekday) - firstWeekday + 7) % 7 + Int64(week - 1) * 7
            let length = RFC3339.daysInMonth(year: year, month: Int64(month))
            while dayOfMonth > length { dayOfMonth -= 7 }
            day = first + dayOfMonth - 1
        }
        return day * 86_400 + Int64(rule.time)
    }
}

func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
    let quotient = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient
}

/// Scans the pieces of a POSIX TZ string.
private struct TZScanner {
    var bytes: [UInt8]
    var index = 0

    var atEnd: Bool { index == bytes.count }

    mutating func eat(_ character: Character) -> Bool {
        guard index < bytes.count, bytes[index] == character.asciiValue else { return false }
        index += 1
        return true
    }

    mutating func name() -> String? {
        if eat("<") {
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: ">") { index += 1 }
            guard index < bytes.count, index > start else { return nil }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            index += 1
            return text
        }
        let start = index
        while index < bytes.count, (bytes[index] | 0x20) >= UInt8(ascii: "a"), (bytes[index] | 0x20) <= UInt8(ascii: "z") {
            index += 1
        }
        guard index - start >= 3 else { return nil }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func number() -> Int? {
        let start = index
        var value = 0
        while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57, index - start < 4 {
            value = value * 10 + Int(bytes[index] - 48)
            index += 1
        }
        return index > start ? value : nil
    }

    /// `[+-]hh[:mm[:ss]]` in seconds.
    mutating func offset(maxHours: Int) -> Int? {
        let save = index
        var sign = 1
        if eat("-") { sign = -1 } else { _ = eat("+") }
        guard let hours = number(), hours <= maxHours else { index = save; return nil }
        var total = hours * 3600
        if eat(":") {
            guard let minutes = number(), minutes < 60 else { return nil }
            total += minutes * 60
            if eat(":") {
                guard let seconds = number(), seconds < 60 else { return nil }
                total += seconds
            }
        }
        return sign * total
    }

    mutating func rule() -> PosixTZ.Rule? {
        var day: PosixTZ.Rule.Day
        if eat("J") {
            guard let n = number(), (1...365).contains(n) else { return nil }
            day = .julianNoLeap(n)
        } else if eat("M") {
            guard let month = number(), (1...12).contains(month), eat("."), let week = number(), (1...5).contains(week),
                  eat("."), let weekday = number(), weekday <= 6 else { return nil }
            day = .monthWeekDay(month: month, week: week, weekday: weekday)
        } else {
            guard let n = number(), n <= 365 else { return nil }
            day = .zeroBased(n)
        }
        var time = 7200
        if eat("/") {
            guard let value = offset(maxHours: 167) else { return nil }
            time = value
        }
        return PosixTZ.Rule(day: day, time: time)
    }
}

/// Big-endian reads over a byte array that return nil instead of trapping past the end.
private struct ByteReader {
    let bytes: [UInt8]
    var index = 0

    var rest: ArraySlice<UInt8> { bytes[min(index, bytes.count)...] }

    mutating func byte() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func take(_ count: Int) -> [UInt8]? {
        guard count >= 0, index + count <= bytes.count else { return nil }
        defer { index += count }
        return Array(bytes[index..<index + count])
    }

    mutating func skip(_ count: Int) { index += count }

    mutating func signed(_ size: Int) -> Int64? {
        guard let raw = take(size) else { return nil }
        var value: UInt64 = 0
        for byte in raw { value = value << 8 | UInt64(byte) }
        if size == 4 { return Int64(Int32(bitPattern: UInt32(truncatingIfNeeded: value))) }
        return Int64(bitPattern: value)
    }
}
