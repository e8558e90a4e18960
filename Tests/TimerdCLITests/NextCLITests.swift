import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol
import TimerdSystem

/// `timerctl next`: fire times computed by timerctl itself (no daemon), printed as timerd's `NEXT` reply.
/// The expected times are checked by hand against the tz database (EU DST 2026: Mar 29 01:00Z and Oct 25
/// 01:00Z; US: Mar 8 07:00Z).
@Suite("timerctl next")
struct NextCLITests {
    /// Runs timerctl with a transport that records what it would send (`next` must send nothing), now =
    /// `fixedNow` and `systemZone` as the zone of jobs that name none.
    func next(_ arguments: [String], systemZone: ZoneRules = .utc) -> Transcript {
        let transcript = Transcript()
        transcript.status = Timerctl.run(arguments: ["next"] + arguments, context: offlineContext(transcript, verb: "next", systemZone: systemZone))
        return transcript
    }

    /// Expects success: the lines on stdout, nothing on stderr, nothing sent.
    func expectTimes(_ arguments: [String], _ lines: [String], systemZone: ZoneRules = .utc, sourceLocation: SourceLocation = #_sourceLocation) {
        let result = next(arguments, systemZone: systemZone)
        #expect(result.stdout == lines.map { $0 + "\n" }.joined(), sourceLocation: sourceLocation)
        #expect(result.stderr == "", sourceLocation: sourceLocation)
        #expect(result.status == ExitStatus.success, sourceLocation: sourceLocation)
        #expect(result.sent.isEmpty, sourceLocation: sourceLocation)
    }

    /// Expects the error timerctl prints when timerd answers `ERR bad-argument <message>`, and its status.
    func expectError(_ arguments: [String], _ message: String, code: String = "bad-argument", sourceLocation: SourceLocation = #_sourceLocation) {
        let result = next(arguments)
        #expect(result.stderr == "timerctl: \(message) (\(code))\n", sourceLocation: sourceLocation)
        #expect(result.stdout == "", sourceLocation: sourceLocation)
        let asIfFromTimerd = runCLI(["ping"], reply: .success(.err(code: code, message: message)))
        #expect(result.stderr == asIfFromTimerd.stderr, sourceLocation: sourceLocation)
        #expect(result.status == asIfFromTimerd.status, sourceLocation: sourceLocation)
        #expect(result.status == ExitStatus.daemonError, sourceLocation: sourceLocation)
        #expect(result.sent.isEmpty, sourceLocation: sourceLocation)
    }

    static let berlin = try! SystemTimeZones.zone(named: "Europe/Berlin")

    // MARK: Times

    @Test func weekdayCronAcrossTheSpringChange() {
        // Fri 27 Mar at +01:00; the clocks go forward on Sun 29; Mon 30 and Tue 31 at +02:00.
        expectTimes(
            ["--cron", "0 9 * * 1-5", "--timezone", "Europe/Berlin", "--from", "2026-03-27T00:00:00Z", "--count", "3"],
            ["2026-03-27T09:00:00+01:00", "2026-03-30T09:00:00+02:00", "2026-03-31T09:00:00+02:00"])
    }

    @Test func strictlyAfterFrom() {
        // 08:00Z is 09:00 in Berlin: that fire is not "after" it.
        expectTimes(
            ["--cron", "0 9 * * *", "--timezone", "Europe/Berlin", "--from", "2026-03-27T08:00:00Z", "--count", "1"],
            ["2026-03-28T09:00:00+01:00"])
    }

    @Test func weekendCalendarInNewYork() {
        expectTimes(
            ["--calendar", "Sat,Sun 10:00", "--timezone", "America/New_York", "--from", "2026-03-27T00:00:00Z", "--count", "4"],
            ["2026-03-28T10:00:00-04:00", "2026-03-29T10:00:00-04:00", "2026-04-04T10:00:00-04:00", "2026-04-05T10:00:00-04:00"])
        // Across the US change (Sun 8 Mar 2026): the offset follows.
        expectTimes(
            ["--calendar", "Sat,Sun 10:00", "--timezone", "America/New_York", "--from", "2026-03-06T00:00:00Z", "--count", "2"],
            ["2026-03-07T10:00:00-05:00", "2026-03-08T10:00:00-04:00"])
    }

    @Test func calendarSpecMayNameItsZone() {
        expectTimes(
            ["--calendar", "Sat,Sun 10:00 America/New_York", "--from", "2026-03-27T00:00:00Z", "--count", "1"],
            ["2026-03-28T10:00:00-04:00"], systemZone: Self.berlin)
        let result = next(["--calendar", "Sat,Sun 10:00 America/New_York", "--from", "2026-03-27T00:00:00Z", "--count", "1", "--json"])
        #expect(result.stdout == #"{"times":["2026-03-28T10:00:00-04:00"],"timezone":"America/New_York"}"# + "\n")
    }

    @Test func everyIsPrintedInTheZone() {
        expectTimes(
            ["--every", "90m", "--from", "2026-03-27T00:00:00Z", "--count", "3"],
            ["2026-03-27T01:30:00+00:00", "2026-03-27T03:00:00+00:00", "2026-03-27T04:30:00+00:00"])
        // Elapsed time, whatever the clocks do: 01:30Z is 03:30 in Berlin once the clocks have gone forward.
        expectTimes(
            ["--every", "90m", "--from", "2026-03-29T00:00:00Z", "--count", "3", "--timezone", "Europe/Berlin"],
            ["2026-03-29T03:30:00+02:00", "2026-03-29T05:00:00+02:00", "2026-03-29T06:30:00+02:00"])
    }

    @Test func defaultsAreNowFiveTimesAndTheSystemZone() {
        // now is 2026-11-29T16:00:00Z (winter: Berlin is +01:00).
        expectTimes(
            ["--every", "1h"],
            ["2026-11-29T18:00:00+01:00", "2026-11-29T19:00:00+01:00", "2026-11-29T20:00:00+01:00",
             "2026-11-29T21:00:00+01:00", "2026-11-29T22:00:00+01:00"],
            systemZone: Self.berlin)
        expectTimes(["--cron", "0 0 * * *", "--count", "1"], ["2026-11-30T00:00:00+01:00"], systemZone: Self.berlin)
        expectTimes(["--cron", "0 0 * * *", "--count", "1"], ["2026-11-30T00:00:00+00:00"], systemZone: .utc)
    }

    // MARK: DST

    @Test func cronShiftsAFixedTimeThatTheSpringChangeSkips() {
        // 02:30 does not exist on 29 Mar in Berlin: cron(8) runs the job at the change (03:00).
        expectTimes(
            ["--cron", "30 2 * * *", "--timezone", "Europe/Berlin", "--from", "2026-03-28T12:00:00Z", "--count", "2"],
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"])
    }

    @Test func calendarSkipsIt() {
        // systemd skips the missing time.
        expectTimes(
            ["--calendar", "*-*-* 02:30", "--timezone", "Europe/Berlin", "--from", "2026-03-28T12:00:00Z", "--count", "2"],
            ["2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"])
    }

    @Test func dstGapSkipOverridesCron() {
        expectTimes(
            ["--cron", "30 2 * * *", "--timezone", "Europe/Berlin", "--from", "2026-03-28T12:00:00Z", "--count", "2", "--dst-gap", "skip"],
            ["2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"])
        // And shift overrides the calendar spec's skip.
        expectTimes(
            ["--calendar", "*-*-* 02:30", "--timezone", "Europe/Berlin", "--from", "2026-03-28T12:00:00Z", "--count", "1", "--dst-gap=shift"],
            ["2026-03-29T03:00:00+02:00"])
    }

    @Test func repeatedHourInAutumn() {
        // 02:30 happens twice on 25 Oct (+02:00, then +01:00): a fixed-time cron job runs the first one.
        let arguments = ["--cron", "30 2 * * *", "--timezone", "Europe/Berlin", "--from", "2026-10-24T12:00:00Z"]
        expectTimes(arguments + ["--count", "2"], ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"])
        expectTimes(
            arguments + ["--count", "3", "--dst-repeat", "both"],
            ["2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"])
        expectTimes(arguments + ["--count", "1", "--dst-repeat", "last"], ["2026-10-25T02:30:00+01:00"])
    }

    // MARK: --json

    @Test func jsonIsTheNextReply() throws {
        let result = next([
            "--cron", "0 9 * * 1-5", "--timezone", "Europe/Berlin", "--from", "2026-03-27T00:00:00Z", "--count", "2", "--json",
        ])
        #expect(result.status == ExitStatus.success)
        #expect(result.stdout == #"{"times":["2026-03-27T09:00:00+01:00","2026-03-30T09:00:00+02:00"],"timezone":"Europe/Berlin"}"# + "\n")
        #expect(result.sent.isEmpty)
        let reply = try Payload.decode(NextTimes.self, from: result.stdout)
        #expect(reply == NextTimes(timezone: "Europe/Berlin", times: ["2026-03-27T09:00:00+01:00", "2026-03-30T09:00:00+02:00"]))
        // The text form of that payload, as if timerd had sent it, is what `next` prints.
        let command = try CommandParser.parse(["next", "--every", "1m"])
        #expect(ReplyFormatter.render(.ok(Payload.encode(reply)), for: command, now: fixedNow).stdout
            == "2026-03-27T09:00:00+01:00\n2026-03-30T09:00:00+02:00\n")
    }

    @Test func jsonNamesTheSystemZone() {
        let result = next(["--every", "1h", "--count", "1", "--json"], systemZone: Self.berlin)
        #expect(result.stdout == #"{"times":["2026-11-29T18:00:00+01:00"],"timezone":"Europe/Berlin"}"# + "\n")
    }

    // MARK: Errors

    @Test func badCronFieldIsNamed() {
        expectError(
            ["--cron", "0 9 * * 8", "--timezone", "Europe/Berlin"],
            #"invalid cron expression "0 9 * * 8": day-of-week field "8": 8 is out of range 0-7"#)
    }

    @Test func badCalendarSpec() {
        let result = next(["--calendar", "Mon..Fri 25:00"])
        #expect(result.status == ExitStatus.daemonError)
        #expect(result.stderr.hasPrefix("timerctl: ") && result.stderr.hasSuffix(" (bad-argument)\n"), "\(result.stderr)")
        #expect(result.stdout == "")
    }

    @Test func unknownZone() {
        expectError(
            ["--cron", "0 9 * * *", "--timezone", "Mars/Olympus_Mons"],
            #"unknown time zone "Mars/Olympus_Mons": no such zone in /usr/share/zoneinfo (`timedatectl list-timezones` lists them)"#)
        let result = next(["--every", "1h", "--timezone", "../../etc/passwd"])
        #expect(result.status == ExitStatus.daemonError)
        #expect(result.stderr.contains("invalid time zone name"), "\(result.stderr)")
    }

    @Test func impossibleDateHasNoFireTime() {
        // 30 February never comes: now (16:00Z) in Berlin is 17:00+01:00.
        expectError(
            ["--cron", "0 0 30 2 *", "--timezone", "Europe/Berlin"],
            "cron 0 0 30 2 * has no fire time after 2026-11-29T17:00:00+01:00")
    }

    @Test func rebootHasNoFireTimes() {
        expectError(["--cron", "@reboot"], "@reboot has no fire times: it runs once when timerd starts")
    }

    @Test("count out of range", arguments: ["0", "10001", "-1", "many", ""])
    func countOutOfRange(count: String) {
        expectError(["--every", "1m", "--count", count], "count: expected a whole number from 1 to 10000, got \"\(count)\"")
    }

    @Test func countAtTheLimit() {
        let result = next(["--every", "1s", "--count", "10000", "--from", "2026-01-01T00:00:00Z"])
        #expect(result.status == ExitStatus.success)
        #expect(result.stdout.split(separator: "\n").count == 10_000)
        #expect(result.stdout.hasSuffix("2026-01-01T02:46:40+00:00\n"))
    }

    @Test func badFromTime() {
        let result = next(["--every", "1m", "--from", "yesterday"])
        #expect(result.status == ExitStatus.daemonError)
        #expect(result.stderr.hasPrefix("timerctl: from: invalid time \"yesterday\""), "\(result.stderr)")
    }

    @Test func shapeErrorsAreUsageErrors() {
        let result = next(["--every", "1m", "--cron", "* * * * *"])
        #expect(result.status == ExitStatus.usage)
        #expect(result.stderr == """
            timerctl: error: give only one of --cron, --calendar and --every (got --every --cron)
            Usage: timerctl next (--cron EXPR | --calendar SPEC | --every DUR) [--count N] [--timezone TZ] [--from TIME]
                                [--dst-gap shift|skip] [--dst-repeat first|last|both] [--json]
            See 'timerctl next --help'.

            """)
        #expect(next([]).status == ExitStatus.usage)
    }

    // MARK: No daemon

    @Test func worksWithoutADaemon() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let missing = directory.path + "/timerd.sock"
        let arguments = [
            "--socket", missing, "next", "--cron", "0 9 * * 1-5", "--timezone", "Europe/Berlin", "--from", "2026-03-27T00:00:00Z",
            "--count", "3",
        ]
        let result = runCLIForReal(arguments, environment: ["TIMERD_SOCKET": missing])
        #expect(result.status == ExitStatus.success)
        #expect(result.stdout == "2026-03-27T09:00:00+01:00\n2026-03-30T09:00:00+02:00\n2026-03-31T09:00:00+02:00\n")
        #expect(result.stderr == "")
        // The real system zone, whatever it is, and the real clock's "now" from the context.
        let local = runCLIForReal(["next", "--every", "1h", "--count", "1", "--json"], environment: ["TIMERD_SOCKET": missing])
        #expect(local.status == ExitStatus.success)
        let reply = try Payload.decode(NextTimes.self, from: local.stdout)
        #expect(reply.timezone == SystemTimeZones.systemZone().name)
        #expect(reply.times == [RFC3339.format(fixedNow + .seconds(3600), in: SystemTimeZones.systemZone())])
    }
}
