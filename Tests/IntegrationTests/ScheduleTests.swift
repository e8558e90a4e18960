import Foundation
import Glibc
import Testing

/// Each schedule kind and the pause/resume verbs, observed through the runs the real daemon starts.
@Suite struct ScheduleTests {
    /// A command that appends the run number to `file` in the test directory.
    static func record(_ daemon: Daemon, _ file: String) -> String {
        "command='echo $TIMERD_RUN >> \(daemon.directory)/\(file)'"
    }

    @Test func everyRepeatsAndCountStops() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD tick every=50ms count=3 \(Self.record(daemon, "tick"))") == "OK")
        eventually("three runs") { daemon.lines("tick") == ["1", "2", "3"] }
        try eventually("finished") { try daemon.show("tick")["state"] as? String == "finished" }
        let info = try daemon.show("tick")
        #expect(info["runs"] as? Int == 3)
        #expect(info["next_fire"] is NSNull)
        // A fourth run would have happened by now if count did not stop the timer: RUN one by hand and
        // check the file holds exactly four lines afterwards.
        #expect(try daemon.request("RUN tick").hasPrefix("OK"))
        eventually("manual run") { daemon.lines("tick").count == 4 }
        #expect(daemon.lines("tick") == ["1", "2", "3", "4"])
    }

    @Test func startDelaysTheFirstFire() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD late every=1h start=30ms \(Self.record(daemon, "late"))") == "OK")
        eventually("first fire after start") { daemon.lines("late") == ["1"] }
        let info = try daemon.show("late")
        #expect(info["schedule"] as? String == "every 1h (start 30ms)")
        #expect(info["state"] as? String == "scheduled")
        // The next fire is an hour after the first, not after `start`.
        let next = try #require(info["next_fire"] as? String)
        let started = try #require(info["last_started"] as? String)
        #expect(try seconds(next) - seconds(started) > 3500)
    }

    @Test func inFiresExactlyOnce() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD one in=20ms \(Self.record(daemon, "one"))") == "OK")
        eventually("fired") { daemon.lines("one") == ["1"] }
        try eventually("finished") { try daemon.show("one")["state"] as? String == "finished" }
        // Another job with a later deadline proves time passed without a second fire of `one`.
        #expect(try daemon.request("ADD witness in=150ms \(Self.record(daemon, "witness"))") == "OK")
        eventually("witness fired") { daemon.lines("witness") == ["1"] }
        #expect(daemon.lines("one") == ["1"])
        #expect(try daemon.show("one")["runs"] as? Int == 1)
    }

    @Test func atFiresOnceAtAWallClockTime() throws {
        let daemon = try Daemon()
        let when = Date().addingTimeInterval(0.3)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let text = formatter.string(from: when)
        #expect(try daemon.request("ADD at1 at=\(text) command='date +%s.%N >> \(daemon.directory)/at1'") == "OK")
        #expect(try daemon.show("at1")["schedule"] as? String == "at " + rfc3339Micro(formatter.date(from: text)!))
        eventually("fired") { daemon.lines("at1").count == 1 }
        let firedAt = Double(daemon.lines("at1")[0])!
        #expect(firedAt >= when.timeIntervalSince1970 - 0.002, "not early")
        #expect(firedAt < when.timeIntervalSince1970 + 1.0, "not much later")
        try eventually("finished") { try daemon.show("at1")["state"] as? String == "finished" }
        // A time with an offset is accepted; one without a zone is refused.
        #expect(try daemon.request("ADD at2 at=2099-01-01T10:00:00+02:00 command=true") == "OK")
        #expect(try daemon.show("at2")["next_fire"] as? String == "2099-01-01T08:00:00.000000Z")
        #expect(try daemon.request("ADD at3 at=2099-01-01T10:00:00 command=true").hasPrefix("ERR bad-argument "))
    }

    @Test func pauseHoldsFiresAndResumeContinuesOnSchedule() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD p every=40ms \(Self.record(daemon, "p"))") == "OK")
        eventually("running") { daemon.lines("p").count >= 2 }
        #expect(try daemon.request("PAUSE p") == "OK")
        let frozen = daemon.lines("p").count
        // While paused, an independent witness job fires several times: `p` must not.
        #expect(try daemon.request("ADD w every=40ms count=4 \(Self.record(daemon, "w"))") == "OK")
        eventually("witness ran") { daemon.lines("w").count == 4 }
        #expect(daemon.lines("p").count == frozen)
        #expect(try daemon.request("RESUME p") == "OK")
        eventually("resumed") { daemon.lines("p").count >= frozen + 2 }
        let info = try daemon.show("p")
        #expect((info["skipped"] as? Int ?? 0) >= 1, "fires due while paused are counted as skipped")
        // The fires due while paused are reported at the resume (`last_skip` may be a later fire skipped
        // for overlap on a busy machine).
        #expect(eventually("logged") { daemon.log.contains(" fell due while paused and w") })
        #expect(daemon.logShows("job=p resumed;"))
    }

    @Test func resumeNowFiresAtOnce() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD n every=1h \(Self.record(daemon, "n"))") == "OK")
        #expect(try daemon.request("PAUSE n") == "OK")
        #expect(try daemon.request("RESUME n now") == "OK")
        eventually("fired now") { daemon.lines("n") == ["1"] }
        let info = try daemon.show("n")
        #expect(info["state"] as? String == "scheduled")
        // It continues on its hourly schedule.
        let next = try #require(info["next_fire"] as? String)
        #expect(try seconds(next) - Date().timeIntervalSince1970 > 3000)
    }

    @Test func resumeAfterFiresAfterTheDelayAndContinuesFromThere() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD a every=1h \(Self.record(daemon, "a"))") == "OK")
        #expect(try daemon.request("PAUSE a") == "OK")
        let before = Date().timeIntervalSince1970
        #expect(try daemon.request("RESUME a after=200ms") == "OK")
        let next = try seconds(try #require(try daemon.show("a")["next_fire"] as? String))
        #expect(next - before > 0.1 && next - before < 1.5)
        eventually("fired after the delay") { daemon.lines("a") == ["1"] }
        let then = try seconds(try #require(try daemon.show("a")["next_fire"] as? String))
        #expect(then - next > 3500, "continues an hour after the resumed fire")
        #expect(try daemon.request("RESUME a after=-1s").hasPrefix("ERR bad-argument "))
    }

    @Test func leewayIsAcceptedAndShown() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD l every=50ms leeway=10ms count=2 \(Self.record(daemon, "l"))") == "OK")
        #expect((try daemon.show("l")["options"] as? [String])?.contains("leeway=10ms") == true)
        eventually("fires with leeway") { daemon.lines("l") == ["1", "2"] }
    }
}

/// Seconds since the epoch of an RFC 3339 timestamp.
func seconds(_ text: String) throws -> Double {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    guard let date = formatter.date(from: text) else { throw HarnessError("not RFC 3339: \(text)") }
    return date.timeIntervalSince1970
}

/// RFC 3339 in UTC with microseconds, as timerd prints it.
func rfc3339Micro(_ date: Date) -> String {
    let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded(.down))
    var seconds = time_t(micros / 1_000_000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                  parts.tm_hour, parts.tm_min, parts.tm_sec, Int(micros % 1_000_000))
}
