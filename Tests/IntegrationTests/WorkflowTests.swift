import Foundation
import Testing

/// Workflows over runs (issue #21): what a run of failures does to a job, through the release timerd.
@Suite struct WorkflowTests {
    @Test func failedRunsInARowPauseTheJobAndSaySoUntilItIsResumed() throws {
        let daemon = try Daemon()
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH") == #"OK {"watching":"all"}"#)
        let flag = daemon.directory + "/fixed"
        // Fails until the file exists.
        #expect(try daemon.request("ADD flaky every=50ms pause_after_failures=3 command='test -e \(flag)'") == "OK")
        var paused: [String: Any] = [:]
        while paused.isEmpty {
            let event = try WatchTests.event(try watcher.readLine())
            if event["job"] as? String == "flaky", event["event"] as? String == "paused" { paused = event }
        }
        let reason = "paused after 3 failed runs in a row (pause_after_failures=3); RESUME it once the cause is fixed"
        #expect(paused["reason"] as? String == reason)
        let info = try daemon.show("flaky")
        #expect(info["state"] as? String == "paused")
        #expect(info["paused_reason"] as? String == reason)
        #expect(info["runs"] as? Int == 3)
        #expect(try daemon.ctl("show", "flaky").stdout.contains("state:       paused (\(reason))"))
        #expect(daemon.logShows("job=flaky \(reason)"))
        // WHY says it with the run that paused it (once its record is written, behind the run's end).
        var why = ""
        try eventually("WHY has the pausing run") {
            why = try daemon.ctl("why", "flaky").stdout
            return why.contains("the job was paused after 3 failed runs in a row")
        }

        // Fixed and resumed: it runs again, and the reason is gone.
        _ = FileManager.default.createFile(atPath: flag, contents: nil)
        #expect(try daemon.request("RESUME flaky") == "OK")
        try eventually("an ok run") { try daemon.show("flaky")["last_result"] as? String == "ok" }
        let resumed = try daemon.show("flaky")
        #expect(resumed["state"] as? String == "scheduled" && resumed["paused_reason"] is NSNull)
        #expect(try daemon.request("CANCEL flaky") == "OK")
    }

    @Test func aFailedCommandIsRetriedEachAttemptARunOfItsOwn() throws {
        let daemon = try Daemon()
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH") == #"OK {"watching":"all"}"#)
        let tries = daemon.directory + "/tries"
        // Fails twice, then succeeds; each attempt notes TIMERD_ATTEMPT.
        let command = "echo $TIMERD_ATTEMPT >> \(tries); [ $(wc -l < \(tries)) -ge 3 ]"
        #expect(try daemon.request("ADD flaky in=10ms retries=3 retry_backoff=50ms command=\(Words.quote(command))") == "OK")
        var retrying: [[String: Any]] = []
        var finished: [[String: Any]] = []
        while finished.last?["result"] as? String != "ok" {
            let event = try WatchTests.event(try watcher.readLine())
            guard event["job"] as? String == "flaky" else { continue }
            if event["event"] as? String == "retrying" { retrying.append(event) }
            if event["event"] as? String == "finished" { finished.append(event) }
        }
        #expect(daemon.lines("tries") == ["1", "2", "3"])
        #expect(finished.map { $0["result"] as? String } == ["failed", "failed", "ok"])
        #expect(retrying.count == 2)
        #expect((retrying.first?["reason"] as? String)?.hasPrefix("attempt 1 of 4 failed; attempt 2 in ") == true, "\(retrying)")
        // Each attempt is a run in the history, with its attempt and the fire's scheduled time.
        var runs: [[String: Any]] = []
        try eventually("three runs in the history") {
            let reply = try daemon.request("HISTORY flaky")
            runs = (try? JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8))) as? [[String: Any]] ?? []
            return runs.count == 3
        }
        #expect(runs.map { $0["attempt"] as? Int } == [3, 2, 1])
        #expect(Set(runs.compactMap { $0["scheduled_at"] as? String }).count == 1)
        let table = try daemon.ctl("history", "flaky").stdout
        #expect(table.hasPrefix("RUN  TRY  SCHEDULED"), "\(table)")
        // WHY keeps one record for the fire, now its last attempt's.
        try eventually("WHY has the fire's last attempt") {
            let why = try daemon.ctl("--json", "why", "flaky").stdout
            return why.contains(#""result":"ok""#) && why.contains(#""run":3"#)
        }
        // It was a one-shot: finished once its last attempt ended.
        #expect(try daemon.show("flaky")["state"] as? String == "finished")
    }

    @Test func aRunByHandTakesParametersAndObeysTheOverlapPolicyUnlessForced() throws {
        let daemon = try Daemon()
        let gate = daemon.directory + "/gate"
        // Waits for the gate, then prints what the run was given.
        let command = "while [ ! -e \(gate) ]; do sleep 0.01; done; echo \"$GREETING $0 [$*]\""
        #expect(try daemon.request("ADD sh every=1h command=\(Words.quote(command))") == "OK")
        #expect(try daemon.request("RUN sh env=GREETING=hi -- a 'b c'") == #"OK {"status":"started"}"#)
        // Running, and overlap=skip: refused, unless forced.
        let refused = try daemon.ctl("run", "sh")
        #expect(refused.status == 1 && refused.stderr.contains("overlap=skip; RUN sh force=yes"), "\(refused.stderr)")
        #expect(try daemon.ctl("run", "sh", "--force", "--env", "GREETING=forced").stdout == "started\n")
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        var runs: [[String: Any]] = []
        try eventually("both runs in the history") {
            let reply = try daemon.request("HISTORY sh")
            runs = (try? JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8))) as? [[String: Any]] ?? []
            return runs.count == 2
        }
        let byRun = Dictionary(uniqueKeysWithValues: runs.map { ($0["run"] as? Int ?? 0, $0) })
        #expect(byRun[1]?["output"] as? String == "hi sh [a b c]\n")
        let first = try #require(byRun[1]?["parameters"] as? [String: Any])
        #expect(first["env"] as? [String] == ["GREETING=hi"] && first["arguments"] as? [String] == ["a", "b c"])
        #expect(byRun[2]?["output"] as? String == "forced /bin/sh []\n")  // no arguments: $0 stays the shell
        // A program job gets the arguments after its own; reserved names and webhooks are refused.
        #expect(try daemon.request("ADD pg every=1h -- /bin/echo x") == "OK")
        #expect(try daemon.ctl("run", "pg", "--", "y", "z").status == 0)
        try eventually("pg ran") { try daemon.show("pg")["last_output"] as? String == "x y z\n" }
        #expect(try daemon.request("RUN pg env=TIMERD_JOB=x").hasPrefix("ERR bad-argument env: TIMERD_JOB is reserved"))
        #expect(try daemon.request("RUN pg colour=red").hasPrefix("ERR bad-argument RUN takes env=NAME=VALUE and force=yes|no"))
        #expect(try daemon.request("ADD hook every=1h webhook=http://127.0.0.1:9/") == "OK")
        #expect(try daemon.request("RUN hook -- x").hasPrefix("ERR bad-argument hook sends a webhook"))
    }

    @Test func aPoolLetsOneOfItsJobsRunAtATime() throws {
        let gate = "$DIR/gate"
        let daemon = try Daemon(config: """
            [pool "heavy"]
            max_running = 1

            [job "one"]
            every = 1h
            pool = heavy
            command = echo one >> $DIR/order; while [ ! -e \(gate) ]; do sleep 0.01; done

            [job "two"]
            every = 1h
            pool = heavy
            command = echo two >> $DIR/order

            [job "free"]
            every = 1h
            command = echo free >> $DIR/order
            """)
        #expect(try daemon.request("RUN one") == #"OK {"status":"started"}"#)
        eventually("one started") { daemon.lines("order") == ["one"] }
        #expect(try daemon.request("RUN two") == #"OK {"status":"waiting"}"#)
        #expect(try daemon.request("RUN free") == #"OK {"status":"started"}"#)
        eventually("free ran") { daemon.lines("order") == ["one", "free"] }
        #expect(try daemon.show("two")["pending"] as? Int == 1)
        #expect(daemon.logShows("job=two fire waits for a slot of pool heavy (max_running=1 of its runs already going)"))
        _ = FileManager.default.createFile(atPath: daemon.directory + "/gate", contents: nil)
        eventually("two ran after one") { daemon.lines("order") == ["one", "free", "two"] }
        // A job over the socket must name a pool of the config.
        let refused = try daemon.request("ADD x every=1h pool=nope command=true")
        #expect(refused.hasPrefix(#"ERR bad-argument pool: no pool named "nope" in timerd's config (it has heavy)"#), "\(refused)")
    }

    @Test func aLogFileGetsEachRunBetweenHeaderAndTrailerAndRotates() throws {
        let daemon = try Daemon()
        let path = daemon.directory + "/runs.log"
        // Each run writes 3 KiB: with a 4 KiB limit the file turns over at the start of every second run.
        let command = "head -c 3000 /dev/zero | tr '\\0' x; echo; echo run $TIMERD_RUN"
        #expect(try daemon.request("ADD logged every=50ms count=5 log_file=\(path) log_max_size=4K log_keep=1 "
                                   + "command=\(Words.quote(command))") == "OK")
        try eventually("five runs") { try daemon.show("logged")["runs"] as? Int == 5 && daemon.show("logged")["running"] as? Int == 0 }
        // The trailers are written behind the runs' ends, on the log files' queue.
        var text = ""
        eventually("the last run's trailer") {
            text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            return text.contains("==> job=logged run=5 ended ")
        }
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("==> job=logged run=5 started ") == true, "\(lines.prefix(3))")
        #expect(lines.contains("run 5"))
        #expect(lines.last?.hasSuffix(": ok (exited with status 0) <==") == true, "\(lines.suffix(2))")
        // One older file kept (log_keep=1), holding the run before.
        let older = (try? String(contentsOfFile: path + ".1", encoding: .utf8)) ?? ""
        #expect(older.contains("==> job=logged run=4 started ") && older.contains("run 4"), "\(older.suffix(200))")
        #expect(!FileManager.default.fileExists(atPath: path + ".2"))
    }

    @Test func aRunsEndTriggersTheJobsThatFollowIt() throws {
        let daemon = try Daemon(config: """
            [job "extract"]
            every = 1h
            command = echo extract >> $DIR/order

            [job "load"]
            after = extract
            command = echo "load $TIMERD_TRIGGERED_BY $TIMERD_TRIGGER_RUN" >> $DIR/order; exit 3

            [job "alert"]
            after = load
            after_result = failure
            command = echo alert >> $DIR/order

            [job "report"]
            after = extract
            after_result = any
            command = echo report >> $DIR/order
            """)
        #expect(try daemon.request("RUN extract") == #"OK {"status":"started"}"#)
        // extract fans out to load and report; load fails, which triggers alert.
        eventually("the chain ran") { Set(daemon.lines("order")) == ["extract", "load extract 1", "report", "alert"] }
        #expect(daemon.lines("order").first == "extract")
        #expect(daemon.logShows("job=load triggered: extract run 1 succeeded (after=extract, after_result=success)"))
        let load = try daemon.show("load")
        #expect(load["schedule"] as? String == "when triggered (after=)" && load["next_fire"] is NSNull)
        // Over the socket the upstream must exist.
        #expect(try daemon.request("ADD x after=nope command=true").hasPrefix("ERR bad-argument after: no job named nope to follow"))
        #expect(try daemon.request("ADD y after=extract command=true") == "OK")
    }
}

