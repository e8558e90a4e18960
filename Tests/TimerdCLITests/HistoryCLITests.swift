import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol
import TimerdSystem

/// Five finished runs, newest first, as `HISTORY` sends them. "now" is 2026-11-29T16:00:00Z.
private let runs = [
    // A scheduled run that failed.
    RunRecord(
        run: 14, scheduled_at: "2026-11-29T15:55:00.000000Z", started_at: "2026-11-29T15:55:00.002400Z",
        ended_at: "2026-11-29T15:55:01.236400Z", result: "failed", exit_code: 3, http_status: nil, lateness_ms: 2.4,
        output: "disk full\n"),
    // Started by hand (`timerctl run`): no scheduled time, no lateness.
    RunRecord(
        run: 13, scheduled_at: nil, started_at: "2026-11-29T15:52:10.000000Z", ended_at: "2026-11-29T15:52:11.100000Z",
        result: "ok", exit_code: 0, http_status: nil, lateness_ms: nil, output: ""),
    // A fire missed while timerd was down, run at start-up (misfire=once): due yesterday, run today.
    RunRecord(
        run: 12, scheduled_at: "2026-11-28T23:55:00.000000Z", started_at: "2026-11-29T00:01:20.000000Z",
        ended_at: "2026-11-29T00:01:23.000000Z", result: "ok", exit_code: 0, http_status: nil, lateness_ms: 380_000,
        output: ""),
    // A webhook run: an HTTP status, no exit code.
    RunRecord(
        run: 11, scheduled_at: "2026-11-28T23:50:00.000000Z", started_at: "2026-11-28T23:50:00.000300Z",
        ended_at: "2026-11-28T23:50:00.250300Z", result: "failed", exit_code: nil, http_status: 503, lateness_ms: 0.3,
        output: "busy"),
    // Timed out: killed by a signal, which the history does not keep.
    RunRecord(
        run: 10, scheduled_at: "2026-11-28T22:00:00.000000Z", started_at: "2026-11-28T22:00:00.001000Z",
        ended_at: "2026-11-28T22:00:05.001000Z", result: "timeout", exit_code: nil, http_status: nil, lateness_ms: 1,
        output: ""),
]

@Suite("timerctl history")
struct HistoryCLITests {
    static let berlin = try! SystemTimeZones.zone(named: "Europe/Berlin")

    @Test func tableNewestFirstWithLocalTimes() {
        #expect(HistoryText.table(runs, now: fixedNow, zone: .utc) == """
            RUN  SCHEDULED            STARTED              DURATION  RESULT             LATE
            14   15:55:00             15:55:00             1.234s    failed (3)         2ms
            13   manual               15:52:10             1.1s      ok                 -
            12   2026-11-28 23:55:00  00:01:20             3s        ok                 6m20s
            11   2026-11-28 23:50:00  2026-11-28 23:50:00  250ms     failed (HTTP 503)  <1ms
            10   2026-11-28 22:00:00  2026-11-28 22:00:00  5s        timeout            1ms

            """)
    }

    @Test func clusterRunsNameTheirNode() {
        var mixed = Array(runs.prefix(2))
        mixed[0].node = "b"
        #expect(HistoryText.table(mixed, now: fixedNow, zone: .utc) == """
            RUN  SCHEDULED  STARTED   DURATION  RESULT      LATE  NODE
            14   15:55:00   15:55:00  1.234s    failed (3)  2ms   b
            13   manual     15:52:10  1.1s      ok          -     -

            """)
    }

    @Test func runsThatSayWhatTheyUsedGetCPUAndMemoryColumns() {
        var measured = Array(runs.prefix(2))
        measured[0].cpu_usage_ms = 812.5
        measured[0].memory_peak_bytes = 52_428_800
        measured[1].cpu_usage_ms = 3
        #expect(HistoryText.table(measured, now: fixedNow, zone: .utc) == """
            RUN  SCHEDULED  STARTED   DURATION  CPU    MEMORY    RESULT      LATE
            14   15:55:00   15:55:00  1.234s    813ms  50.0 MiB  failed (3)  2ms
            13   manual     15:52:10  1.1s      3ms    -         ok          -

            """)
    }

    @Test func timesAreInTheLocalZoneAndTodayIsTheLocalDay() {
        // 17:00 in Berlin: runs 11 and 12 were after local midnight, so today there.
        #expect(HistoryText.table(runs, now: fixedNow, zone: Self.berlin) == """
            RUN  SCHEDULED            STARTED              DURATION  RESULT             LATE
            14   16:55:00             16:55:00             1.234s    failed (3)         2ms
            13   manual               16:52:10             1.1s      ok                 -
            12   00:55:00             01:01:20             3s        ok                 6m20s
            11   00:50:00             00:50:00             250ms     failed (HTTP 503)  <1ms
            10   2026-11-28 23:00:00  2026-11-28 23:00:00  5s        timeout            1ms

            """)
    }

    @Test func localTimeDropsFractionsAndKeepsWhatDoesNotParse() {
        #expect(HistoryText.localTime("2026-11-29T15:59:59.999999Z", now: fixedNow, zone: .utc) == "15:59:59")
        #expect(HistoryText.localTime("2026-11-30T00:00:00Z", now: fixedNow, zone: .utc) == "2026-11-30 00:00:00")
        #expect(HistoryText.localTime("2025-11-29T16:00:00Z", now: fixedNow, zone: .utc) == "2025-11-29 16:00:00")
        #expect(HistoryText.localTime("1969-12-31T23:59:59.5Z", now: fixedNow, zone: .utc) == "1969-12-31 23:59:59")
        #expect(HistoryText.localTime("yesterday", now: fixedNow, zone: .utc) == "yesterday")
    }

    @Test func resultSummaries() {
        #expect(runs.map { HistoryText.resultSummary($0) } == ["failed (3)", "ok", "ok", "failed (HTTP 503)", "timeout"])
        #expect(HistoryText.resultSummary(runs[0], exitCodeLabel: "exit code ") == "failed (exit code 3)")
        var webhook = runs[3]
        webhook.result = "ok"
        webhook.http_status = 200
        #expect(HistoryText.resultSummary(webhook) == "ok")
        var killed = runs[0]
        killed.result = "killed"
        killed.exit_code = 143
        #expect(HistoryText.resultSummary(killed) == "killed (143)")
    }

    @Test func durationIsEndMinusStart() {
        #expect(runs.map(HistoryText.duration) == ["1.234s", "1.1s", "3s", "250ms", "5s"])
        var broken = runs[0]
        broken.ended_at = "later"
        #expect(HistoryText.duration(broken) == "-")
    }

    @Test func noRunsIsTheHeaderOnly() {
        #expect(HistoryText.table([], now: fixedNow, zone: .utc) == "RUN  SCHEDULED  STARTED  DURATION  RESULT  LATE\n")
    }

    @Test func throughRunTheTableOrTheJSONAsSent() {
        let payload = Payload.encode(runs)
        let result = runCLI(["history", "backup", "--limit", "5"], reply: .success(.ok(payload)), systemZone: Self.berlin)
        #expect(result.status == 0)
        #expect(result.stderr == "")
        #expect(result.sent.map { $0.request.encode() } == ["HISTORY backup limit=5"])
        #expect(result.stdout == HistoryText.table(runs, now: fixedNow, zone: Self.berlin))
        let json = runCLI(["history", "backup", "--json"], reply: .success(.ok(payload)))
        #expect(json.sent.map { $0.request.encode() } == ["HISTORY backup"])
        #expect(json.stdout == payload + "\n")
        #expect(runCLI(["history", "backup"], reply: .success(.ok("[]"))).stdout == "RUN  SCHEDULED  STARTED  DURATION  RESULT  LATE\n")
    }

    @Test func errorsAndUndecodablePayloads() {
        let missing = runCLI(["history", "nosuch"], reply: .success(.err(code: "no-such-job", message: "no job named nosuch")))
        #expect(missing.status == 1)
        #expect(missing.stderr == "timerctl: no job named nosuch (no-such-job)\n")
        let raw = runCLI(["history", "x"], reply: .success(.ok(#"{"runs":"later"}"#)))
        #expect(raw.status == 0)
        #expect(raw.stdout == #"{"runs":"later"}"# + "\n")
    }

    // MARK: show's recent runs

    private static func job(recent: [RunRecord]?) -> JobInfo {
        var job = JobInfo(name: "backup", state: .scheduled, source: "runtime", schedule: "every 5m")
        job.options = ["every=5m", "command=backup", "misfire=once"]
        job.next_fire = "2026-11-29T16:00:04.000000Z"
        job.runs = 14
        job.last_run = 14
        job.last_started = "2026-11-29T15:55:00.002400Z"
        job.last_finished = "2026-11-29T15:55:01.236400Z"
        job.last_result = .failed
        job.last_exit_code = 3
        job.last_output = "disk full\n"
        job.recent_runs = recent
        return job
    }

    @Test func showListsTheRecentRunsAfterTheLastRun() {
        let text = JobInfoText.detail(Self.job(recent: Array(runs.prefix(3))), now: fixedNow)
        #expect(text.hasSuffix("""
            last run:    #14
              started:   2026-11-29T15:55:00.002400Z (5m ago)
              finished:  2026-11-29T15:55:01.236400Z (4m59s ago)
              result:    failed
              exit code: 3
            recent runs:
              #14  5m ago      1.234s  failed (exit code 3)
              #13  7m50s ago   1.1s    ok
              #12  15h58m ago  3s      ok
            last output:
              disk full

            """), "\(text)")
        #expect(text.contains("options:     misfire=once\n"))
    }

    @Test func showHasNoRecentRunsWithoutThem() {
        for recent in [nil, []] as [[RunRecord]?] {
            let text = JobInfoText.detail(Self.job(recent: recent), now: fixedNow)
            #expect(!text.contains("recent runs"), "\(String(describing: recent))")
            #expect(text.contains("  exit code: 3\nlast output:\n"))
        }
    }

    @Test func showThroughRunDecodesTheRecentRuns() {
        let job = Self.job(recent: [runs[0]])
        let payload = Payload.encode(job)
        #expect(payload.contains(#""recent_runs":[{"#))
        let result = runCLI(["show", "backup"], reply: .success(.ok(payload)))
        #expect(result.stdout == JobInfoText.detail(job, now: fixedNow))
        #expect(result.stdout.contains("recent runs:\n  #14  5m ago  1.234s  failed (exit code 3)\n"))
    }
}

/// `timerctl why`: the flag maps onto `limit=`, and the table reads one fire per line.
@Suite("timerctl why")
struct WhyCLITests {
    @Test func lastIsTheLimit() throws {
        #expect(try request(["why", "backup", "--last", "3"]) == Request(verb: .why, positionals: ["backup"], options: [Option(key: "limit", value: "3")]))
        #expect(try request(["why", "backup"]) == Request(verb: .why, positionals: ["backup"]))
        #expect(usageError(["why"])?.message == "missing job name")
    }

    @Test func aTableNewestFirst() {
        let reply = #"[{"outcome":"ran","run":12,"lateness_ms":2.5,"scheduled":"2026-11-29T16:00:00.000000Z"},"#
            + #"{"outcome":"skipped","reason":"run 11 is still going (overlap=skip)","scheduled":"2026-11-29T15:00:00.000000Z"},"#
            + #"{"outcome":"ran","run":11,"lateness_ms":0.4,"result":"failed","scheduled":"2026-11-28T15:00:00.000000Z"}]"#
        let result = runCLI(["why", "backup"], reply: .success(.ok(reply)))
        #expect(result.status == 0)
        #expect(result.stdout == """
            SCHEDULED            OUTCOME  RUN  LATE  DETAIL
            16:00:00             ran      12   3ms   running
            15:00:00             skipped  -    -     run 11 is still going (overlap=skip)
            2026-11-28 15:00:00  ran      11   <1ms  failed

            """)
        let json = runCLI(["why", "backup", "--json"], reply: .success(.ok(reply)))
        #expect(json.stdout == reply + "\n")
    }
}
