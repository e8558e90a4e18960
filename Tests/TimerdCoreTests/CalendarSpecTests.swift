import Testing
@testable import TimerdCore

/// `timegm`/`gmtime_r` semantics for tests: out-of-range fields carry, no DST, `guess` stays 0.
struct UTCConversion: LocalTimeConversion {
    func localTime(_ utcSeconds: Int64) -> BrokenDownTime {
        let days = utcSeconds >= 0 ? utcSeconds / 86_400 : -((-utcSeconds + 86_399) / 86_400)
        let secondOfDay = utcSeconds - days * 86_400
        let (year, month, day) = RFC3339.civilFromDays(days)
        let weekday = ((days + 4) % 7 + 7) % 7
        let yearDay = days - RFC3339.daysFromCivil(year: year, month: 1, day: 1)
        return BrokenDownTime(
            year: Int(year) - 1900, month: Int(month) - 1, day: Int(day), hour: Int(secondOfDay / 3600),
            minute: Int(secondOfDay / 60 % 60), second: Int(secondOfDay % 60), weekday: Int(weekday),
            yearDay: Int(yearDay), isDST: 0, utcOffset: 0)
    }

    func makeTime(_ time: inout BrokenDownTime, guess: inout Int64) -> Int64? {
        let months = Int64(time.year) * 12 + Int64(time.month)
        let year = 1900 + (months >= 0 ? months / 12 : -((-months + 11) / 12))
        let month = months - (year - 1900) * 12
        let days = RFC3339.daysFromCivil(year: year, month: month + 1, day: 1) + Int64(time.day) - 1
        let seconds = days * 86_400 + Int64(time.hour) * 3600 + Int64(time.minute) * 60 + Int64(time.second)
        time = localTime(seconds)
        guess = 0
        return seconds
    }
}

/// µs since the epoch for an RFC 3339 time.
private func micros(_ text: String) -> Int64 {
    (try! RFC3339.parse(text)).nanosecondsSinceEpoch / 1000
}

private func format(_ micros: Int64?) -> String? {
    micros.map { RFC3339.format(WallTime(nanosecondsSinceEpoch: $0 * 1000)) }
}

/// The next `count` elapses after `base`, formatted, stopping at the first nil (shown as "never").
private func elapses(_ text: String, after base: String, count: Int = 3,
                     in zone: some LocalTimeConversion = UTCConversion()) throws -> [String] {
    let spec = try CalendarSpec.parse(text)
    var after = micros(base)
    var out: [String] = []
    for _ in 0..<count {
        guard let next = spec.next(after: after, in: zone) else {
            out.append("never")
            break
        }
        out.append(format(next)!)
        after = next
    }
    return out
}

@Suite struct CalendarSpecParseTests {
    /// Inputs and their normalised forms, as `systemd-analyze calendar` (systemd 252) prints them.
    static let normalisations: [(String, String)] = [
        // systemd.time(7) examples
        ("Sat,Thu,Mon..Wed,Sat..Sun", "Mon..Thu,Sat,Sun *-*-* 00:00:00"),
        ("Mon,Sun 12-*-* 2,1:23", "Mon,Sun 2012-*-* 01,02:23:00"),
        ("Wed *-1", "Wed *-*-01 00:00:00"),
        ("Wed..Wed,Wed *-1", "Wed *-*-01 00:00:00"),
        ("Wed, 17:48", "Wed *-*-* 17:48:00"),
        ("Wed..Sat,Tue 12-10-15 1:2:3", "Tue..Sat 2012-10-15 01:02:03"),
        ("*-*-7 0:0:0", "*-*-07 00:00:00"),
        ("10-15", "*-10-15 00:00:00"),
        ("monday *-12-* 17:00", "Mon *-12-* 17:00:00"),
        ("Mon,Fri *-*-3,1,2 *:30:45", "Mon,Fri *-*-01,02,03 *:30:45"),
        ("12,14,13,12:20,10,30", "*-*-* 12,13,14:10,20,30:00"),
        ("12..14:10,20,30", "*-*-* 12..14:10,20,30:00"),
        ("mon,fri *-1/2-1,3 *:30:45", "Mon,Fri *-01/2-01,03 *:30:45"),
        ("03-05 08:05:40", "*-03-05 08:05:40"),
        ("08:05:40", "*-*-* 08:05:40"),
        ("05:40", "*-*-* 05:40:00"),
        ("Sat,Sun 12-05 08:05:40", "Sat,Sun *-12-05 08:05:40"),
        ("Sat,Sun 08:05:40", "Sat,Sun *-*-* 08:05:40"),
        ("2003-03-05 05:40", "2003-03-05 05:40:00"),
        ("05:40:23.4200004/3.1700005", "*-*-* 05:40:23.420000/3.170001"),
        ("2003-02..04-05", "2003-02..04-05 00:00:00"),
        ("2003-03-05 05:40 UTC", "2003-03-05 05:40:00 UTC"),
        ("2003-03-05", "2003-03-05 00:00:00"),
        ("03-05", "*-03-05 00:00:00"),
        ("*:2/3", "*-*-* *:02/3:00"),
        // shorthands
        ("minutely", "*-*-* *:*:00"),
        ("hourly", "*-*-* *:00:00"),
        ("daily", "*-*-* 00:00:00"),
        ("DAILY", "*-*-* 00:00:00"),
        ("monthly", "*-*-01 00:00:00"),
        ("weekly", "Mon *-*-* 00:00:00"),
        ("yearly", "*-01-01 00:00:00"),
        ("annually", "*-01-01 00:00:00"),
        ("anually", "*-01-01 00:00:00"),
        ("quarterly", "*-01,04,07,10-01 00:00:00"),
        ("semiannually", "*-01,07-01 00:00:00"),
        ("semi-annually", "*-01,07-01 00:00:00"),
        ("biannually", "*-01,07-01 00:00:00"),
        ("bi-annually", "*-01,07-01 00:00:00"),
        // weekdays: `-` ranges are accepted, runs of three print as a range, all seven as nothing
        ("Mon-Fri", "Mon..Fri *-*-* 00:00:00"),
        ("Mon..Fri 9:00", "Mon..Fri *-*-* 09:00:00"),
        ("Mon-Wed,Fri-Sun", "Mon..Wed,Fri..Sun *-*-* 00:00:00"),
        ("Tue,Wed", "Tue,Wed *-*-* 00:00:00"),
        ("Tuesday..Thursday", "Tue..Thu *-*-* 00:00:00"),
        ("Mon,Tue,Wed,Thu,Fri,Sat,Sun", "*-*-* 00:00:00"),
        ("Mon,", "Mon *-*-* 00:00:00"),
        // dates: two-digit years, lists, ranges, repetitions
        ("70-01-01", "1970-01-01 00:00:00"),
        ("69-12-31", "2069-12-31 00:00:00"),
        ("2026..2030/2-*-* 00:00", "2026..2030/2-*-* 00:00:00"),
        ("*-*-1..7/2 12:00", "*-*-01..07/2 12:00:00"),
        ("*-*-* 0..23/6:00", "*-*-* 00..18/6:00:00"),
        ("10..20/3:0", "*-*-* 10..19/3:00:00"),
        ("10..19/10:0", "*-*-* 10:00:00"),
        ("0..0:0", "*-*-* 00:00:00"),
        ("1,2,2,1:0", "*-*-* 01,02:00:00"),
        // days from the end of the month
        ("*-02~03", "*-02~03 00:00:00"),
        ("*-05~07/1", "*-05~07/1 00:00:00"),
        ("*-*~01..03", "*-*~01..03 00:00:00"),
        ("*-*~*", "*-*-* 00:00:00"),
        // seconds: `*`, fractions (six digits, the seventh rounds), fractional repetitions
        ("*:*:*", "*-*-* *:*:*"),
        ("*:*:0/0.5", "*-*-* *:*:00/0.500000"),
        ("*:*:0,30.5", "*-*-* *:*:00,30.500000"),
        ("*:*:10..20/2.5", "*-*-* *:*:10..20/2.500000"),
        ("*:*:1.5..3", "*-*-* *:*:01.500000..02.500000"),
        ("*:*:0..3/1", "*-*-* *:*:00..03"),
        ("2026-01-01 12:00:00.000001", "2026-01-01 12:00:00.000001"),
        ("*:*:1.9999995", "*-*-* *:*:02"),
        // time zones and timestamps
        ("daily UTC", "*-*-* 00:00:00 UTC"),
        ("Monday 9:00 utc", "Mon *-*-* 09:00:00 UTC"),
        ("weekly Pacific/Auckland", "Mon *-*-* 00:00:00 Pacific/Auckland"),
        ("*-*-* 12:00 Etc/UTC", "*-*-* 12:00:00 Etc/UTC"),
        ("@0", "1970-01-01 00:00:00 UTC"),
        ("@1800000000", "2027-01-15 08:00:00 UTC"),
        // spaces: after a date (and before the time) any number
        ("2026-01-01  12:00", "2026-01-01 12:00:00"),
        ("2026-01-01 ", "2026-01-01 00:00:00"),
    ]

    @Test(arguments: normalisations)
    func normalises(_ input: String, _ expected: String) throws {
        let spec = try CalendarSpec.parse(input)
        #expect(spec.normalized == expected)
        #expect(spec.text == input)
    }

    @Test func timeZones() throws {
        #expect(try CalendarSpec.parse("daily").timeZone == nil)
        #expect(try CalendarSpec.parse("daily UTC").timeZone == "UTC")
        #expect(try CalendarSpec.parse("daily uTc").timeZone == "UTC")
        #expect(try CalendarSpec.parse("Mon 9:00 Europe/Berlin").timeZone == "Europe/Berlin")
        #expect(try CalendarSpec.parse("*-*-* 00:00 America/Argentina/Buenos_Aires").timeZone == "America/Argentina/Buenos_Aires")
        #expect(try CalendarSpec.parse("daily Etc/GMT+5").timeZone == "Etc/GMT+5")
        #expect(try CalendarSpec.parse("@1800000000").timeZone == "UTC")
        // Only a token with a letter can name a zone: a trailing date or time is never taken for one.
        #expect(try CalendarSpec.parse("Mon 2026-01-01").timeZone == nil)
        #expect(try CalendarSpec.parse("Mon 2026-01-01").normalized == "Mon 2026-01-01 00:00:00")
        // A zone-looking token is reported for the caller to check, even where no zone has that name.
        #expect(try CalendarSpec.parse("daily Mars/Olympus").timeZone == "Mars/Olympus")
    }

    /// Inputs systemd 252 rejects, with what the message must point at.
    static let rejections: [(String, [String])] = [
        ("", ["empty"]),
        (" UTC", ["empty"]),
        ("Mnday 9:00", ["unknown weekday \"Mnday\""]),
        ("Mon,Fdi", ["unknown weekday \"Fdi\""]),
        ("Monx", ["unknown weekday \"Monx\""]),
        ("Fri..Mon", ["\"Fri..Mon\"", "backwards"]),
        ("Mon..", ["\"Mon..\"", "no end"]),
        ("Mon..Tue..Wed", ["more than two ends"]),
        ("*-*-* 25:00", ["hour \"25\" is out of range 0-23"]),
        ("9:60", ["minute \"60\" is out of range 0-59"]),
        ("*:*:60", ["second \"60\" is out of range 0-59"]),
        ("*-13-01", ["month \"13\" is out of range 1-12"]),
        ("*-*-32", ["day \"32\" is out of range 1-31"]),
        ("*-*-0", ["day \"0\""]),
        ("1969-01-01", ["year \"1969\" is out of range 1970-2199"]),
        ("2200-01-01", ["year \"2200\""]),
        ("*-02~29", ["day \"~29\"", "1-28"]),
        // systemd lowers the bound by 3 for each further element of a from-the-end list
        ("*-01~10,26", ["day \"~26\"", "1-25"]),
        ("*:0/60", ["minute \"0/60\"", "repetition"]),
        ("*:*:50/20", ["second \"50/20\"", "never fires a second time"]),
        ("2199/1-01-01", ["year \"2199/1\""]),
        ("*-02~01/2", ["day \"~01/2\""]),
        ("12-5..3", ["day \"5..3\"", "ends before it starts"]),
        ("*:0/0", ["minute \"0/0\"", "repeats every 0"]),
        ("*:*:1.5..2", ["second range \"1.5..2\""]),
        ("*/5", ["unexpected \"/\""]),
        ("*:*/5", ["unexpected \"/\"", "minute \"*\""]),
        ("12", ["expected \":\" after hour \"12\""]),
        ("1:2:3:4", ["after second \"3\""]),
        ("*-*-* 12:00 ", ["unexpected \" \" after minute \"00\""]),
        ("0:0:0.", ["fraction digits", "\"0.\""]),
        ("1.5:00", ["unexpected \".\"", "\"1.5\""]),
        ("1,2,:00", ["expected a number after date/time \"1,2,\""]),
        ("2026~01-01", ["\"~\" may only separate the month and the day"]),
        ("99999999999:00", ["\"99999999999\" is too large"]),
        ("@-5", ["timestamp \"@-5\""]),
        ("@7258118400", ["timestamp \"@7258118400\""]),
        ("@1800000000 ", ["unexpected"]),
        ("daily2", ["unknown weekday \"daily2\""]),
        (" daily", ["nothing before the time zone \"daily\""]),
    ]

    @Test(arguments: rejections)
    func rejects(_ input: String, _ mentions: [String]) {
        let error = expectError(.badArgument, key: "calendar", mentions: mentions + ["invalid calendar spec \"\(input)\""]) {
            try CalendarSpec.parse(input)
        }
        _ = error
    }

    @Test func listLengthCap() throws {
        let list = Array(repeating: "1", count: 241).joined(separator: ",")
        #expect(try CalendarSpec.parse("*:" + list).normalized == "*-*-* *:01:00")
        expectError(.badArgument, mentions: ["more than 241"]) { try CalendarSpec.parse("*:" + list + ",2") }
    }

    @Test func equality() throws {
        #expect(try CalendarSpec.parse("Mon..Fri 9:00") == CalendarSpec.parse("Mon..Fri 9:00"))
        #expect(try CalendarSpec.parse("Mon..Fri 9:00") != CalendarSpec.parse("Mon-Fri 09:00"))
    }
}

@Suite struct CalendarSpecNextTests {
    static let base = "2026-03-29T00:00:00Z"

    /// Expected elapses, checked against `systemd-analyze calendar --base-time='2026-03-29 00:00:00 UTC'`.
    static let cases: [(String, [String])] = [
        ("Mon..Fri 09:00", ["2026-03-30T09:00:00.000000Z", "2026-03-31T09:00:00.000000Z", "2026-04-01T09:00:00.000000Z"]),
        ("Sat,Sun 10:00", ["2026-03-29T10:00:00.000000Z", "2026-04-04T10:00:00.000000Z", "2026-04-05T10:00:00.000000Z"]),
        ("weekly", ["2026-03-30T00:00:00.000000Z", "2026-04-06T00:00:00.000000Z", "2026-04-13T00:00:00.000000Z"]),
        ("Fri *-*-13", ["2026-11-13T00:00:00.000000Z", "2027-08-13T00:00:00.000000Z", "2028-10-13T00:00:00.000000Z"]),
        // leap days, short months
        ("*-02-29", ["2028-02-29T00:00:00.000000Z", "2032-02-29T00:00:00.000000Z", "2036-02-29T00:00:00.000000Z"]),
        ("*-*-31", ["2026-03-31T00:00:00.000000Z", "2026-05-31T00:00:00.000000Z", "2026-07-31T00:00:00.000000Z"]),
        ("*-*-01,30", ["2026-03-30T00:00:00.000000Z", "2026-04-01T00:00:00.000000Z", "2026-04-30T00:00:00.000000Z"]),
        // from the end of the month
        ("*-02~03", ["2027-02-26T00:00:00.000000Z", "2028-02-27T00:00:00.000000Z", "2029-02-26T00:00:00.000000Z"]),
        ("*-05~07/1", ["2026-05-25T00:00:00.000000Z", "2026-05-26T00:00:00.000000Z", "2026-05-27T00:00:00.000000Z"]),
        // shorthands
        ("minutely", ["2026-03-29T00:01:00.000000Z", "2026-03-29T00:02:00.000000Z", "2026-03-29T00:03:00.000000Z"]),
        ("hourly", ["2026-03-29T01:00:00.000000Z", "2026-03-29T02:00:00.000000Z", "2026-03-29T03:00:00.000000Z"]),
        ("monthly", ["2026-04-01T00:00:00.000000Z", "2026-05-01T00:00:00.000000Z", "2026-06-01T00:00:00.000000Z"]),
        ("quarterly", ["2026-04-01T00:00:00.000000Z", "2026-07-01T00:00:00.000000Z", "2026-10-01T00:00:00.000000Z"]),
        ("semiannually", ["2026-07-01T00:00:00.000000Z", "2027-01-01T00:00:00.000000Z", "2027-07-01T00:00:00.000000Z"]),
        ("yearly", ["2027-01-01T00:00:00.000000Z", "2028-01-01T00:00:00.000000Z", "2029-01-01T00:00:00.000000Z"]),
        // lists and repetitions
        ("*-*-* *:00/15:00", ["2026-03-29T00:15:00.000000Z", "2026-03-29T00:30:00.000000Z", "2026-03-29T00:45:00.000000Z"]),
        ("*-*-1,15 8,20:00", ["2026-04-01T08:00:00.000000Z", "2026-04-01T20:00:00.000000Z", "2026-04-15T08:00:00.000000Z"]),
        // microseconds
        ("*:*:0/0.25", ["2026-03-29T00:00:00.250000Z", "2026-03-29T00:00:00.500000Z", "2026-03-29T00:00:00.750000Z"]),
        ("*:*:1.5..3", ["2026-03-29T00:00:01.500000Z", "2026-03-29T00:00:02.500000Z", "2026-03-29T00:01:01.500000Z"]),
        ("00:00:00.000001", ["2026-03-29T00:00:00.000001Z", "2026-03-30T00:00:00.000001Z", "2026-03-31T00:00:00.000001Z"]),
        // one-off instants, and the past
        ("2027-06-15 12:30:45.5", ["2027-06-15T12:30:45.500000Z", "never"]),
        ("@1800000000", ["2027-01-15T08:00:00.000000Z", "never"]),
        ("2026-03-29", ["never"]),
        ("2025-*-*", ["never"]),
        ("29-2-29", ["never"]),
        ("*-02-30", ["never"]),
        ("*-04-31", ["never"]),
    ]

    @Test(arguments: cases)
    func elapsesInUTC(_ spec: String, _ expected: [String]) throws {
        #expect(try elapses(spec, after: Self.base) == expected)
    }

    @Test func impossibleDatesEndQuickly() throws {
        let specs = try ["*-02-30", "*-02-31 23:59:59", "Mon *-02-30", "2101..2199/4-02-29", "*-04-31 *:*:*"]
            .map(CalendarSpec.parse)
        let clock = ContinuousClock()
        let took = clock.measure {
            for spec in specs {
                #expect(spec.next(after: micros(Self.base), in: UTCConversion()) == nil, "\(spec.text)")
            }
        }
        #expect(took < .seconds(2))
    }

    /// The 30th of February normalises to the 2nd of March; the search must not skip the 1st.
    @Test func normalisationDoesNotSkipAMatch() throws {
        #expect(try elapses("*-*-01,30", after: "2026-02-15T00:00:00Z")
            == ["2026-03-01T00:00:00.000000Z", "2026-03-30T00:00:00.000000Z", "2026-04-01T00:00:00.000000Z"])
    }

    @Test func searchesStopAtMaxYear() throws {
        #expect(try elapses("2199-12-31 23:59:59", after: Self.base, count: 2) == ["2199-12-31T23:59:59.000000Z", "never"])
        #expect(try elapses("*-12-31 23:59", after: "2199-12-31T23:59:00Z") == ["never"])
    }

    @Test func baseOutsideSystemdRange() throws {
        let spec = try CalendarSpec.parse("daily")
        #expect(spec.next(after: -1, in: UTCConversion()) == nil)
        #expect(spec.next(after: 253_402_214_399_000_001, in: UTCConversion()) == nil)
        #expect(spec.next(after: 0, in: UTCConversion()) == micros("1970-01-02T00:00:00Z"))
    }

    @Test func strictlyAfter() throws {
        let spec = try CalendarSpec.parse("*-*-* 12:00:00")
        let noon = micros("2026-03-29T12:00:00Z")
        #expect(spec.next(after: noon - 1, in: UTCConversion()) == noon)
        #expect(spec.next(after: noon, in: UTCConversion()) == noon + 86_400_000_000)
    }

    @Test func utcSpecIgnoresTheZoneItIsGiven() throws {
        /// A zone one hour east of UTC, without DST.
        struct PlusOne: LocalTimeConversion {
            func localTime(_ utcSeconds: Int64) -> BrokenDownTime {
                var time = UTCConversion().localTime(utcSeconds + 3600)
                time.utcOffset = 3600
                return time
            }
            func makeTime(_ time: inout BrokenDownTime, guess: inout Int64) -> Int64? {
                var g: Int64 = 0
                guard let local = UTCConversion().makeTime(&time, guess: &g) else { return nil }
                time.utcOffset = 3600
                guess = -3600
                return local - 3600
            }
        }
        #expect(try elapses("daily", after: Self.base, count: 1, in: PlusOne()) == ["2026-03-29T23:00:00.000000Z"])
        #expect(try elapses("daily UTC", after: Self.base, count: 1, in: PlusOne()) == ["2026-03-30T00:00:00.000000Z"])
        #expect(try elapses("@1800000000", after: Self.base, count: 1, in: PlusOne()) == ["2027-01-15T08:00:00.000000Z"])
    }
}
