import Glibc
import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol
import TimerdSystem

/// `timerctl simulate`: a config through the engine in virtual time, computed by timerctl (no daemon).
@Suite("timerctl simulate")
struct SimulateCLITests {
    /// Writes `config` into a temporary directory and runs `timerctl simulate --config FILE …`.
    func simulate(_ config: String, _ arguments: [String]) throws -> Transcript {
        let directory = try TemporaryDirectory()
        defer {
            _ = unlink(directory.path + "/t.conf")
            directory.remove()
        }
        let path = directory.path + "/t.conf"
        try FileSystem.writeAtomically(path, config)
        let transcript = Transcript()
        transcript.status = Timerctl.run(
            arguments: ["simulate", "--config", path] + arguments, context: offlineContext(transcript, verb: "simulate"))
        return transcript
    }

    static let backup = """
        [job "backup"]
        cron = 30 2 * * *
        timezone = Europe/Berlin
        misfire = once
        command = /usr/local/bin/backup

        """

    @Test func everyDecisionInTimeOrderWithTheDSTChangeAndADowntime() throws {
        let result = try simulate(Self.backup, [
            "--from", "2026-03-28T00:00:00Z", "--until", "2026-03-30T12:00:00Z",
            "--down", "2026-03-29T00:45:00Z..2026-03-29T01:20:00Z", "--run-duration", "backup=10m",
        ])
        #expect(result.stderr == "")
        #expect(result.status == ExitStatus.success)
        #expect(result.sent.isEmpty)
        // 02:30 CET is 01:30Z; on the 29th 02:30 does not exist (cron runs it at the change, 01:00Z), and
        // timerd is down then: misfire=once runs it at 01:20Z, 20 minutes late. Run numbers go on across the
        // restart, as the daemon's do.
        #expect(result.stdout == """
            2026-03-28T01:30:00.000000Z backup fire
            2026-03-28T01:30:00.000000Z backup start run 1
            2026-03-28T01:40:00.000000Z backup finish run 1 ok
            2026-03-29T00:45:00.000000Z - stop the daemon is down
            2026-03-29T01:20:00.000000Z - start
            2026-03-29T01:20:00.000000Z backup fire 20m late
            2026-03-29T01:20:00.000000Z backup start run 2 (due 2026-03-29T01:00:00.000000Z)
            2026-03-29T01:30:00.000000Z backup finish run 2 ok
            2026-03-30T00:30:00.000000Z backup fire
            2026-03-30T00:30:00.000000Z backup start run 3
            2026-03-30T00:40:00.000000Z backup finish run 3 ok

            """)
    }

    @Test func jsonHasOneObjectPerDecision() throws {
        let result = try simulate("""
            [job "tick"]
            every = 10s
            command = sleep 30

            """, ["--from", "2026-01-05T00:00:00Z", "--until", "2026-01-05T00:00:25Z", "--run-duration", "tick=15s", "--json"])
        #expect(result.status == ExitStatus.success)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines == [
            #"{"at":"2026-01-05T00:00:10.000000Z","event":"fire","job":"tick","scheduled":"2026-01-05T00:00:10.000000Z"}"#,
            #"{"at":"2026-01-05T00:00:10.000000Z","event":"start","job":"tick","run":1,"scheduled":"2026-01-05T00:00:10.000000Z"}"#,
            #"{"at":"2026-01-05T00:00:20.000000Z","event":"fire","job":"tick","scheduled":"2026-01-05T00:00:20.000000Z"}"#,
            #"{"at":"2026-01-05T00:00:20.000000Z","event":"skip","job":"tick","reason":"run 1 is still going (overlap=skip)","scheduled":"2026-01-05T00:00:20.000000Z"}"#,
            #"{"at":"2026-01-05T00:00:25.000000Z","event":"finish","job":"tick","result":"ok","run":1}"#,
        ])
    }

    /// A `miss` (or `skip`) standing for several fires says how many in JSON too, as the text's `N fires`
    /// does; a single fire has no `count`.
    @Test func jsonCountsTheFiresAMissStandsFor() throws {
        let config = """
            [job "tenmin"]
            calendar = *:0/10
            timezone = UTC
            command = true

            """
        let arguments = ["--from", "2026-01-05T00:01:00Z", "--until", "2026-01-05T01:20:00Z", "--clock-step", "2026-01-05T00:05:00Z=+1h"]
        let text = try simulate(config, arguments)
        #expect(text.stdout.contains("2026-01-05T01:05:00.000000Z tenmin miss 5 fires (due 2026-01-05T00:10:00.000000Z)"), "\(text.stdout)")
        let json = try simulate(config, arguments + ["--json"])
        #expect(json.status == ExitStatus.success)
        let lines = json.stdout.split(separator: "\n").map(String.init)
        let miss = try #require(lines.first { $0.contains(#""event":"miss""#) })
        #expect(miss.hasPrefix(#"{"at":"2026-01-05T01:05:00.000000Z","count":5,"event":"miss","job":"tenmin","#), "\(miss)")
        #expect(lines.filter { $0.contains(#""count""#) } == [miss])
    }

    @Test func theSameInputGivesTheSameOutput() throws {
        let config = """
            [job "j"]
            every = 1m
            jitter = 20s
            command = true

            """
        let arguments = ["--from", "2026-01-05T00:00:00Z", "--until", "2026-12-05T02:00:00Z", "--clock-step", "2026-01-05T01:00:00Z=-30m"]
        let one = try simulate(config, arguments)
        let two = try simulate(config, arguments)
        #expect(one.status == ExitStatus.success)
        #expect(one.stdout == two.stdout)
        #expect(one.stdout.contains("- clock clock stepped by -30m"))
        let other = try simulate(config, arguments + ["--seed", "7"])
        #expect(other.stdout != one.stdout, "another seed, other jitter")
    }

    @Test func badInputIsAClearError() throws {
        let config = "[job \"a\"]\nevery = 1m\ncommand = true\n"
        for (arguments, message) in [
            (["--until", "tomorrow"], "timerctl: --until: invalid time \"tomorrow\""),
            (["--until", "2026-01-05T00:00:00Z", "--from", "2026-12-06T00:00:00Z"], "is not after --from"),
            (["--until", "2026-12-06T00:00:00Z", "--run-duration", "a"], "--run-duration: expected JOB=DUR"),
            (["--until", "2026-12-06T00:00:00Z", "--run-duration", "nope=1s"], "the config has no job named nope"),
            (["--until", "2026-12-06T00:00:00Z", "--down", "2026-12-05T02:00:00Z"], "--down: expected FROM..TO"),
            (["--until", "2026-12-06T00:00:00Z", "--clock-step", "2026-01-05T02:00:00Z=soon"], "--clock-step:"),
        ] {
            let result = try simulate(config, arguments)
            #expect(result.status == ExitStatus.daemonError, "\(arguments)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            #expect(result.stdout == "")
        }
        let typo = try simulate("[job \"a\"]\nevry = 1m\ncommand = true\n", ["--until", "2026-12-06T00:00:00Z"])
        #expect(typo.status == ExitStatus.daemonError)
        #expect(typo.stderr.contains("t.conf:2:"), "\(typo.stderr)")
    }

    @Test func untilMayBeASpanAfterFrom() throws {
        let config = "[job \"a\"]\nevery = 1h\ncommand = true\n"
        let span = try simulate(config, ["--from", "2026-01-05T00:00:00Z", "--until", "+3h"])
        let time = try simulate(config, ["--from", "2026-01-05T00:00:00Z", "--until", "2026-01-05T03:00:00Z"])
        #expect(span.status == ExitStatus.success)
        #expect(span.stdout == time.stdout)
        #expect(span.stdout.split(separator: "\n").count == 9)
        let bad = try simulate(config, ["--until", "+soon"])
        #expect(bad.status == ExitStatus.daemonError && bad.stderr.hasPrefix("timerctl: --until: "))
    }

    @Test func theCommandLineNeedsAConfigAndAnEnd() {
        #expect(usageError(["simulate", "--until", "2026-12-06T00:00:00Z"])?.message == "missing --config")
        #expect(usageError(["simulate", "--config", "x.conf"])?.message == "missing --until")
        #expect(usageError(["simulate", "--config", "a", "--config", "b", "--until", "2026-12-06T00:00:00Z"])?.message == "give --config only once")
    }
}
