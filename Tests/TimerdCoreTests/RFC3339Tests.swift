import Testing
@testable import TimerdCore

private let s = nsPerSecond

@Suite("RFC3339 and WallTime")
struct RFC3339Tests {
    // MARK: - Parse

    static let valid: [(String, Int64)] = [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:00z", 0),
        ("1970-01-01t00:00:00Z", 0),
        ("1970-01-01 00:00:00Z", 0),
        ("1970-01-01T00:00:00+00:00", 0),
        ("1970-01-01T00:00:00-00:00", 0),
        ("2026-11-29T16:00:00Z", 1_795_968_000 * s),
        ("2026-11-29t16:00:00z", 1_795_968_000 * s),
        ("2026-11-29 16:00:00Z", 1_795_968_000 * s),
        ("2026-11-29T17:00:00+01:00", 1_795_968_000 * s),
        ("2026-11-29T10:30:00-05:30", 1_795_968_000 * s),
        ("2026-11-30T01:45:00+09:45", 1_795_968_000 * s),
        ("2026-11-29T16:00:00+00:00", 1_795_968_000 * s),
        ("2026-11-29T17:00:00.25+01:00", 1_795_968_000 * s + 250_000_000),
        ("2026-11-30T15:59:00+23:59", 1_795_968_000 * s),
        ("2026-11-28T16:01:00-23:59", 1_795_968_000 * s),
        // Offsets that cross a day, month and year boundary.
        ("2026-01-01T00:30:00+01:00", (1_767_225_600 - 1_800) * s),
        ("2025-12-31T23:30:00-01:00", (1_767_225_600 + 1_800) * s),
        // Fractions of 1 to 9 digits, and more (extra digits are dropped, not rounded).
        ("1970-01-01T00:00:00.1Z", 100_000_000),
        ("1970-01-01T00:00:00.12Z", 120_000_000),
        ("1970-01-01T00:00:00.123Z", 123_000_000),
        ("1970-01-01T00:00:00.1234Z", 123_400_000),
        ("1970-01-01T00:00:00.12345Z", 123_450_000),
        ("1970-01-01T00:00:00.123456Z", 123_456_000),
        ("1970-01-01T00:00:00.1234567Z", 123_456_700),
        ("1970-01-01T00:00:00.12345678Z", 123_456_780),
        ("1970-01-01T00:00:00.123456789Z", 123_456_789),
        ("1970-01-01T00:00:00.1234567899Z", 123_456_789),
        ("1970-01-01T00:00:00.999999999999Z", 999_999_999),
        ("1970-01-01T00:00:00.000000001Z", 1),
        ("1970-01-01T00:00:00.0Z", 0),
        ("1970-01-01T00:00:00.5+01:00", -3_600 * s + 500_000_000),
        // Before 1970: the fraction still counts forward.
        ("1969-12-31T23:59:59Z", -s),
        ("1969-12-31T23:59:59.5Z", -500_000_000),
        ("1969-07-20T20:17:40Z", -14_182_940 * s),
        ("1900-01-01T00:00:00Z", -2_208_988_800 * s),
        ("2000-01-01T00:00:00Z", 946_684_800 * s),
        ("2038-01-19T03:14:08Z", 2_147_483_648 * s),
        ("2100-12-31T23:59:59Z", 4_133_980_799 * s),
        // Leap days.
        ("2024-02-29T00:00:00Z", 1_709_164_800 * s),
        ("2000-02-29T00:00:00Z", 951_782_400 * s),
        // A leap second is read as :59 (the clock cannot represent :60).
        ("2016-12-31T23:59:60Z", 1_483_228_799 * s),
        // The extremes of WallTime (Int64 nanoseconds).
        ("2262-04-11T23:47:16.854775807Z", Int64.max),
        ("1677-09-21T00:12:44Z", -9_223_372_036 * s),
    ]

    @Test("valid timestamps", arguments: valid)
    func parsesValid(text: String, nanoseconds: Int64) throws {
        #expect(try RFC3339.parse(text) == WallTime(nanosecondsSinceEpoch: nanoseconds))
    }

    /// (Years outside 1678…2261 cannot be represented by WallTime; see the crash tests below.)
    @Test("leap years", arguments: [
        ("2024-02-29", true), ("2023-02-29", false), ("2000-02-29", true), ("1900-02-29", false),
        ("2100-02-29", false), ("1700-02-29", false), ("2096-02-29", true), ("1996-02-29", true),
        ("2023-02-28", true), ("2024-02-30", false), ("2024-03-01", true),
    ])
    func leapYears(date: String, valid: Bool) {
        let result = caught { try RFC3339.parse("\(date)T12:00:00Z") }
        if valid {
            #expect(result == nil, "\(date) should be valid: \(result?.message ?? "")")
        } else {
            #expect(result?.code == .badArgument)
            #expect(result?.message.contains("no such date") == true, "\(result?.message ?? "accepted")")
        }
    }

    @Test("days per month", arguments: 1...12)
    func daysPerMonth(month: Int) throws {
        let lengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        let mm = month < 10 ? "0\(month)" : "\(month)"
        let last = lengths[month - 1]
        _ = try RFC3339.parse("2023-\(mm)-\(last)T00:00:00Z")
        expectError(.badArgument, mentions: ["no such date"]) { try RFC3339.parse("2023-\(mm)-\(last + 1)T00:00:00Z") }
        expectError(.badArgument, mentions: ["no such date"]) { try RFC3339.parse("2023-\(mm)-00T00:00:00Z") }
    }

    static let invalid: [(text: String, why: String)] = [
        ("", "too short"),
        ("2026", "unexpected character"),
        ("2026-11-29", "unexpected character"),
        ("2026-11-29T16:00", "unexpected character"),
        ("2026-11-29T16:00:0", "too short"),
        ("2026-11-29T16:00:00", "missing time zone"),
        ("2026-11-29T16:00:00.5", "missing time zone"),
        ("2026-11-29T16:00:00UTC", "missing time zone"),
        ("2026-11-29T16:00:00 Z", "missing time zone"),
        ("2026-11-29T16:00:00,5Z", "missing time zone"),
        ("2026-11-29T16:00:00.Z", "missing fraction digits"),
        ("2026-11-29T16:00:00Zjunk", "unexpected text after the time"),
        ("2026-11-29T16:00:00Z ", "unexpected text after the time"),
        ("2026-11-29T16:00:00+01:00x", "unexpected text after the time"),
        ("2026-11-29T16:00:00ZZ", "unexpected text after the time"),
        ("2026-11-29T16:00:00+0100", "unexpected character"),
        ("2026-11-29T16:00:00+01", "unexpected character"),
        ("2026-11-29T16:00:00+1:00", "expected a digit"),
        ("2026-11-29T16:00:00+24:00", "bad zone offset"),
        ("2026-11-29T16:00:00+01:60", "bad zone offset"),
        ("2026-13-01T00:00:00Z", "no such date"),
        ("2026-00-10T00:00:00Z", "no such date"),
        ("2026-04-31T00:00:00Z", "no such date"),
        ("2026-01-32T00:00:00Z", "no such date"),
        ("2026-01-00T00:00:00Z", "no such date"),
        ("2026-01-01T24:00:00Z", "no such time of day"),
        ("2026-01-01T23:60:00Z", "no such time of day"),
        ("2026-01-01T23:59:61Z", "no such time of day"),
        ("2026-01-01T99:99:99Z", "no such time of day"),
        ("26-01-01T00:00:00Z", "expected a digit"),
        ("2026-1-01T00:00:00Z", "expected a digit"),
        ("2026-01-1T00:00:00Z", "expected a digit"),
        ("2026/01/01T00:00:00Z", "unexpected character at position 5"),
        ("2026-01-01X00:00:00Z", "unexpected character at position 11"),
        ("2026-01-01_00:00:00Z", "unexpected character"),
        ("2026-01-01T00-00-00Z", "unexpected character"),
        (" 2026-01-01T00:00:00Z", "expected a digit at position 1"),
        ("２026-01-01T00:00:00Z", "expected a digit"),
        ("+2026-01-01T00:00:00Z", "expected a digit"),
        ("now", "too short"),
        ("1700000000", "unexpected character"),
    ]

    @Test("invalid timestamps throw bad-argument quoting the input", arguments: invalid)
    func rejectsInvalid(text: String, why: String) {
        expectError(.badArgument, key: .some(nil), mentions: ["invalid time \"\(text)\"", why, "RFC 3339"]) {
            try RFC3339.parse(text)
        }
    }

    /// Dates that are valid RFC 3339 but outside WallTime's Int64-nanosecond range (1677…2262) make
    /// `WallTime(seconds:nanoseconds:)` overflow: the parser must throw, not crash the daemon.
    @Test("a far-future date throws instead of crashing")
    func farFutureDoesNotCrash() async {
        await #expect(processExitsWith: .success) {
            do {
                _ = try RFC3339.parse("9999-12-31T23:59:59Z")
            } catch {
                precondition((error as? TimerdError)?.code == .badArgument)
            }
        }
    }

    @Test("a date just past the Int64 range throws instead of crashing")
    func justPastRangeDoesNotCrash() async {
        await #expect(processExitsWith: .success) {
            do {
                _ = try RFC3339.parse("2262-04-11T23:47:16.9Z")
            } catch {
                precondition((error as? TimerdError)?.code == .badArgument)
            }
        }
    }

    @Test("year 0001 throws instead of crashing")
    func ancientDoesNotCrash() async {
        await #expect(processExitsWith: .success) {
            do {
                _ = try RFC3339.parse("0001-01-01T00:00:00Z")
            } catch {
                precondition((error as? TimerdError)?.code == .badArgument)
            }
        }
    }

    // MARK: - Format

    static let formatted: [(Int64, String)] = [
        (0, "1970-01-01T00:00:00.000000Z"),
        (1_795_968_000 * s, "2026-11-29T16:00:00.000000Z"),
        (1_795_968_000 * s + 250_000_000, "2026-11-29T16:00:00.250000Z"),
        (1_000, "1970-01-01T00:00:00.000001Z"),
        (1_999, "1970-01-01T00:00:00.000001Z"),
        (999, "1970-01-01T00:00:00.000000Z"),
        (-1, "1969-12-31T23:59:59.999999Z"),
        (-1_000, "1969-12-31T23:59:59.999999Z"),
        (-1_001, "1969-12-31T23:59:59.999998Z"),
        (-s, "1969-12-31T23:59:59.000000Z"),
        (-86_400 * s, "1969-12-31T00:00:00.000000Z"),
        (-86_400 * s - 1, "1969-12-30T23:59:59.999999Z"),
        (-2_208_988_800 * s, "1900-01-01T00:00:00.000000Z"),
        (951_782_400 * s, "2000-02-29T00:00:00.000000Z"),
        (1_709_164_800 * s + 86_399 * s, "2024-02-29T23:59:59.000000Z"),
        (4_133_980_799 * s, "2100-12-31T23:59:59.000000Z"),
        (Int64.max, "2262-04-11T23:47:16.854775Z"),
        (Int64.min, "1677-09-21T00:12:43.145224Z"),
    ]

    @Test("format gives UTC with microseconds", arguments: formatted)
    func format(nanoseconds: Int64, text: String) {
        #expect(RFC3339.format(WallTime(nanosecondsSinceEpoch: nanoseconds)) == text)
    }

    @Test("parse(format(t)) is t truncated to the microsecond", arguments: [11, 12, 13] as [UInt64])
    func roundTrip(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        // Stay a second inside the Int64 range: the earliest instants format to a microsecond before it.
        let bound: Int64 = Int64.max - s
        for _ in 0..<5_000 {
            let ns = Int64.random(in: -bound...bound, using: &rng)
            let time = WallTime(nanosecondsSinceEpoch: ns)
            let text = RFC3339.format(time)
            let floorToMicro = ns - ((ns % 1_000) + 1_000) % 1_000
            #expect(try RFC3339.parse(text) == WallTime(nanosecondsSinceEpoch: floorToMicro), "\(ns) -> \(text)")
            // Formatting is stable: the parsed time formats the same.
            #expect(RFC3339.format(try RFC3339.parse(text)) == text)
        }
    }

    @Test("round trip near interesting instants")
    func roundTripEdges() throws {
        let centers: [Int64] = [0, 951_782_400 * s, -2_208_988_800 * s, 4_107_542_400 * s, -62_135_596 * s]
        for center in centers {
            for delta in stride(from: -3_000, through: 3_000, by: 1) {
                let ns = center + Int64(delta) * 1_000
                let text = RFC3339.format(WallTime(nanosecondsSinceEpoch: ns))
                #expect(try RFC3339.parse(text).nanosecondsSinceEpoch == ns, "\(text)")
            }
        }
    }

    @Test("an offset time equals the UTC time it names", arguments: [
        "+00:00", "+01:00", "-05:30", "+05:45", "+14:00", "-12:00", "+23:59", "-23:59",
    ])
    func offsetsMatchUTC(offset: String) throws {
        let sign: Int64 = offset.hasPrefix("-") ? -1 : 1
        let parts = offset.dropFirst().split(separator: ":").map { Int64($0)! }
        let offsetSeconds = sign * (parts[0] * 3_600 + parts[1] * 60)
        let local = try RFC3339.parse("2026-06-15T12:00:00\(offset)")
        let utc = try RFC3339.parse("2026-06-15T12:00:00Z")
        #expect(utc - local == .seconds(offsetSeconds))
    }

    // MARK: - Calendar math

    @Test("daysFromCivil at known dates")
    func knownDays() {
        #expect(RFC3339.daysFromCivil(year: 1970, month: 1, day: 1) == 0)
        #expect(RFC3339.daysFromCivil(year: 1969, month: 12, day: 31) == -1)
        #expect(RFC3339.daysFromCivil(year: 2000, month: 1, day: 1) == 10_957)
        #expect(RFC3339.daysFromCivil(year: 2000, month: 2, day: 29) == 11_016)
        #expect(RFC3339.daysFromCivil(year: 1900, month: 1, day: 1) == -25_567)
        #expect(RFC3339.daysFromCivil(year: 2026, month: 11, day: 29) == 20_786)
        #expect(RFC3339.daysFromCivil(year: 1600, month: 3, day: 1) == -135_080)
        #expect(RFC3339.daysFromCivil(year: 1, month: 1, day: 1) == -719_162)
        #expect(RFC3339.daysFromCivil(year: 9999, month: 12, day: 31) == 2_932_896)
        #expect(RFC3339.civilFromDays(20_786) == (2026, 11, 29))
        #expect(RFC3339.civilFromDays(-1) == (1969, 12, 31))
        #expect(RFC3339.civilFromDays(-719_162) == (1, 1, 1))
    }

    /// Walks every day from 0001-01-01 to 9999-12-31 with an independent calendar and checks both
    /// conversions against it (and so against each other).
    @Test("daysFromCivil and civilFromDays agree with a day-by-day walk")
    func calendarWalk() {
        var year: Int64 = 1, month: Int64 = 1, day: Int64 = 1
        var days = RFC3339.daysFromCivil(year: 1, month: 1, day: 1)
        var mismatches = 0
        var first: String?
        while year <= 9_999 {
            let civil = RFC3339.civilFromDays(days)
            let back = RFC3339.daysFromCivil(year: year, month: month, day: day)
            if civil != (year, month, day) || back != days {
                mismatches += 1
                if first == nil { first = "\(year)-\(month)-\(day): days \(days) civil \(civil) back \(back)" }
            }
            // Advance one day with an independent calendar.
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
            let length: Int64 = month == 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].contains(month) ? 30 : 31
            day += 1
            if day > length { day = 1; month += 1 }
            if month > 12 { month = 1; year += 1 }
            days += 1
        }
        #expect(mismatches == 0, "first mismatch: \(first ?? "")")
        #expect(days - 1 == RFC3339.daysFromCivil(year: 9_999, month: 12, day: 31))
    }

    @Test("civilFromDays inverts daysFromCivil for negative years too")
    func negativeYears() {
        for days in stride(from: Int64(-1_200_000), through: -719_000, by: 1) {
            let (y, m, d) = RFC3339.civilFromDays(days)
            if RFC3339.daysFromCivil(year: y, month: m, day: d) != days {
                Issue.record("days \(days) -> \(y)-\(m)-\(d)")
                return
            }
        }
    }

    @Test("isLeap and daysInMonth", arguments: [
        (1900, false), (2000, true), (2023, false), (2024, true), (2100, false), (1600, true), (4, true), (0, true),
    ] as [(Int64, Bool)])
    func leap(year: Int64, leap: Bool) {
        #expect(RFC3339.isLeap(year) == leap)
        #expect(RFC3339.daysInMonth(year: year, month: 2) == (leap ? 29 : 28))
    }

    // MARK: - WallTime

    @Test("WallTime arithmetic and ordering")
    func wallTime() {
        let t = WallTime(seconds: 10, nanoseconds: 5)
        #expect(t.nanosecondsSinceEpoch == 10_000_000_005)
        #expect(WallTime(seconds: -1).nanosecondsSinceEpoch == -1_000_000_000)
        #expect(t + .milliseconds(1) == WallTime(nanosecondsSinceEpoch: 10_001_000_005))
        #expect(t + .seconds(-10) == WallTime(nanosecondsSinceEpoch: 5))
        #expect(t - WallTime(seconds: 4) == .nanoseconds(6_000_000_005))
        #expect(WallTime(seconds: 4) - t == .nanoseconds(-6_000_000_005))
        #expect(WallTime(seconds: 1) < WallTime(seconds: 2))
        #expect(WallTime(seconds: -2) < WallTime(seconds: -1))
        #expect(!(t < t))
        #expect([WallTime(seconds: 3), WallTime(seconds: 1), WallTime(seconds: 2)].sorted().map(\.nanosecondsSinceEpoch)
            == [1, 2, 3].map { $0 * nsPerSecond })
        #expect(Set([t, WallTime(nanosecondsSinceEpoch: 10_000_000_005)]).count == 1)
    }
}
