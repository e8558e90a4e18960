/// Reads and writes durations the way operators type them: `250ms`, `5s`, `1m30s`, `2h`, `1d`, and
/// systemd's spellings (`5min`, `1h 30min`, `2 weeks`). A bare number means seconds, as in systemd.
public enum DurationText {
    /// Units by suffix, in nanoseconds. `m` is minutes (as in systemd), never months.
    private static let units: [String: Int64] = {
        let ns: Int64 = 1, us = 1_000 * ns, ms = 1_000 * us, s = 1_000 * ms, m = 60 * s, h = 60 * m, d = 24 * h
        let w = 7 * d
        var table: [String: Int64] = [:]
        for name in ["ns", "nsec"] { table[name] = ns }
        for name in ["us", "usec", "µs"] { table[name] = us }
        for name in ["ms", "msec"] { table[name] = ms }
        for name in ["s", "sec", "secs", "second", "seconds"] { table[name] = s }
        for name in ["m", "min", "mins", "minute", "minutes"] { table[name] = m }
        for name in ["h", "hr", "hrs", "hour", "hours"] { table[name] = h }
        for name in ["d", "day", "days"] { table[name] = d }
        for name in ["w", "week", "weeks"] { table[name] = w }
        return table
    }()

    /// The longest duration accepted anywhere (100 years), so arithmetic on deadlines cannot overflow.
    public static let maximum = Duration.seconds(100 * 366 * 86_400)

    /// A letter of a unit: ASCII letters without a look at the scalar's Unicode properties (which was
    /// most of parsing `1h`), any other alphabetic scalar (`µ` included).
    private static func isUnitLetter(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.isASCII else { return scalar.properties.isAlphabetic || scalar == "µ" }
        return (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(UInt8(scalar.value) | 0x20)
    }

    /// Parses `text`. Throws `bad-argument` with a message that quotes the input and says what was expected.
    public static func parse(_ text: String) throws(TimerdError) -> Duration {
        let scalars = Array(text.unicodeScalars)
        var index = 0
        var total: Int64 = 0
        var sawComponent = false
        func fail(_ why: String) -> TimerdError {
            TimerdError(.badArgument, "invalid duration \"\(text)\": \(why) (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)")
        }
        func skipSpaces() { while index < scalars.count, scalars[index] == " " || scalars[index] == "\t" { index += 1 } }
        skipSpaces()
        while index < scalars.count {
            // Number: digits with an optional fraction.
            var whole: Int64 = 0
            var fraction: [UInt8] = []
            var digits = 0
            while index < scalars.count, let digit = scalars[index].asciiDigit {
                guard whole <= (Int64.max - 9) / 10 else { throw fail("number too large") }
                whole = whole * 10 + Int64(digit)
                digits += 1
                index += 1
            }
            if index < scalars.count, scalars[index] == "." {
                index += 1
                while index < scalars.count, let digit = scalars[index].asciiDigit {
                    if fraction.count < 9 { fraction.append(digit) }
                    digits += 1
                    index += 1
                }
            }
            guard digits > 0 else { throw fail("expected a number") }
            skipSpaces()
            var unit = ""
            while index < scalars.count, isUnitLetter(scalars[index]) {
                unit.unicodeScalars.append(scalars[index])
                index += 1
            }
            let perUnit: Int64
            if unit.isEmpty {
                // A bare number is seconds, but only as the whole text ("90"), not as a trailing part ("1m 30").
                guard !sawComponent else { throw fail("missing unit after a number") }
                perUnit = units["s"]!
            } else {
                guard let known = units[unit.lowercased()] ?? units[unit] else { throw fail("unknown unit \"\(unit)\"") }
                perUnit = known
            }
            let (wholeNs, overflow1) = whole.multipliedReportingOverflow(by: perUnit)
            guard !overflow1 else { throw fail("too large") }
            var fractionNs: Int64 = 0
            if !fraction.isEmpty {
                var scale: Int64 = 1
                var value: Int64 = 0
                for digit in fraction { value = value * 10 + Int64(digit); scale *= 10 }
                // perUnit * value / scale without overflow: perUnit ≤ 6.05e14 and value < 1e9 could overflow.
                fractionNs = Int64((Double(perUnit) * Double(value) / Double(scale)).rounded())
            }
            let (component, overflow2) = wholeNs.addingReportingOverflow(fractionNs)
            let (sum, overflow3) = total.addingReportingOverflow(component)
            guard !overflow2, !overflow3 else { throw fail("too large") }
            total = sum
            sawComponent = true
            skipSpaces()
            if unit.isEmpty, index < scalars.count { throw fail("missing unit after a number") }
        }
        guard sawComponent else { throw fail("empty") }
        let duration = Duration.nanoseconds(total)
        guard duration <= maximum else { throw fail("longer than 100 years") }
        return duration
    }

    /// Formats `duration` compactly and exactly (`1m30s`, `250ms`, `1d2h`), so `parse(format(d)) == d`.
    public static func format(_ duration: Duration) -> String {
        var ns = duration.nanoseconds
        guard ns > 0 else { return ns == 0 ? "0s" : "-" + format(.nanoseconds(-ns)) }
        let steps: [(String, Int64)] = [
            ("d", 86_400_000_000_000), ("h", 3_600_000_000_000), ("m", 60_000_000_000), ("s", 1_000_000_000),
            ("ms", 1_000_000), ("us", 1_000), ("ns", 1),
        ]
        var text = ""
        for (suffix, size) in steps where ns >= size {
            text += "\(ns / size)\(suffix)"
            ns %= size
        }
        return text
    }
}

extension Duration {
    /// The whole duration in nanoseconds (saturating; durations in timerd are capped at 100 years).
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow1) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        guard !overflow1, !overflow2 else { return seconds < 0 ? .min : .max }
        return total
    }

    /// The duration in milliseconds as a Double, for display and JSON.
    public var milliseconds: Double { Double(nanoseconds) / 1_000_000 }
}

extension Unicode.Scalar {
    fileprivate var asciiDigit: UInt8? {
        value >= 48 && value <= 57 ? UInt8(value - 48) : nil
    }
}
