import Testing
@testable import TimerdCore

@Suite("DurationText")
struct DurationTextTests {
    // MARK: - Units

    static let unitSpellings: [(spellings: [String], nanoseconds: Int64)] = [
        (["ns", "nsec"], 1),
        (["us", "usec", "µs"], 1_000),
        (["ms", "msec"], 1_000_000),
        (["s", "sec", "secs", "second", "seconds"], nsPerSecond),
        (["m", "min", "mins", "minute", "minutes"], nsPerMinute),
        (["h", "hr", "hrs", "hour", "hours"], nsPerHour),
        (["d", "day", "days"], nsPerDay),
        (["w", "week", "weeks"], nsPerWeek),
    ]

    static let everySpelling: [(String, Int64)] = unitSpellings.flatMap { row in row.spellings.map { ($0, row.nanoseconds) } }

    @Test("every unit spelling, glued and spaced", arguments: everySpelling)
    func unitSpelling(unit: String, size: Int64) throws {
        #expect(try DurationText.parse("1\(unit)") == .ns(size))
        #expect(try DurationText.parse("7\(unit)") == .ns(7 * size))
        #expect(try DurationText.parse("7 \(unit)") == .ns(7 * size))
        #expect(try DurationText.parse("7\t\(unit)") == .ns(7 * size))
        #expect(try DurationText.parse("  3\(unit)  ") == .ns(3 * size))
    }

    @Test("unit spellings are case-insensitive", arguments: [
        ("5S", 5 * nsPerSecond), ("5MS", 5_000_000), ("5Min", 5 * nsPerMinute), ("2H", 2 * nsPerHour),
        ("1D", nsPerDay), ("1W", nsPerWeek), ("3Seconds", 3 * nsPerSecond), ("4US", 4_000), ("4NS", 4),
    ])
    func unitCase(text: String, nanoseconds: Int64) throws {
        #expect(try DurationText.parse(text) == .ns(nanoseconds))
    }

    @Test("m is minutes, never months or milliseconds")
    func mIsMinutes() throws {
        #expect(try DurationText.parse("1m") == .seconds(60))
        #expect(try DurationText.parse("1M") == .seconds(60))
    }

    // MARK: - Accepted forms

    static let valid: [(String, Int64)] = [
        ("250ms", 250_000_000),
        ("5s", 5 * nsPerSecond),
        ("1m30s", 90 * nsPerSecond),
        ("1m 30s", 90 * nsPerSecond),
        ("1m\t30s", 90 * nsPerSecond),
        ("2h", 2 * nsPerHour),
        ("1d", nsPerDay),
        ("5min", 5 * nsPerMinute),
        ("1h 30min", 90 * nsPerMinute),
        ("1h30min", 90 * nsPerMinute),
        ("2 weeks", 2 * nsPerWeek),
        ("1 hour 2 minutes 3 seconds", nsPerHour + 2 * nsPerMinute + 3 * nsPerSecond),
        ("1d2h3m4s5ms6us7ns", nsPerDay + 2 * nsPerHour + 3 * nsPerMinute + 4 * nsPerSecond + 5_000_000 + 6_000 + 7),
        ("1w1d", 8 * nsPerDay),
        ("1s1s", 2 * nsPerSecond),  // repeated units add up
        ("30s 1m", 90 * nsPerSecond),  // any order
        // Bare numbers are seconds.
        ("0", 0),
        ("90", 90 * nsPerSecond),
        (" 90 ", 90 * nsPerSecond),
        ("007", 7 * nsPerSecond),
        ("1.5", 1_500_000_000),
        // Zero in any unit.
        ("0s", 0),
        ("0ms", 0),
        ("0d", 0),
        // Fractions.
        ("1.5h", 90 * nsPerMinute),
        ("1.5 h", 90 * nsPerMinute),
        ("0.5s", 500_000_000),
        (".5s", 500_000_000),
        ("5.s", 5 * nsPerSecond),
        ("0.25s", 250_000_000),
        ("2.5d", 60 * nsPerHour),
        ("1.5ms", 1_500_000),
        ("0.001s", 1_000_000),
        ("0.000000001s", 1),
        ("1.000000001s", 1_000_000_001),
        ("0.1m", 6 * nsPerSecond),
        ("1.5h 30min", 2 * nsPerHour),
        ("0.5w", 84 * nsPerHour),
        // More than nine fraction digits: extra digits are dropped.
        ("1.0000000019s", 1_000_000_001),
        ("0.5ns", 1),  // rounds half up to a whole nanosecond
        ("0.4ns", 0),
    ]

    @Test("valid durations", arguments: valid)
    func parsesValid(text: String, nanoseconds: Int64) throws {
        #expect(try DurationText.parse(text) == .ns(nanoseconds))
    }

    @Test("the 100-year maximum is accepted exactly")
    func maximumAccepted() throws {
        #expect(DurationText.maximum == .seconds(100 * 366 * 86_400))
        #expect(try DurationText.parse("36600d") == DurationText.maximum)
        #expect(try DurationText.parse("\(100 * 366 * 86_400)") == DurationText.maximum)
        #expect(try DurationText.parse("36599d 23h 59m 59s 999ms 999us 999ns") == DurationText.maximum - .nanoseconds(1))
    }

    // MARK: - Errors

    static let invalid: [(text: String, why: String)] = [
        ("", "empty"),
        ("   ", "empty"),
        ("5x", "unknown unit \"x\""),
        ("5 parsecs", "unknown unit \"parsecs\""),
        ("5mo", "unknown unit \"mo\""),
        ("5μs", "unknown unit"),  // Greek mu (U+03BC) is not the micro sign (U+00B5)
        ("1m 30", "missing unit after a number"),
        ("1m30", "missing unit after a number"),
        ("90 5", "missing unit after a number"),
        ("90 5s", "missing unit after a number"),
        ("-5s", "expected a number"),
        ("+5s", "expected a number"),
        ("s", "expected a number"),
        ("ms", "expected a number"),
        (".", "expected a number"),
        ("5s,", "expected a number"),
        ("5s -1s", "expected a number"),
        ("1_000s", "missing unit after a number"),
        ("5s!", "expected a number"),
        ("１s", "expected a number"),  // fullwidth digit
        ("99999999999999999999", "number too large"),
        ("99999999999999999999ns", "number too large"),
        ("9999999999999999d", "too large"),
        ("9223372036854775807ns 1ns", "too large"),
        ("36601d", "longer than 100 years"),
        ("36600d 1ns", "longer than 100 years"),
        ("5229w", "longer than 100 years"),
        ("200y", "unknown unit \"y\""),
        ("9223372036s", "longer than 100 years"),
    ]

    @Test("invalid durations throw bad-argument quoting the input", arguments: invalid)
    func rejectsInvalid(text: String, why: String) {
        expectError(.badArgument, key: .some(nil), mentions: ["\"\(text)\"", why, "examples:"]) {
            try DurationText.parse(text)
        }
    }

    /// `whole * unit` fits in Int64 but adding the fraction does not: `wholeNs + fractionNs` uses the
    /// trapping `+`, so the parser crashes instead of throwing "too large".
    @Test("a fraction pushing the total past Int64.max throws instead of crashing")
    func fractionOverflowDoesNotCrash() async {
        await #expect(processExitsWith: .success) {
            do {
                _ = try DurationText.parse("9223372036.9s")
            } catch {
                precondition((error as? TimerdError)?.code == .badArgument)
            }
        }
    }

    // MARK: - Fractions are exact

    /// Compares fractional parsing against exact integer arithmetic (rounded half up).
    @Test("fractions in every unit match exact arithmetic", arguments: unitSpellings.map(\.nanoseconds))
    func fractionsExact(size: Int64) throws {
        var rng = SeededGenerator(seed: UInt64(size))
        for _ in 0..<2_000 {
            let digitCount = Int.random(in: 1...9, using: &rng)
            var fractionText = ""
            for _ in 0..<digitCount { fractionText += String(Int.random(in: 0...9, using: &rng)) }
            let whole = Int64.random(in: 0...20, using: &rng)
            let unit = Self.unitSpellings.first { $0.nanoseconds == size }!.spellings[0]
            let text = "\(whole).\(fractionText)\(unit)"
            var scale: Int128 = 1
            for _ in 0..<digitCount { scale *= 10 }
            let numerator = Int128(Int64(fractionText)!) * Int128(size)
            let exact = Int64(whole) * size + Int64((numerator * 2 + scale) / (scale * 2))
            let parsed = try DurationText.parse(text).nanoseconds
            // Within one nanosecond of exact (the parser goes through Double for the fraction).
            #expect(abs(parsed - exact) <= 1, "\(text): got \(parsed), exact \(exact)")
        }
    }

    // MARK: - Format

    static let formatted: [(Int64, String)] = [
        (0, "0s"),
        (1, "1ns"),
        (999, "999ns"),
        (1_000, "1us"),
        (1_001, "1us1ns"),
        (250_000_000, "250ms"),
        (nsPerSecond, "1s"),
        (1_500_000_000, "1s500ms"),
        (5 * nsPerSecond, "5s"),
        (59 * nsPerSecond, "59s"),
        (60 * nsPerSecond, "1m"),
        (90 * nsPerSecond, "1m30s"),
        (nsPerHour, "1h"),
        (nsPerHour + nsPerSecond, "1h1s"),
        (90 * nsPerMinute, "1h30m"),
        (nsPerDay, "1d"),
        (nsPerDay + 2 * nsPerHour, "1d2h"),
        (nsPerWeek, "7d"),
        (nsPerDay + 2 * nsPerHour + 3 * nsPerMinute + 4 * nsPerSecond + 5_000_000 + 6_000 + 7, "1d2h3m4s5ms6us7ns"),
        (36_600 * nsPerDay, "36600d"),
        (-1_500_000_000, "-1s500ms"),
        (-1, "-1ns"),
    ]

    @Test("format", arguments: formatted)
    func format(nanoseconds: Int64, text: String) {
        #expect(DurationText.format(.ns(nanoseconds)) == text)
    }

    @Test("format accepts durations built from seconds and milliseconds")
    func formatOtherConstructors() {
        #expect(DurationText.format(.seconds(90)) == "1m30s")
        #expect(DurationText.format(.milliseconds(10)) == "10ms")
        #expect(DurationText.format(.microseconds(1_500)) == "1ms500us")
        #expect(DurationText.format(Limits.defaultKillGrace) == "5s")
    }

    @Test("format output has no spaces and only known units")
    func formatShape() {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<1_000 {
            let text = DurationText.format(.ns(Int64.random(in: 1...DurationText.maximum.nanoseconds, using: &rng)))
            #expect(!text.contains(" "))
            #expect(text.allSatisfy { $0.isASCII && ($0.isNumber || "dhmsun".contains($0)) }, "\(text)")
        }
    }

    // MARK: - Round trip

    @Test("parse(format(d)) == d for fixed values")
    func roundTripFixed() throws {
        let values: [Int64] = Self.formatted.map(\.0).filter { $0 >= 0 } + [
            DurationText.maximum.nanoseconds, DurationText.maximum.nanoseconds - 1, nsPerWeek * 5_228,
            123_456_789, 86_399_999_999_999,
        ]
        for value in values {
            let text = DurationText.format(.ns(value))
            #expect(try DurationText.parse(text) == .ns(value), "\(value) -> \(text)")
        }
    }

    @Test("parse(format(d)) == d for random values", arguments: [1, 2, 3, 4] as [UInt64])
    func roundTripRandom(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        let maximum = DurationText.maximum.nanoseconds
        for _ in 0..<5_000 {
            // Mix magnitudes so small values and values with few units are covered too.
            let magnitude = Int64.random(in: 0...18, using: &rng)
            var bound: Int64 = 1
            for _ in 0..<magnitude { bound = bound < maximum / 10 ? bound * 10 : maximum }
            let value = Int64.random(in: 0...min(bound, maximum), using: &rng)
            let text = DurationText.format(.ns(value))
            let parsed = try DurationText.parse(text)
            #expect(parsed == .ns(value), "\(value) -> \(text) -> \(parsed)")
        }
    }

    @Test("round trip of whole units (values with zero components in the middle)")
    func roundTripSparse() throws {
        var rng = SeededGenerator(seed: 99)
        let sizes: [Int64] = [1, 1_000, 1_000_000, nsPerSecond, nsPerMinute, nsPerHour, nsPerDay]
        for _ in 0..<2_000 {
            var value: Int64 = 0
            for size in sizes where Bool.random(using: &rng) { value += size * Int64.random(in: 1...9, using: &rng) }
            #expect(try DurationText.parse(DurationText.format(.ns(value))) == .ns(value))
        }
    }

    // MARK: - Duration helpers

    @Test("Duration.nanoseconds and milliseconds")
    func durationHelpers() {
        #expect(Duration.seconds(2).nanoseconds == 2_000_000_000)
        #expect(Duration.milliseconds(1_500).nanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(7).nanoseconds == 7)
        #expect(Duration.nanoseconds(-1_500_000_000).nanoseconds == -1_500_000_000)
        #expect(Duration.zero.nanoseconds == 0)
        #expect(DurationText.maximum.nanoseconds == 100 * 366 * 86_400 * nsPerSecond)
        #expect(Duration.milliseconds(250).milliseconds == 250)
        #expect(Duration.microseconds(1_500).milliseconds == 1.5)
        #expect(Duration.nanoseconds(Int64.max).nanoseconds == Int64.max)
        #expect(Duration.nanoseconds(Int64.min).nanoseconds == Int64.min)
    }

    /// `Duration.nanoseconds` is documented as saturating, but `seconds * 1_000_000_000` traps once the
    /// duration exceeds ~292 years.
    @Test("Duration.nanoseconds saturates as documented instead of crashing")
    func nanosecondsSaturates() async {
        await #expect(processExitsWith: .success) {
            precondition(Duration.seconds(10_000_000_000).nanoseconds == Int64.max)
            precondition(Duration.seconds(-10_000_000_000).nanoseconds == Int64.min)
        }
    }
}
