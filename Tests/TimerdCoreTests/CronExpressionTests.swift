import Testing
@testable import TimerdCore

/// Local seconds of a civil time written `2025-01-31T09:30:00` (no zone: local times are encoded as UTC).
private func cronLocal(_ text: String) -> Int64 {
    try! RFC3339.parse(text + "Z").nanosecondsSinceEpoch / nsPerSecond
}

/// `2025-01-31T09:30:00` for local seconds, or "nil".
private func cronShow(_ seconds: Int64?) -> String {
    guard let seconds else { return "nil" }
    return String(RFC3339.format(WallTime(seconds: seconds)).prefix(19))
}

private func cronParse(_ text: String) -> CronExpression { try! CronExpression.parse(text) }

/// The next `count` fire times of `expression` after `base`, chained, as text ("nil" once there is none).
private func cronFires(_ expression: String, after base: String, count: Int) -> [String] {
    let parsed = cronParse(expression)
    var times: [String] = []
    var current: Int64? = cronLocal(base)
    for _ in 0..<count {
        current = current.flatMap { parsed.next(after: $0) }
        times.append(cronShow(current))
        if current == nil { break }
    }
    return times
}

@Suite("CronExpression")
struct CronExpressionTests {
    // MARK: - Fire times

    /// (expression, base, the next fire times after base).
    static let schedules: [(String, String, [String])] = [
        // Macros.
        ("@yearly", "2025-06-15T12:00:00", ["2026-01-01T00:00:00", "2027-01-01T00:00:00"]),
        ("@annually", "2025-12-31T23:59:59", ["2026-01-01T00:00:00", "2027-01-01T00:00:00"]),
        ("@monthly", "2025-01-31T00:00:00", ["2025-02-01T00:00:00", "2025-03-01T00:00:00"]),
        ("@weekly", "2025-01-01T00:00:00", ["2025-01-05T00:00:00", "2025-01-12T00:00:00"]),
        ("@daily", "2025-01-01T00:00:00", ["2025-01-02T00:00:00", "2025-01-03T00:00:00"]),
        ("@midnight", "2024-12-31T23:59:59", ["2025-01-01T00:00:00", "2025-01-02T00:00:00"]),
        ("@hourly", "2025-01-01T10:00:00", ["2025-01-01T11:00:00", "2025-01-01T12:00:00"]),
        // Numbers; "strictly after" the base.
        ("30 14 * * *", "2025-01-01T14:30:00", ["2025-01-02T14:30:00"]),
        ("30 14 * * *", "2025-01-01T14:29:59", ["2025-01-01T14:30:00", "2025-01-02T14:30:00"]),
        ("30 14 * * *", "2025-01-01T14:30:01", ["2025-01-02T14:30:00"]),
        ("* * * * *", "2025-01-01T10:00:30", ["2025-01-01T10:01:00", "2025-01-01T10:02:00"]),
        ("* * * * *", "2025-12-31T23:59:00", ["2026-01-01T00:00:00"]),
        // Steps.
        ("*/15 * * * *", "2025-01-01T10:07:00",
         ["2025-01-01T10:15:00", "2025-01-01T10:30:00", "2025-01-01T10:45:00", "2025-01-01T11:00:00"]),
        ("5-10/2 * * * *", "2025-01-01T10:00:00",
         ["2025-01-01T10:05:00", "2025-01-01T10:07:00", "2025-01-01T10:09:00", "2025-01-01T11:05:00"]),
        ("50/5 * * * *", "2025-01-01T10:00:00", ["2025-01-01T10:50:00", "2025-01-01T10:55:00", "2025-01-01T11:50:00"]),
        ("0 */7 * * *", "2025-01-01T00:00:00", ["2025-01-01T07:00:00", "2025-01-01T14:00:00", "2025-01-01T21:00:00",
                                                 "2025-01-02T00:00:00"]),
        ("*/90 * * * *", "2025-01-01T10:00:00", ["2025-01-01T11:00:00"]),
        ("0 0 */10 * *", "2025-01-25T00:00:00", ["2025-01-31T00:00:00", "2025-02-01T00:00:00", "2025-02-11T00:00:00"]),
        // Lists.
        ("0,30 9-10 * * *", "2025-01-01T09:00:00",
         ["2025-01-01T09:30:00", "2025-01-01T10:00:00", "2025-01-01T10:30:00", "2025-01-02T09:00:00"]),
        ("0 0 1,15 * *", "2025-01-01T00:00:00", ["2025-01-15T00:00:00", "2025-02-01T00:00:00"]),
        ("1,5-6,40/10 * * * *", "2025-01-01T10:00:00",
         ["2025-01-01T10:01:00", "2025-01-01T10:05:00", "2025-01-01T10:06:00", "2025-01-01T10:40:00",
          "2025-01-01T10:50:00", "2025-01-01T11:01:00"]),
        ("1,* * * * *", "2025-01-01T10:00:00", ["2025-01-01T10:01:00", "2025-01-01T10:02:00"]),
        // Month names, any case, also in ranges and lists.
        ("0 12 1 jan,jul *", "2025-02-01T00:00:00", ["2025-07-01T12:00:00", "2026-01-01T12:00:00"]),
        ("0 0 1 JAN-Mar *", "2025-02-15T00:00:00", ["2025-03-01T00:00:00", "2026-01-01T00:00:00"]),
        ("0 0 1 feb/4 *", "2025-01-01T00:00:00", ["2025-02-01T00:00:00", "2025-06-01T00:00:00", "2025-10-01T00:00:00",
                                                  "2026-02-01T00:00:00"]),
        ("0 0 1 11-dec *", "2025-01-01T00:00:00", ["2025-11-01T00:00:00", "2025-12-01T00:00:00"]),
        // Weekdays (2025-01-03 is a Friday, 2025-01-05 a Sunday).
        ("0 9 * * mon-fri", "2025-01-03T09:00:00", ["2025-01-06T09:00:00", "2025-01-07T09:00:00"]),
        ("0 9 * * 1-5", "2025-01-03T09:00:00", ["2025-01-06T09:00:00", "2025-01-07T09:00:00"]),
        ("0 9 * * Mon,WED", "2025-01-01T09:00:00", ["2025-01-06T09:00:00", "2025-01-08T09:00:00"]),
        ("0 0 * * 0", "2025-01-01T00:00:00", ["2025-01-05T00:00:00", "2025-01-12T00:00:00"]),
        ("0 0 * * 7", "2025-01-01T00:00:00", ["2025-01-05T00:00:00", "2025-01-12T00:00:00"]),
        ("0 0 * * sun", "2025-01-01T00:00:00", ["2025-01-05T00:00:00", "2025-01-12T00:00:00"]),
        ("0 0 * * 5-7", "2025-01-01T00:00:00", ["2025-01-03T00:00:00", "2025-01-04T00:00:00", "2025-01-05T00:00:00",
                                                "2025-01-10T00:00:00"]),
        ("0 0 * * fri-7", "2025-01-01T00:00:00", ["2025-01-03T00:00:00", "2025-01-04T00:00:00", "2025-01-05T00:00:00"]),
        ("0 0 * * 0-7", "2025-01-01T00:00:00", ["2025-01-02T00:00:00", "2025-01-03T00:00:00"]),
        ("0 0 * * */2", "2025-01-01T00:00:00", ["2025-01-02T00:00:00", "2025-01-04T00:00:00", "2025-01-05T00:00:00",
                                                "2025-01-07T00:00:00"]),
        // a/n in day-of-week runs to 7 (Sunday): 1/2 is Monday, Wednesday, Friday and Sunday.
        ("0 0 * * 1/2", "2025-01-01T00:00:00", ["2025-01-03T00:00:00", "2025-01-05T00:00:00", "2025-01-06T00:00:00",
                                                "2025-01-08T00:00:00"]),
        ("0 0 * * 7/3", "2025-01-01T00:00:00", ["2025-01-05T00:00:00", "2025-01-12T00:00:00"]),
        // Both day fields restricted: a day matching either fires.
        ("0 0 13 * fri", "2025-01-01T00:00:00", ["2025-01-03T00:00:00", "2025-01-10T00:00:00", "2025-01-13T00:00:00",
                                                 "2025-01-17T00:00:00"]),
        ("0 0 1-31 * mon", "2025-01-01T00:00:00", ["2025-01-02T00:00:00", "2025-01-03T00:00:00"]),
        ("0 0 1,* * mon", "2025-01-01T00:00:00", ["2025-01-02T00:00:00", "2025-01-03T00:00:00"]),
        ("0 0 30 2 mon", "2025-01-01T00:00:00", ["2025-02-03T00:00:00", "2025-02-10T00:00:00"]),
        ("0 0 31 4 mon", "2025-01-01T00:00:00", ["2025-04-07T00:00:00", "2025-04-14T00:00:00"]),
        // One of them starts with `*` (also `*/n`): both must match.
        ("0 0 13 * */2", "2025-01-01T00:00:00", ["2025-02-13T00:00:00", "2025-03-13T00:00:00", "2025-04-13T00:00:00",
                                                 "2025-05-13T00:00:00"]),
        ("0 0 */10 * mon", "2025-01-01T00:00:00", ["2025-03-31T00:00:00", "2025-04-21T00:00:00"]),
        ("0 0 13 * *", "2025-01-01T00:00:00", ["2025-01-13T00:00:00", "2025-02-13T00:00:00"]),
        ("0 0 * * fri", "2025-01-01T00:00:00", ["2025-01-03T00:00:00", "2025-01-10T00:00:00"]),
        // Six fields: seconds first.
        ("*/20 * * * * *", "2025-01-01T10:00:05", ["2025-01-01T10:00:20", "2025-01-01T10:00:40", "2025-01-01T10:01:00"]),
        ("30 0 9 * * *", "2025-01-01T09:00:30", ["2025-01-02T09:00:30"]),
        ("30 0 9 * * *", "2025-01-01T09:00:29", ["2025-01-01T09:00:30"]),
        ("0,15 * * * * *", "2025-01-01T23:59:50", ["2025-01-02T00:00:00", "2025-01-02T00:00:15"]),
        ("* * * * * *", "2025-12-31T23:59:59", ["2026-01-01T00:00:00", "2026-01-01T00:00:01"]),
        ("59 59 23 31 12 *", "2025-01-01T00:00:00", ["2025-12-31T23:59:59", "2026-12-31T23:59:59"]),
        // Leap days and short months.
        ("0 0 29 2 *", "2025-01-01T00:00:00", ["2028-02-29T00:00:00", "2032-02-29T00:00:00"]),
        ("0 0 29 2 *", "2096-03-01T00:00:00", ["2104-02-29T00:00:00"]),
        ("0 0 29 2 *", "1999-01-01T00:00:00", ["2000-02-29T00:00:00", "2004-02-29T00:00:00"]),
        ("0 0 31 * *", "2025-01-31T00:00:00", ["2025-03-31T00:00:00", "2025-05-31T00:00:00", "2025-07-31T00:00:00",
                                               "2025-08-31T00:00:00", "2025-10-31T00:00:00", "2025-12-31T00:00:00",
                                               "2026-01-31T00:00:00"]),
        ("0 0 30 * *", "2025-01-30T00:00:00", ["2025-03-30T00:00:00", "2025-04-30T00:00:00"]),
        ("0 0 28-31 * *", "2025-02-27T00:00:00", ["2025-02-28T00:00:00", "2025-03-28T00:00:00"]),
        // Never.
        ("0 0 30 2 *", "2025-01-01T00:00:00", ["nil"]),
        ("0 0 31 4 *", "2025-01-01T00:00:00", ["nil"]),
        ("0 0 31 2,4,6,9,11 *", "2025-01-01T00:00:00", ["nil"]),
        ("0 0 30,31 feb */2", "2025-01-01T00:00:00", ["nil"]),
        // Before 1970 (negative local seconds), and across 1970.
        ("0 0 1 1 *", "1960-06-01T00:00:00", ["1961-01-01T00:00:00", "1962-01-01T00:00:00"]),
        ("0 0 * * mon", "1969-12-25T00:00:00", ["1969-12-29T00:00:00", "1970-01-05T00:00:00"]),
        ("*/30 * * * * *", "1969-12-31T23:59:31", ["1970-01-01T00:00:00", "1970-01-01T00:00:30"]),
    ]

    @Test("fire times", arguments: schedules)
    func fireTimes(expression: String, base: String, expected: [String]) {
        #expect(cronFires(expression, after: base, count: expected.count) == expected, "\(expression) after \(base)")
    }

    @Test("every fire time matches, and nothing between two fire times does")
    func matchesAgreesWithNext() {
        for (expression, base, _) in Self.schedules {
            let parsed = cronParse(expression)
            var previous = cronLocal(base)
            for _ in 0..<4 {
                guard let next = parsed.next(after: previous) else { break }
                #expect(parsed.matches(localSeconds: next), "\(expression) at \(cronShow(next))")
                // Sample the gap (every second when short, else 500 points).
                let gap = next - previous - 1
                let stride = max(1, gap / 500)
                var probe = previous + 1
                while probe < next {
                    #expect(!parsed.matches(localSeconds: probe), "\(expression) matched \(cronShow(probe)) before \(cronShow(next))")
                    probe += stride
                }
                previous = next
            }
        }
    }

    @Test("matches at second granularity")
    func matchesSeconds() {
        let weekdays = cronParse("0 9 * * 1-5")
        #expect(weekdays.matches(localSeconds: cronLocal("2025-01-06T09:00:00")))
        #expect(!weekdays.matches(localSeconds: cronLocal("2025-01-06T09:00:01")))
        #expect(!weekdays.matches(localSeconds: cronLocal("2025-01-06T09:01:00")))
        #expect(!weekdays.matches(localSeconds: cronLocal("2025-01-04T09:00:00")))  // Saturday
        let seconds = cronParse("15,45 * * * * *")
        #expect(seconds.matches(localSeconds: cronLocal("2025-01-06T09:00:15")))
        #expect(seconds.matches(localSeconds: cronLocal("2025-01-06T09:17:45")))
        #expect(!seconds.matches(localSeconds: cronLocal("2025-01-06T09:00:00")))
        #expect(cronParse("0 0 1 1 *").matches(localSeconds: cronLocal("1900-01-01T00:00:00")))
        #expect(cronParse("59 23 31 12 *").matches(localSeconds: -60))
        #expect(cronParse("0 0 * * thu").matches(localSeconds: 0))
        #expect(!cronParse("0 0 * * wed").matches(localSeconds: 0))
    }

    // MARK: - @reboot, edges, limits

    @Test("@reboot has no calendar times")
    func reboot() throws {
        let expression = try CronExpression.parse("@reboot")
        #expect(expression.isReboot)
        #expect(!expression.hasFixedTime)
        #expect(expression.next(after: 0) == nil)
        #expect(!expression.matches(localSeconds: 0))
        #expect(!(try CronExpression.parse("@daily")).isReboot)
        #expect(!(try CronExpression.parse("* * * * *")).isReboot)
    }

    @Test("text is kept as given; whitespace around and between fields is fine")
    func whitespace() throws {
        let spaced = try CronExpression.parse("  0\t9   * *\t 1-5  ")
        #expect(spaced.text == "  0\t9   * *\t 1-5  ")
        let plain = cronParse("0 9 * * 1-5")
        #expect(spaced.next(after: cronLocal("2025-01-03T10:00:00")) == plain.next(after: cronLocal("2025-01-03T10:00:00")))
        #expect(spaced != plain)  // the text differs
        #expect(cronParse("0 9 * * 1-5") == plain)
        #expect(cronParse("@daily").text == "@daily")
    }

    @Test("equivalent spellings give the same times", arguments: [
        ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"), ("@hourly", "0 * * * *"), ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"),
        ("0 0 * * 7", "0 0 * * 0"), ("0 0 * * sun", "0 0 * * 7"), ("0 0 * * mon-fri", "0 0 * * 1-5"),
        ("0 0 1 jan-mar *", "0 0 1 1-3 *"), ("*/1 * * * *", "* * * * *"), ("0 * * * * *", "* * * * *"),
        ("5/20 * * * *", "5-59/20 * * * *"), ("0 0 * * 3/2", "0 0 * * 3,5,0"), ("0 0 * * 0-7", "0 0 * * *"),
    ])
    func equivalent(left: String, right: String) {
        #expect(cronFires(left, after: "2025-01-01T00:00:00", count: 10) == cronFires(right, after: "2025-01-01T00:00:00", count: 10))
    }

    @Test("searchYears bounds the search")
    func searchYears() {
        let newYear = cronParse("0 0 1 1 *")
        let base = cronLocal("2025-06-01T00:00:00")
        #expect(newYear.next(after: base, searchYears: 0) == nil)
        #expect(cronShow(newYear.next(after: base, searchYears: 1)) == "2026-01-01T00:00:00")
        #expect(cronShow(newYear.next(after: cronLocal("2025-01-01T00:00:00") - 1, searchYears: 0)) == "2025-01-01T00:00:00")
        let leap = cronParse("0 0 29 2 *")
        #expect(leap.next(after: cronLocal("2097-01-01T00:00:00"), searchYears: 6) == nil)
        #expect(cronShow(leap.next(after: cronLocal("2097-01-01T00:00:00"), searchYears: 7)) == "2104-02-29T00:00:00")
        // Past 400 years the calendar repeats, so a huge bound still answers at once.
        #expect(cronParse("0 0 30 2 *").next(after: 0, searchYears: .max) == nil)
        #expect(cronParse("0 0 29 2 *").next(after: 0, searchYears: -5) == nil)
    }

    @Test("impossible dates come back nil after one bounded search")
    func impossibleIsQuick() {
        // The time limit is not asserted (timing in tests is flaky); the search is bounded by construction:
        // at most a few steps per year for 400 years.
        for expression in ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *", "* * 30-31 2 *", "*/1 * 31 feb */2"] {
            #expect(cronParse(expression).next(after: cronLocal("2025-01-01T00:00:00")) == nil, "\(expression)")
        }
    }

    @Test("extreme local times neither trap nor loop")
    func extremes() {
        let everySecond = cronParse("* * * * * *")
        #expect(everySecond.next(after: .max) == nil)
        #expect(everySecond.next(after: Int64.max - 1) == Int64.max)
        #expect(cronParse("* * * * *").next(after: Int64.max - 1) == nil)
        #expect(everySecond.next(after: Int64.min) == Int64.min + 1)
        #expect(everySecond.matches(localSeconds: .min))
        #expect(everySecond.matches(localSeconds: .max))
        #expect(everySecond.next(after: -1) == 0)
    }

    // MARK: - hasFixedTime

    @Test("hasFixedTime: neither minute nor hour starts with *", arguments: [
        ("0 9 * * *", true), ("5,10 1-3 * * *", true), ("0 0 1 1 *", true), ("30 2 * * 1-5", true),
        ("*/5 * * * *", false), ("0 * * * *", false), ("* 9 * * *", false), ("0 */2 * * *", false),
        ("*/10 9 * * *", false), ("0 9-17/2 * * *", true), ("1,*/2 9 * * *", true),
        // Six fields: the seconds field does not count.
        ("* 0 9 * * *", true), ("*/5 30 2 * * *", true), ("0 * 9 * * *", false), ("0 0 * * * *", false),
        ("@hourly", false), ("@daily", true), ("@midnight", true), ("@weekly", true), ("@monthly", true),
        ("@yearly", true), ("@annually", true), ("@reboot", false),
    ])
    func fixedTime(expression: String, fixed: Bool) throws {
        #expect(try CronExpression.parse(expression).hasFixedTime == fixed)
    }

    // MARK: - Errors

    @Test("the message quotes the expression and points at the bad field", arguments: [
        ("0 25 * * *", "hour field \"25\": 25 is out of range 0-23"),
        ("60 * * * *", "minute field \"60\": 60 is out of range 0-59"),
        ("* * 0 * *", "day-of-month field \"0\": 0 is out of range 1-31"),
        ("* * 32 * *", "day-of-month field \"32\": 32 is out of range 1-31"),
        ("* * * 0 *", "month field \"0\": 0 is out of range 1-12"),
        ("* * * 13 *", "month field \"13\": 13 is out of range 1-12"),
        ("* * * * 8", "day-of-week field \"8\": 8 is out of range 0-7"),
        ("60 * * * * *", "second field \"60\": 60 is out of range 0-59"),
        ("0 60 * * * *", "minute field \"60\": 60 is out of range 0-59"),
        ("0 0 24 * * *", "hour field \"24\": 24 is out of range 0-23"),
        ("1-70 * * * *", "minute field \"1-70\": 70 is out of range 0-59"),
        ("* * * * 1,9", "day-of-week field \"1,9\": 9 is out of range 0-7"),
        ("99999999999999999999 * * * *", "minute field \"99999999999999999999\": 99999999999999999999 is out of range"),
        // Steps.
        ("*/0 * * * *", "minute field \"*/0\": step 0"),
        ("* 1-5/0 * * *", "hour field \"1-5/0\": step 0"),
        ("* * 3/0 * *", "day-of-month field \"3/0\": step 0"),
        ("*/ * * * *", "minute field \"*/\": expected a step number"),
        ("*/x * * * *", "minute field \"*/x\": expected a step number"),
        ("1-5/2/3 * * * *", "minute field \"1-5/2/3\": unexpected \"/3\""),
        // Reversed ranges.
        ("* * * * 5-1", "day-of-week field \"5-1\": range \"5-1\" is reversed"),
        ("* * * * fri-mon", "day-of-week field \"fri-mon\": range \"fri-mon\" is reversed"),
        ("* * * dec-jan *", "month field \"dec-jan\": range \"dec-jan\" is reversed"),
        ("30-10 * * * *", "minute field \"30-10\": range \"30-10\" is reversed"),
        // Empty list items.
        ("1,,2 * * * *", "minute field \"1,,2\": empty list item"),
        ("1, * * * *", "minute field \"1,\": empty list item"),
        ("* ,1 * * *", "hour field \",1\": empty list item"),
        ("* * * * ,", "day-of-week field \",\": empty list item"),
        // Names.
        ("* * * foo *", "month field \"foo\": unknown name \"foo\" (expected jan-dec"),
        ("* * * * monday", "day-of-week field \"monday\": unknown name \"monday\" (expected sun-sat"),
        ("* * * mon *", "month field \"mon\": unknown name \"mon\""),
        ("* * * * jan", "day-of-week field \"jan\": unknown name \"jan\""),
        ("* mon * * *", "hour field \"mon\": \"mon\" is not a number"),
        ("* * x * *", "day-of-month field \"x\": \"x\" is not a number"),
        // Trailing garbage and other junk.
        ("5x * * * *", "minute field \"5x\": unexpected \"x\" in \"5x\""),
        ("*/5x * * * *", "minute field \"*/5x\": unexpected \"x\" in \"*/5x\""),
        ("*-5 * * * *", "minute field \"*-5\": unexpected \"-5\""),
        ("** * * * *", "minute field \"**\": unexpected \"*\""),
        ("5- * * * *", "minute field \"5-\": expected a number after \"5-\""),
        ("-1 * * * *", "minute field \"-1\": expected a number at \"-1\""),
        ("1-mon * * * *", "minute field \"1-mon\": \"mon\" is not a number"),
        ("0 9 * * 1-5;", "day-of-week field \"1-5;\": unexpected \";\""),
        ("0 9 * * mon-", "day-of-week field \"mon-\": expected a number after"),
        ("５ * * * *", "minute field \"５\": expected a number at"),
        ("0 9 * * L", "day-of-week field \"L\": unknown name \"L\""),
        ("0 9 ? * 1", "day-of-month field \"?\": expected a number at \"?\""),
        ("0 9 15W * *", "day-of-month field \"15W\": unexpected \"W\""),
        // Field counts.
        ("* * * *", "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got 4"),
        ("* * * * * * *", "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got 7"),
        // Six fields with a command pasted after them: the command is read as the day-of-week field.
        ("0 9 * * 1-5 /bin/true", "day-of-week field \"/bin/true\": expected a number at \"/bin/true\""),
        ("", "got 0"),
        ("   \t ", "got 0"),
        ("*", "got 1"),
        // Macros.
        ("@daily *", "@daily stands alone"),
        ("@reboot 0 * * * *", "@reboot stands alone"),
        ("@often", "unknown macro \"@often\""),
        ("@Daily", "unknown macro \"@Daily\""),
        ("@", "unknown macro \"@\""),
    ])
    func errors(text: String, mention: String) {
        expectError(.badArgument, key: "cron", mentions: ["invalid cron expression \"\(text)\": ", mention]) {
            try CronExpression.parse(text)
        }
    }

    @Test("a whole error message")
    func wholeMessage() {
        let error = caught { try CronExpression.parse("0 25 * * *") }
        #expect(error?.message == "invalid cron expression \"0 25 * * *\": hour field \"25\": 25 is out of range 0-23")
        #expect(error?.key == "cron")
        let count = caught { try CronExpression.parse("0 9 * *") }
        #expect(count?.message == "invalid cron expression \"0 9 * *\": "
            + "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got 4")
    }
}
