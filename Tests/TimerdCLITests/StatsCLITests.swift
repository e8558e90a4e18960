import Foundation
import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol

/// The `STATS` payload of the docs, as timerd sends it (sorted keys, one line).
private let statsPayload = #"""
    {"exec_ms":{"max":2.0,"p50":0.9,"p90":1.2,"p99":2.0,"samples":11,"window_seconds":300},\#
    "jobs":{"finished":2,"paused":1,"scheduled":3},\#
    "lateness_ms":{"max":2.1,"p50":0.12,"p90":0.4,"p99":1.3,"samples":57,"window_seconds":300},\#
    "mode":"default","pending":0,"requests":42,"rss_bytes":10485760,"running":1,\#
    "runs":{"failed":1,"killed":0,"ok":10,"timeout":0},"skipped":4,"uptime_seconds":3600.5,"version":"0.1.0"}
    """#

/// The same daemon just started: no samples in either window (percentiles null).
private let idlePayload = #"""
    {"exec_ms":{"max":null,"p50":null,"p90":null,"p99":null,"samples":0,"window_seconds":300},\#
    "jobs":{"finished":0,"paused":0,"scheduled":0},\#
    "lateness_ms":{"max":null,"p50":null,"p90":null,"p99":null,"samples":0,"window_seconds":300},\#
    "mode":"maintenance","pending":0,"requests":1,"rss_bytes":524288,"running":0,\#
    "runs":{"failed":0,"killed":0,"ok":0,"timeout":0},"skipped":0,"uptime_seconds":0.25,"version":"0.2.0"}
    """#

private func percentiles(
    samples: Int, _ p50: Double?, _ p90: Double?, _ p99: Double?, _ max: Double?, window: Double = 300
) -> DaemonStats.Percentiles {
    DaemonStats.Percentiles(window_seconds: window, samples: samples, p50: p50, p90: p90, p99: p99, max: max)
}

@Suite("timerctl stats")
struct StatsCLITests {
    // MARK: Parsing

    @Test func statsSendsTheVerbAlone() throws {
        #expect(try request(["stats"]) == Request(verb: .stats))
        #expect(try request(["stats"]).encode() == "STATS")
        let command = try CommandParser.parse(["--socket", "/tmp/s", "stats", "--json"])
        #expect(command == Command(verb: .stats, action: .send(.stats), output: .json, socket: "/tmp/s"))
        #expect(CLIVerb.stats.wireVerb == .stats)
    }

    @Test("usage errors", arguments: [
        (["stats", "x"], "unexpected argument 'x' (stats takes no arguments)"),
        (["stats", "--tag", "t"], "unknown option '--tag' for stats"),
        (["stats", "--json=yes"], "--json takes no value"),
        (["stat"], "unknown verb 'stat' (did you mean 'stats'?)"),
    ] as [([String], String)])
    func usageErrors(arguments: [String], message: String) {
        #expect(usageError(arguments)?.message == message)
        let result = runCLI(arguments)
        #expect(result.status == 2)
        #expect(result.sent.isEmpty)
    }

    @Test func helpIsAnsweredLocally() {
        for arguments in [["stats", "--help"], ["help", "stats"], ["stats", "-h"]] {
            let result = runCLI(arguments)
            #expect(result.status == 0)
            #expect(result.stdout == HelpText.verb(.stats))
            #expect(result.sent.isEmpty)
        }
    }

    // MARK: Output

    @Test func textBlockIsAligned() {
        let result = runCLI(["stats"], reply: .success(.ok(statsPayload)))
        #expect(result.status == 0)
        #expect(result.stderr == "")
        #expect(result.sent.map(\.request) == [Request(verb: .stats)])
        #expect(result.stdout == """
            jobs:       3 scheduled, 1 paused, 2 finished
            runs:       10 ok, 1 failed, 0 timeout, 0 killed; 1 running, 0 pending, 4 skipped
            lateness:   p50 0.12ms  p90 0.40ms  p99 1.30ms  max 2.10ms  (57 fires, last 5m)
            exec:       p50 0.90ms  p90 1.20ms  p99 2.00ms  max 2.00ms  (11 runs, last 5m)
            requests:   42
            memory:     10.0 MiB resident
            uptime:     1h0m0s
            mode:       default
            version:    0.1.0

            """)
    }

    @Test func waitingJobsAreCountedOnlyWhenThereAreSome() {
        // A daemon before `waiting` (absent) and one outside cluster mode (0) print the same line.
        for (jobs, line) in [
            (#""jobs":{"finished":2,"paused":1,"scheduled":3}"#, "jobs:       3 scheduled, 1 paused, 2 finished\n"),
            (#""jobs":{"finished":2,"paused":1,"scheduled":3,"waiting":0}"#, "jobs:       3 scheduled, 1 paused, 2 finished\n"),
            (#""jobs":{"finished":2,"paused":1,"scheduled":3,"waiting":4}"#, "jobs:       3 scheduled, 1 paused, 2 finished, 4 waiting\n"),
        ] {
            let payload = statsPayload.replacingOccurrences(of: #""jobs":{"finished":2,"paused":1,"scheduled":3}"#, with: jobs)
            let result = runCLI(["stats"], reply: .success(.ok(payload)))
            #expect(result.stdout.hasPrefix(line), "\(result.stdout)")
        }
    }

    @Test func runsInSaysTheCgroupsAndTheirControllers() {
        for (tracking, line) in [
            (#"{"by":"cgroup","cgroups":"/sys/fs/cgroup/t.service/runs","controllers":["cpu","memory"]}"#,
             "runs in:    cgroups under /sys/fs/cgroup/t.service/runs (controllers: cpu, memory)"),
            (#"{"by":"cgroup","cgroups":"/sys/fs/cgroup/unified/t.service/runs","controllers":[]}"#,
             "runs in:    cgroups under /sys/fs/cgroup/unified/t.service/runs (controllers: none)"),
            (#"{"by":"process-group","reason":"timerd is in the root cgroup"}"#,
             "runs in:    process groups (not cgroups: timerd is in the root cgroup)"),
        ] {
            let payload = statsPayload.replacingOccurrences(of: #""version":"#, with: #""run_tracking":\#(tracking),"version":"#)
            let result = runCLI(["stats"], reply: .success(.ok(payload)))
            #expect(result.stdout.contains("\n" + line + "\n"), "\(result.stdout)")
        }
    }

    @Test func noSamplesSaysSo() {
        let result = runCLI(["stats"], reply: .success(.ok(idlePayload)))
        #expect(result.stdout == """
            jobs:       0 scheduled, 0 paused, 0 finished
            runs:       0 ok, 0 failed, 0 timeout, 0 killed; 0 running, 0 pending, 0 skipped
            lateness:   no fires in the last 5m
            exec:       no runs in the last 5m
            requests:   1
            memory:     512.0 KiB resident
            uptime:     0s
            mode:       maintenance
            version:    0.2.0

            """)
    }

    @Test func jsonIsThePayloadVerbatim() {
        for arguments in [["stats", "--json"], ["--json", "stats"]] {
            let result = runCLI(arguments, reply: .success(.ok(statsPayload)))
            #expect(result.status == 0)
            #expect(result.stdout == statsPayload + "\n")
        }
    }

    @Test func theBlockMatchesTheDecodedPayload() throws {
        let stats = try Payload.decode(DaemonStats.self, from: statsPayload)
        #expect(StatsText.block(stats) == runCLI(["stats"], reply: .success(.ok(statsPayload))).stdout)
        #expect(ReplyFormatter.render(.ok(statsPayload), for: try CommandParser.parse(["stats"]), now: fixedNow)
            == Rendered(stdout: StatsText.block(stats)))
    }

    @Test func undecodablePayloadIsPrintedRaw() {
        let payload = #"{"jobs":3}"#
        #expect(runCLI(["stats"], reply: .success(.ok(payload))).stdout == payload + "\n")
    }

    @Test func daemonErrorExitsOne() {
        let result = runCLI(["stats"], reply: .success(.err(code: "unknown-verb", message: "unknown verb STATS")))
        #expect(result.status == 1)
        #expect(result.stdout == "")
        #expect(result.stderr == "timerctl: unknown verb STATS (unknown-verb)\n")
    }

    // MARK: Pieces

    @Test func percentileLines() {
        #expect(StatsText.percentiles(percentiles(samples: 1, 0.004, 0.004, 0.004, 0.004), sample: "fire")
            == "p50 0.00ms  p90 0.00ms  p99 0.00ms  max 0.00ms  (1 fire, last 5m)")
        #expect(StatsText.percentiles(percentiles(samples: 3, 1234.5, 1500, nil, 2000.126, window: 90), sample: "run")
            == "p50 1234.50ms  p90 1500.00ms  p99 -  max 2000.13ms  (3 runs, last 1m30s)")
        #expect(StatsText.percentiles(percentiles(samples: 0, nil, nil, nil, nil, window: 3600), sample: "run")
            == "no runs in the last 1h")
    }

    @Test("milliseconds with two decimals", arguments: [
        (0, "0.00ms"), (0.12, "0.12ms"), (0.4, "0.40ms"), (0.006, "0.01ms"), (1.3, "1.30ms"), (2.1, "2.10ms"),
        (999.999, "1000.00ms"), (-0.5, "-0.50ms"), (-0.001, "0.00ms"),
    ] as [(Double, String)])
    func milliseconds(ms: Double, text: String) {
        #expect(StatsText.milliseconds(ms) == text)
    }

    @Test("memory in binary units", arguments: [
        (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (10_485_760, "10.0 MiB"),
        (1_048_575, "1.0 MiB"), (3 << 30, "3.0 GiB"), (UInt64.max, "16.0 EiB"),
    ] as [(UInt64, String)])
    func bytes(count: UInt64, text: String) {
        #expect(StatsText.bytes(count) == text)
    }

    @Test("uptime with every unit down to seconds", arguments: [
        (0, "0s"), (0.9, "0s"), (59.99, "59s"), (60, "1m0s"), (3600.5, "1h0m0s"), (3661, "1h1m1s"),
        (86_400, "1d0h0m0s"), (93_784, "1d2h3m4s"), (-5, "0s"), (.nan, "0s"),
    ] as [(Double, String)])
    func uptime(seconds: Double, text: String) {
        #expect(StatsText.uptime(seconds: seconds) == text)
    }
}
