import Foundation
import Glibc
import Testing

/// Cron and calendar jobs through the real daemon: DST gaps and repeats, clock steps, `@reboot`, jitter
/// and the `NEXT` verb. DST and clock steps use the daemon's test clock (failpoint `test-clock`): the
/// machine's clock is never touched.
@Suite struct CalendarTests {
    /// A daemon whose wall clock starts at `start` (RFC 3339); `step(to:)` sets it as a clock step would.
    final class ClockedDaemon {
        /// Holds the clock file (the daemon reads it at start, before its own directory exists).
        let directory: String
        let clockFile: String
        let daemon: Daemon

        init(start: String, config: String? = nil) throws {
            directory = try makeTemporaryDirectory()
            clockFile = directory + "/clock"
            try start.write(toFile: clockFile, atomically: true, encoding: .utf8)
            daemon = try Daemon(config: config, environment: [
                "TIMERD_TEST_FAILPOINTS": "test-clock", "TIMERD_TEST_CLOCK_FILE": clockFile,
            ])
        }

        deinit { removeTemporaryDirectory(directory) }

        func step(to time: String) throws {
            try time.write(toFile: clockFile, atomically: true, encoding: .utf8)
            daemon.signal(SIGUSR2)
        }
    }

    /// A command that appends the fire's scheduled time to `file` in the daemon's directory.
    static func recordScheduled(_ daemon: Daemon, _ file: String) -> String {
        "command='echo $TIMERD_SCHEDULED_AT >> \(daemon.directory)/\(file)'"
    }

    @Test func cronWithASecondsFieldFiresOnWholeSeconds() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD sec cron='* * * * * *' count=2 \(Self.recordScheduled(daemon, "sec"))") == "OK")
        eventually("two runs") { daemon.lines("sec").count == 2 }
        let times = daemon.lines("sec")
        for time in times { #expect(time.hasSuffix(":00.000000Z") || time.contains(".000000Z"), "\(time)") }
        #expect(try seconds(times[1]) - seconds(times[0]) == 1)
        try eventually("finished") { try daemon.show("sec")["state"] as? String == "finished" }
        let info = try daemon.show("sec")
        #expect(info["schedule"] as? String == "cron * * * * * *")
        #expect(info["dst_rules"] as? String == "dst_gap=skip dst_repeat=both")
    }

    /// Berlin springs forward at 2026-03-29 01:00 UTC (02:00 CET → 03:00 CEST). cron(8) runs a fixed-time
    /// job whose time is skipped right after the change; systemd skips that day.
    @Test func aSkippedLocalTimeShiftsForCronAndIsSkippedForCalendar() throws {
        // Added well before the change, then the clock is stepped to just before it: start-up time on
        // a loaded machine cannot move the jobs' first fire past the instant under test.
        let clocked = try ClockedDaemon(start: "2026-03-28T12:00:00Z")
        let daemon = clocked.daemon
        #expect(try daemon.request("ADD shifted cron='30 2 * * *' timezone=Europe/Berlin \(Self.recordScheduled(daemon, "shifted"))") == "OK")
        #expect(try daemon.request("ADD skipped calendar='*-*-* 02:30 Europe/Berlin' \(Self.recordScheduled(daemon, "skipped"))") == "OK")
        #expect(try daemon.request("ADD skipcron cron='30 2 * * *' timezone=Europe/Berlin dst_gap=skip command=true") == "OK")
        #expect(try daemon.show("shifted")["next_fire"] as? String == "2026-03-29T01:00:00.000000Z")
        #expect(try daemon.show("shifted")["next_fire_local"] as? String == "2026-03-29T03:00:00+02:00")
        #expect(try daemon.show("skipped")["next_fire"] as? String == "2026-03-30T00:30:00.000000Z")
        #expect(try daemon.show("skipped")["dst_rules"] as? String == "systemd")
        #expect(try daemon.show("skipcron")["next_fire"] as? String == "2026-03-30T00:30:00.000000Z")
        try clocked.step(to: "2026-03-29T00:59:58Z")
        eventually("the shifted job ran at the change") { daemon.lines("shifted") == ["2026-03-29T01:00:00.000000Z"] }
        let info = try daemon.show("shifted")
        #expect(info["next_fire_local"] as? String == "2026-03-30T02:30:00+02:00")
        #expect(info["timezone"] as? String == "Europe/Berlin")
        #expect(daemon.lines("skipped").isEmpty)
    }

    /// Berlin falls back at 2026-10-25 01:00 UTC (03:00 CEST → 02:00 CET): 02:30 happens twice.
    @Test func aRepeatedLocalTimeFiresOnceUnlessBothIsAsked() throws {
        let clocked = try ClockedDaemon(start: "2026-10-24T12:00:00Z")
        let daemon = clocked.daemon
        #expect(try daemon.request("ADD once cron='30 2 * * *' timezone=Europe/Berlin \(Self.recordScheduled(daemon, "once"))") == "OK")
        #expect(try daemon.request("ADD twice cron='30 2 * * *' timezone=Europe/Berlin dst_repeat=both \(Self.recordScheduled(daemon, "twice"))") == "OK")
        #expect(try daemon.request("ADD late calendar='*-*-* 02:30' timezone=Europe/Berlin dst_repeat=last command=true") == "OK")
        #expect(try daemon.show("late")["next_fire"] as? String == "2026-10-25T01:30:00.000000Z")
        try clocked.step(to: "2026-10-25T00:29:58Z")
        eventually("both ran the first time") { daemon.lines("once").count == 1 && daemon.lines("twice").count == 1 }
        #expect(daemon.lines("once") == ["2026-10-25T00:30:00.000000Z"])
        try eventually("next fires set") {
            try daemon.show("once")["next_fire"] as? String == "2026-10-26T01:30:00.000000Z"
                && daemon.show("twice")["next_fire"] as? String == "2026-10-25T01:30:00.000000Z"
        }
        #expect(try daemon.show("twice")["next_fire_local"] as? String == "2026-10-25T02:30:00+01:00")
    }

    @Test func steppingTheClockForwardFiresADueCalendarJobAtOnce() throws {
        let clocked = try ClockedDaemon(start: "2026-01-01T10:00:00Z")
        let daemon = clocked.daemon
        #expect(try daemon.request("ADD noon calendar='*-*-* 11:00:00 UTC' \(Self.recordScheduled(daemon, "noon"))") == "OK")
        #expect(try daemon.request("ADD interval every=1h command=true") == "OK")
        let intervalNext = try #require(try daemon.show("interval")["next_fire"] as? String)
        #expect(try daemon.show("noon")["next_fire"] as? String == "2026-01-01T11:00:00.000000Z")
        // Two seconds before the old deadline: the job must run within seconds, not after the hour the
        // timer was first set for.
        try clocked.step(to: "2026-01-01T10:59:58Z")
        eventually(timeout: 15, "fired after the step") { daemon.lines("noon") == ["2026-01-01T11:00:00.000000Z"] }
        #expect(daemon.logShows("the wall clock was set"))
        // Interval jobs stay on the monotonic clock: their next fire is still an hour from when they were
        // added (shown on the new wall clock, so about 59 minutes later than before the step).
        let after = try #require(try daemon.show("interval")["next_fire"] as? String)
        // The wall clock moved 3,598 s minus the real time between start-up and the step.
        let shift = try seconds(after) - seconds(intervalNext)
        #expect(shift > 3540 && shift < 3598.5, "\(intervalNext) → \(after)")
    }

    @Test func steppingTheClockBackRecomputesTheNextFire() throws {
        let clocked = try ClockedDaemon(start: "2026-01-01T10:20:00Z")
        let daemon = clocked.daemon
        #expect(try daemon.request("ADD half calendar='*:0/30 UTC' command=true") == "OK")
        #expect(try daemon.show("half")["next_fire"] as? String == "2026-01-01T10:30:00.000000Z")
        let watch = try Client(path: daemon.socket)
        #expect(try watch.request("WATCH").hasPrefix("OK"))
        try clocked.step(to: "2026-01-01T09:00:00Z")
        let event = try watch.readLine()
        #expect(event.contains("\"event\":\"clock\""), "\(event)")
        #expect(try daemon.show("half")["next_fire"] as? String == "2026-01-01T09:30:00.000000Z")
    }

    @Test func rebootJobsRunOnceAtStartAndOnlyFromTheConfig() throws {
        let daemon = try Daemon(config: """
            [job "boot"]
            cron = @reboot
            command = echo started >> $DIR/boot
            """)
        eventually("ran at start") { daemon.lines("boot") == ["started"] }
        try eventually("finished") { try daemon.state("boot") == "finished" }
        _ = try daemon.reload()
        #expect(try daemon.request("ADD another cron=@reboot command=true").hasPrefix("ERR bad-argument"))
        // A reload does not run it again: a job added after the reload fires, and boot still ran once.
        #expect(try daemon.request("ADD witness in=50ms command='echo w >> \(daemon.directory)/witness'") == "OK")
        eventually("witness") { daemon.lines("witness") == ["w"] }
        #expect(daemon.lines("boot") == ["started"])
    }

    @Test func configRejectsAnUnknownZoneAtItsLine() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let path = directory + "/bad.conf"
        try """
            [job "berlin"]
            cron = 0 9 * * *
            timezone = Europe/Berln
            command = true
            """.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try Daemon.run(Daemon.binary("timerd"), ["--check-config", "--config", path])
        #expect(result.status != 0)
        #expect(result.stderr.contains("\(path):3:"), "\(result.stderr)")
        #expect(result.stderr.contains("unknown time zone \"Europe/Berln\""), "\(result.stderr)")
    }

    @Test func jitterDelaysWithinItsBoundAndFixedJitterIsStable() throws {
        let daemon = try Daemon()
        let at = "2030-01-01T00:00:00.000000Z"
        var offsets: [Double] = []
        for index in 0..<8 {
            #expect(try daemon.request("ADD r\(index) at=\(at) jitter=10s command=true") == "OK")
            let next = try #require(try daemon.show("r\(index)")["next_fire"] as? String)
            offsets.append(try seconds(next) - seconds(at))
        }
        #expect(offsets.allSatisfy { $0 >= 0 && $0 <= 10 }, "\(offsets)")
        #expect(Set(offsets).count > 1, "random jitter gave the same delay 8 times: \(offsets)")
        #expect(try daemon.request("ADD fixed at=\(at) jitter=1h fixed_jitter=yes command=true") == "OK")
        let first = try #require(try daemon.show("fixed")["next_fire"] as? String)
        #expect(try daemon.request("CANCEL fixed") == "OK")
        #expect(try daemon.request("ADD fixed at=\(at) jitter=1h fixed_jitter=yes command=true") == "OK")
        #expect(try daemon.show("fixed")["next_fire"] as? String == first)
        #expect(try daemon.request("ADD bad every=1s jitter=1s command=true").hasPrefix("ERR bad-argument jitter must be shorter"))
    }

    @Test func nextVerbListsFireTimesInTheZone() throws {
        let daemon = try Daemon()
        let reply = try daemon.request("NEXT cron='0 9 * * 1-5' timezone=Europe/Berlin from=2026-03-27T00:00:00Z count=3")
        #expect(reply == #"OK {"times":["2026-03-27T09:00:00+01:00","2026-03-30T09:00:00+02:00","2026-03-31T09:00:00+02:00"],"timezone":"Europe/Berlin"}"#)
        let bad = try daemon.request("NEXT cron='0 25 * * *'")
        #expect(bad.hasPrefix("ERR bad-argument") && bad.contains("hour"), "\(bad)")
        let never = try daemon.request("NEXT cron='0 0 30 2 *'")
        #expect(never.hasPrefix("ERR bad-argument") && never.contains("no fire time"), "\(never)")
        #expect(try daemon.request("NEXT calendar=daily timezone=Mars/Olympus").hasPrefix("ERR bad-argument unknown time zone"))
    }
}
