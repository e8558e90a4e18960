import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol

/// A job that has run and failed, with everything filled in. "now" is 2026-11-29T16:00:00Z.
private func backupJob() -> JobInfo {
    var job = JobInfo(name: "backup", state: .scheduled, source: "config", schedule: "every 5m")
    job.declared_at = "/etc/timerd/timerd.conf:12"
    job.options = ["every=5m", "command=tar czf /b.tgz /home", "timeout=30s", "env=A=1", "meta=note=two words"]
    job.next_fire = "2026-11-29T16:00:04.000000Z"
    job.runs = 12
    job.skipped = 1
    job.last_skip = JobInfo.SkippedFire(at: "2026-11-29T15:58:00.000000Z", reason: "still running (run 11)")
    job.last_run = 12
    job.last_started = "2026-11-29T15:59:57.000000Z"
    job.last_finished = "2026-11-29T15:59:58.234000Z"
    job.last_result = .failed
    job.last_exit_code = 3
    job.last_duration_ms = 1234
    job.last_lateness_ms = 2.4
    job.last_reason = "exited with status 3"
    job.last_output = "line one\n\nline three\n"
    return job
}

private func command(_ arguments: String...) -> Command {
    try! CommandParser.parse(arguments)
}

@Suite("output formatting")
struct FormatterTests {
    // MARK: Relative times and spans

    @Test("relative times", arguments: [
        (4_000_000_000, "in 4s"), (130_000_000_000, "in 2m10s"), (-3_000_000_000, "3s ago"), (0, "now"),
        (400_000_000, "now"), (-499_000_000, "now"), (600_000_000, "in 1s"), (120_000_000_000, "in 2m"),
        (3_600_000_000_000, "in 1h"), (3_661_000_000_000, "in 1h1m"), (90_061_000_000_000, "in 1d1h"),
        (-259_200_000_000_000, "3d ago"),
    ] as [(Int64, String)])
    func relative(offset: Int64, text: String) {
        let time = WallTime(nanosecondsSinceEpoch: fixedNow.nanosecondsSinceEpoch + offset)
        #expect(TimeText.relative(time, now: fixedNow) == text)
    }

    @Test func relativeOfTextHandlesNullAndGarbage() {
        #expect(TimeText.relative(nil as String?, now: fixedNow) == "-")
        #expect(TimeText.relative("2026-11-29T16:00:04.000000Z", now: fixedNow) == "in 4s")
        #expect(TimeText.relative("soon", now: fixedNow) == "soon")
    }

    @Test("millisecond spans", arguments: [
        (0, "0ms"), (0.3, "<1ms"), (2.4, "2ms"), (999.4, "999ms"), (1234, "1.234s"), (1500, "1.5s"), (2000, "2s"),
        (59_999, "59.999s"), (125_000, "2m5s"),
    ] as [(Double, String)])
    func milliseconds(ms: Double, text: String) {
        #expect(TimeText.milliseconds(ms) == text)
    }

    // MARK: list

    @Test func listTableIsAlignedWithRelativeTimes() {
        var paused = JobInfo(name: "nightly-report", state: .paused, source: "runtime", schedule: "at 2026-12-01T02:00:00.000000Z")
        paused.options = ["at=2026-12-01T02:00:00.000000Z", "command=report"]
        var killed = JobInfo(name: "sync", state: .scheduled, source: "runtime", schedule: "every 1h")
        killed.next_fire = "2026-11-29T16:02:10.000000Z"
        killed.last_started = "2026-11-29T14:55:00.000000Z"
        killed.last_finished = "2026-11-29T14:55:30.000000Z"
        killed.last_result = .timeout
        killed.last_signal = 9
        var running = JobInfo(name: "x", state: .finished, source: "runtime", schedule: "in 5s")
        running.running = 1
        running.last_started = "2026-11-29T15:59:59.000000Z"
        let text = JobInfoText.table([backupJob(), paused, killed, running], now: fixedNow)
        #expect(text == """
            NAME            STATE      SCHEDULE                        NEXT      LAST      RESULT
            backup          scheduled  every 5m                        in 4s     3s ago    failed (3)
            nightly-report  paused     at 2026-12-01T02:00:00.000000Z  -         -         -
            sync            scheduled  every 1h                        in 2m10s  1h5m ago  timeout (SIGKILL)
            x               finished   in 5s                           -         1s ago    running

            """)
    }

    @Test func emptyListIsTheHeaderOnly() {
        #expect(JobInfoText.table([], now: fixedNow) == "NAME  STATE  SCHEDULE  NEXT  LAST  RESULT\n")
    }

    @Test func resultSummaries() {
        var job = JobInfo(name: "a", state: .scheduled, source: "runtime", schedule: "every 1s")
        #expect(JobInfoText.resultSummary(job) == "-")
        job.last_result = .ok
        job.last_exit_code = 0
        #expect(JobInfoText.resultSummary(job) == "ok")
        job.last_result = .failed
        job.last_exit_code = 3
        #expect(JobInfoText.resultSummary(job) == "failed (3)")
        job.last_exit_code = nil
        job.last_result = .killed
        job.last_signal = 15
        #expect(JobInfoText.resultSummary(job) == "killed (SIGTERM)")
        job.last_signal = nil
        job.last_result = .failed
        job.last_http_status = 503
        #expect(JobInfoText.resultSummary(job) == "failed (HTTP 503)")
        job.last_result = .ok
        job.last_http_status = 200
        #expect(JobInfoText.resultSummary(job) == "ok")
        job.last_run = 1
        job.last_started = "2026-11-29T16:00:00.000000Z"
        job.last_finished = "2026-11-29T16:00:00.100000Z"
        let show = JobInfoText.detail(job, now: fixedNow)
        #expect(show.contains("  status:    HTTP 200\n"), "show: \(show)")
    }

    @Test func listOutputThroughRun() throws {
        let payload = Payload.encode([backupJob()])
        let result = runCLI(["list"], reply: .success(.ok(payload)))
        #expect(result.status == 0)
        #expect(result.stdout == JobInfoText.table([backupJob()], now: fixedNow))
        let json = runCLI(["list", "--json"], reply: .success(.ok(payload)))
        #expect(json.stdout == payload + "\n")
        #expect(try Payload.decode([JobInfo].self, from: json.stdout) == [backupJob()])
    }

    // MARK: show

    @Test func showBlock() {
        #expect(JobInfoText.detail(backupJob(), now: fixedNow) == """
            name:        backup
            state:       scheduled
            source:      config, declared at /etc/timerd/timerd.conf:12
            schedule:    every 5m
            command:     tar czf /b.tgz /home
            options:     timeout=30s env=A=1 meta='note=two words'
            next fire:   2026-11-29T16:00:04.000000Z (in 4s)
            runs:        12
            running:     0
            pending:     0
            skipped:     1 (last 2m ago: still running (run 11))
            last run:    #12
              started:   2026-11-29T15:59:57.000000Z (3s ago)
              lateness:  2ms
              finished:  2026-11-29T15:59:58.234000Z (2s ago)
              result:    failed
              exit code: 3
              duration:  1.234s
              reason:    exited with status 3
            last output:
              line one

              line three

            """)
    }

    @Test func showBlockOfAFreshJob() {
        var job = JobInfo(name: "once", state: .scheduled, source: "runtime", schedule: "in 1h")
        job.options = ["in=1h", "argv=/bin/echo 'a b'"]
        job.next_fire = "2026-11-29T17:00:00.000000Z"
        #expect(JobInfoText.detail(job, now: fixedNow) == """
            name:        once
            state:       scheduled
            source:      runtime
            schedule:    in 1h
            argv:        /bin/echo 'a b'
            next fire:   2026-11-29T17:00:00.000000Z (in 1h)
            runs:        0
            running:     0
            pending:     0
            skipped:     0
            last run:    never

            """)
    }

    @Test func showBlockNamesTheNodeInClusterMode() {
        var job = JobInfo(name: "once", state: .scheduled, source: "runtime", schedule: "in 1h")
        job.cluster = true
        job.node = "b"
        #expect(JobInfoText.detail(job, now: fixedNow).contains("\ncluster:     shared; runs on node b\n"))
        job.node = nil
        job.state = .waiting
        job.waiting_reason = "no live member has every tag of run_on=gpu (members: a, b)"
        let waiting = JobInfoText.detail(job, now: fixedNow)
        #expect(waiting.contains("\nstate:       waiting\n"))
        #expect(waiting.contains("\ncluster:     shared; waiting: no live member has every tag of run_on=gpu (members: a, b)\n"))
        job.cluster = false
        job.node = "a"
        #expect(JobInfoText.detail(job, now: fixedNow).contains("\ncluster:     this node's own (a)\n"))
    }

    @Test func showBlockSaysWhichNodesASharedJobRunsOn() {
        var job = JobInfo(name: "report", state: .scheduled, source: "runtime", schedule: "every 1h")
        job.options = ["every=1h", "command=true", "cluster=yes", "run_on=ssd,eu-west"]
        job.cluster = true
        job.node = "b"
        job.run_on = ["ssd", "eu-west"]
        let text = JobInfoText.detail(job, now: fixedNow)
        #expect(text.contains("\ncluster:     shared; runs on node b\nrun on:      nodes tagged ssd, eu-west\n"))
        #expect(text.contains("\noptions:     cluster=yes\n"))  // run_on has its line
        job.run_on = []
        #expect(!JobInfoText.detail(job, now: fixedNow).contains("run on"))
    }

    @Test func showBlockWhileTheLastRunIsGoing() {
        var job = backupJob()
        job.running = 1
        job.last_run = 13
        job.last_started = "2026-11-29T15:59:59.000000Z"
        job.last_output = ""
        let text = JobInfoText.detail(job, now: fixedNow)
        #expect(text.hasSuffix("""
            last run:    #13
              started:   2026-11-29T15:59:59.000000Z (1s ago)
              lateness:  2ms
              result:    running
              previous:  failed (exit code 3), finished 2s ago
            last output: (empty)

            """))
    }

    @Test func showThroughRunDecodesOrPrintsJSON() {
        let payload = Payload.encode(backupJob())
        #expect(runCLI(["show", "backup"], reply: .success(.ok(payload))).stdout == JobInfoText.detail(backupJob(), now: fixedNow))
        #expect(runCLI(["--json", "show", "backup"], reply: .success(.ok(payload))).stdout == payload + "\n")
    }

    @Test func undecodablePayloadIsPrintedRaw() {
        let result = runCLI(["show", "backup"], reply: .success(.ok(#"{"name":"backup","surprise":true}"#)))
        #expect(result.status == 0)
        #expect(result.stdout == #"{"name":"backup","surprise":true}"# + "\n")
    }

    // MARK: Other verbs

    @Test func runPrintsTheStatus() {
        #expect(runCLI(["run", "a"], reply: .success(.ok(#"{"status":"queued"}"#))).stdout == "queued\n")
        #expect(runCLI(["run", "a", "--json"], reply: .success(.ok(#"{"status":"queued"}"#))).stdout == #"{"status":"queued"}"# + "\n")
    }

    @Test func execPrintsTheGeneratedName() {
        let reply = Result<Reply, ClientError>.success(.ok(#"{"name":"exec-7"}"#))
        #expect(runCLI(["exec", "--start", "1s", "--command", "true"], reply: reply).stdout == "exec-7\n")
        #expect(runCLI(["exec", "--json", "--start", "1s", "--command", "true"], reply: reply).stdout == #"{"name":"exec-7"}"# + "\n")
    }

    @Test func reloadPrintsASummary() {
        let payload = #"{"added":["x"],"changed":[],"removed":["a","b"],"unchanged":3}"#
        #expect(runCLI(["reload"], reply: .success(.ok(payload))).stdout
            == "reloaded: 1 added (x), 0 changed, 2 removed (a, b), 3 unchanged\n")
        #expect(runCLI(["reload", "--json"], reply: .success(.ok(payload))).stdout == payload + "\n")
    }

    @Test func pingPrintsPong() {
        let result = runCLI(["ping"])
        #expect(result.stdout == "pong\n")
        #expect(result.sent.map(\.request) == [Request(verb: .ping)])
    }

    @Test func quietVerbsPrintNothing() {
        for arguments in [["add", "x", "--in", "1s", "--command", "true"], ["cancel", "x"], ["pause", "x"], ["resume", "x"]] {
            let result = runCLI(arguments)
            #expect(result.status == 0)
            #expect(result.stdout == "" && result.stderr == "")
        }
    }

    @Test func versionPrintsClientAndDaemon() {
        let payload = #"{"protocol":1,"version":"0.2.0"}"#
        #expect(runCLI(["version"], reply: .success(.ok(payload))).stdout == "timerctl 0.1.0 (protocol 1)\ntimerd 0.2.0 (protocol 1)\n")
        #expect(runCLI(["version"], reply: .success(.ok(#"{"protocol":"2","version":"0.3.0"}"#))).stdout
            == "timerctl 0.1.0 (protocol 1)\ntimerd 0.3.0 (protocol 2)\n")
        #expect(runCLI(["version", "--json"], reply: .success(.ok(payload))).stdout
            == #"{"client":{"version":"0.1.0","protocol":1},"daemon":{"protocol":1,"version":"0.2.0"}}"# + "\n")
    }

    @Test func versionShowsTheClientEvenWithoutADaemon() {
        let result = runCLI(["version"], reply: .failure(.closedWithoutReply(path: "/s")))
        #expect(result.status == 3)
        #expect(result.stdout == "timerctl 0.1.0 (protocol 1)\n")
    }

    @Test func daemonErrorsExitOneWithMessageAndCode() {
        let reply = Reply.err(code: "bad-argument", message: #"every: invalid duration "banana""#)
        let result = runCLI(["add", "x", "--every", "banana", "--command", "true"], reply: .success(reply))
        #expect(result.status == 1)
        #expect(result.stdout == "")
        #expect(result.stderr == #"timerctl: every: invalid duration "banana" (bad-argument)"# + "\n")
        #expect(runCLI(["ping"], reply: .success(.err(code: "busy", message: ""))).stderr == "timerctl: busy\n")
    }

    @Test func renderIsPure() {
        let rendered = ReplyFormatter.render(.ok(#"{"status":"started"}"#), for: command("run", "a"), now: fixedNow)
        #expect(rendered == Rendered(stdout: "started\n"))
    }
}
