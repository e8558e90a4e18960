import Foundation
import Glibc
import Testing

/// Config files against the real daemon: loading, `RELOAD`/SIGHUP diff semantics, invalid files,
/// `--check-config`, includes and `max_running`.
@Suite struct ConfigReloadTests {
    @Test func configJobsLoadAndFire() throws {
        let daemon = try Daemon(config: """
            # two jobs that fire quickly
            [job "tick"]
            every = 100ms
            command = echo $TIMERD_JOB $TIMERD_RUN >> $DIR/tick.out

            [job "tock"]
            every = 100ms
            argv = /bin/sh -c 'echo tock >> "$1"' sh $DIR/tock.out
            """)
        eventually("tick fired 3 times") { daemon.lines("tick.out").count >= 3 }
        #expect(Array(daemon.lines("tick.out").prefix(3)) == ["tick 1", "tick 2", "tick 3"])
        eventually("tock fired 3 times") { daemon.lines("tock.out").count >= 3 }
        let info = try daemon.show("tick")
        #expect(info["source"] as? String == "config")
        #expect(info["declared_at"] as? String == daemon.configPath + ":2")
        #expect(info["schedule"] as? String == "every 100ms")
        #expect(try daemon.show("tock")["declared_at"] as? String == daemon.configPath + ":6")
        #expect(try daemon.listNames() == ["tick", "tock"])
        daemon.expectAlive()
    }

    @Test func reloadAppliesTheDifference() throws {
        let daemon = try Daemon(config: """
            [job "keep"]
            every = 100ms
            command = echo $TIMERD_RUN >> $DIR/keep.out

            [job "sleeper"]
            every = 100ms
            command = echo $TIMERD_RUN >> $DIR/sleeper.out

            [job "change"]
            every = 100ms
            command = echo old >> $DIR/change.out

            [job "gone"]
            every = 1h
            command = true
            """)
        #expect(try daemon.request("ADD rt every=1h command=true") == "OK")
        #expect(try daemon.request("PAUSE sleeper") == "OK")
        let sleeperRuns = try daemon.runs("sleeper")
        try eventually("keep ran twice") { try daemon.runs("keep") >= 2 }
        eventually("change ran with the old command") { daemon.lines("change.out").contains("old") }

        try daemon.writeConfig("""
            [job "keep"]
            every = 100ms
            command = echo $TIMERD_RUN >> $DIR/keep.out

            [job "sleeper"]
            every = 100ms
            command = echo $TIMERD_RUN >> $DIR/sleeper.out

            [job "change"]
            every = 150ms
            command = echo new >> $DIR/change.out

            [job "fresh"]
            every = 100ms
            command = echo fresh >> $DIR/fresh.out
            """)
        let keepBefore = try daemon.runs("keep")
        let summary = try daemon.reload()
        #expect(summary == ReloadReply(added: ["fresh"], changed: ["change"], removed: ["gone"], unchanged: 2))

        // Unchanged: the run counter carries on from where it was (not reset) and keeps growing.
        #expect(try daemon.runs("keep") >= keepBefore, "an unchanged job keeps its run counter")
        try eventually("keep keeps firing") { try daemon.runs("keep") >= keepBefore + 2 }
        let keepLines = daemon.lines("keep.out").compactMap { Int($0) }
        #expect(keepLines == Array(1...keepLines.count), "TIMERD_RUN numbering was not restarted by the reload")
        // Unchanged and paused before the reload: still paused.
        #expect(try daemon.state("sleeper") == "paused")
        // Changed: the new spec is live.
        let change = try daemon.show("change")
        #expect(change["schedule"] as? String == "every 150ms")
        #expect((change["options"] as? [String])?.contains("command=echo new >> \(daemon.directory)/change.out") == true)
        eventually("change runs the new command") { daemon.lines("change.out").contains("new") }
        // Removed and added.
        #expect(try daemon.request("SHOW gone").hasPrefix("ERR no-such-job "))
        eventually("fresh fires") { !daemon.lines("fresh.out").isEmpty }
        #expect(try daemon.show("fresh")["source"] as? String == "config")
        // The runtime job is untouched.
        let rt = try daemon.show("rt")
        #expect(rt["source"] as? String == "runtime")
        #expect(rt["state"] as? String == "scheduled")
        #expect(try daemon.listNames() == ["change", "fresh", "keep", "rt", "sleeper"])
        // The paused job really was not fired by the reload (keep, fresh and change did fire meanwhile).
        #expect(try daemon.runs("sleeper") == sleeperRuns)

        // Reloading the same file again changes nothing.
        #expect(try daemon.reload() == ReloadReply(added: [], changed: [], removed: [], unchanged: 4))
        #expect(try daemon.state("sleeper") == "paused")
        daemon.expectAlive()
    }

    @Test func changedPausedJobStaysPausedWithItsNewSpec() throws {
        let daemon = try Daemon(config: """
            [job "p"]
            every = 1h
            command = echo one
            """)
        #expect(try daemon.request("PAUSE p") == "OK")
        try daemon.writeConfig("""
            [job "p"]
            every = 2h
            command = echo two
            """)
        #expect(try daemon.reload() == ReloadReply(added: [], changed: ["p"], removed: [], unchanged: 0))
        let info = try daemon.show("p")
        #expect(info["state"] as? String == "paused", "a changed job keeps its pause")
        #expect(info["schedule"] as? String == "every 2h")
        #expect(info["next_fire"] is NSNull)
        #expect(try daemon.request("RESUME p") == "OK")
        #expect(try daemon.state("p") == "scheduled")
        daemon.expectAlive()
    }

    @Test func changedOneShotFiresAgainAndMovedJobKeepsRunning() throws {
        let daemon = try Daemon(config: """
            [job "once"]
            in = 10ms
            command = echo first >> $DIR/once.out

            [job "steady"]
            every = 1h
            command = true
            """)
        eventually("the one-shot ran and finished") {
            daemon.lines("once.out") == ["first"] && (try? daemon.state("once")) == "finished"
        }
        // `in` counts from the reload that changes the job: it fires again, with the new command. The
        // unchanged job only moved down two lines: it stays unchanged, and SHOW points at its new line.
        try daemon.writeConfig("""
            [job "once"]
            in = 10ms
            command = echo second >> $DIR/once.out

            # a comment pushes the next job down
            # by two lines
            [job "steady"]
            every = 1h
            command = true
            """)
        #expect(try daemon.reload() == ReloadReply(added: [], changed: ["once"], removed: [], unchanged: 1))
        eventually("the changed one-shot fired again") { daemon.lines("once.out") == ["first", "second"] }
        eventually("and finished again") { (try? daemon.state("once")) == "finished" }
        #expect(try daemon.show("steady")["declared_at"] as? String == daemon.configPath + ":7")
        #expect(try daemon.state("steady") == "scheduled")
        daemon.expectAlive()
    }

    @Test func invalidReloadChangesNothing() throws {
        let daemon = try Daemon(config: """
            [job "a"]
            every = 100ms
            command = echo a >> $DIR/a.out
            """)
        eventually("a fires") { !daemon.lines("a.out").isEmpty }
        let optionsBefore = try daemon.options("a")

        try daemon.writeConfig("""
            [job "a"]
            every = 1h
            command = echo changed

            [job "b"]
            every = 100ms
            command = echo b >> $DIR/b.out

            [job "c"]
            every = banana
            command = true
            colour = red
            """)
        let reply = try daemon.request("RELOAD")
        #expect(reply.hasPrefix("ERR invalid-config \(daemon.configPath):10: every: "), "\(reply)")
        #expect(reply.hasSuffix("(and 1 more)"), "\(reply)")
        // The log is written by its own queue: wait for the line rather than assume it is there.
        eventually("the rejection in the log") { daemon.log.contains("reload rejected: \(daemon.configPath):12: unknown key \"colour\"") }

        // Nothing changed: same jobs, same spec, still firing; no job from the rejected file.
        #expect(try daemon.listNames() == ["a"])
        #expect(try daemon.options("a") == optionsBefore)
        let runs = try daemon.runs("a")
        try eventually("a still fires") { try daemon.runs("a") >= runs + 2 }
        #expect(try daemon.request("SHOW b").hasPrefix("ERR no-such-job "))

        // A file that cannot be parsed at all (bad section) is rejected the same way.
        try daemon.writeConfig("[jobs \"a\"]\nevery = 1s\n")
        #expect(try daemon.request("RELOAD").hasPrefix("ERR invalid-config \(daemon.configPath):1: "))
        #expect(try daemon.listNames() == ["a"])

        // A deleted explicit config is an error too, not "no jobs".
        try FileManager.default.removeItem(atPath: daemon.configPath)
        let missing = try daemon.request("RELOAD")
        #expect(missing.hasPrefix("ERR invalid-config \(daemon.configPath): "), "\(missing)")
        #expect(try daemon.listNames() == ["a"])
        daemon.expectAlive()
    }

    @Test func configJobNamedLikeRuntimeJobIsRejected() throws {
        let daemon = try Daemon(config: """
            [job "a"]
            every = 1h
            command = echo a
            """)
        #expect(try daemon.request("ADD rt every=2h command=true") == "OK")
        try daemon.writeConfig("""
            [job "a"]
            every = 3h
            command = echo changed

            [job "rt"]
            every = 1h
            command = echo from-config

            [job "b"]
            every = 1h
            command = true
            """)
        let reply = try daemon.request("RELOAD")
        #expect(reply.hasPrefix("ERR invalid-config \(daemon.configPath):5: "), "\(reply)")
        #expect(reply.contains("\"rt\""), "\(reply)")
        // Nothing changed: a keeps its old spec, b was not added, rt is still the runtime job.
        #expect(try daemon.listNames() == ["a", "rt"])
        #expect(try daemon.show("a")["schedule"] as? String == "every 1h")
        let rt = try daemon.show("rt")
        #expect(rt["source"] as? String == "runtime")
        #expect(rt["schedule"] as? String == "every 2h")
        #expect(rt["declared_at"] is NSNull)

        // Once the runtime job is cancelled, the same file loads.
        #expect(try daemon.request("CANCEL rt") == "OK")
        #expect(try daemon.reload() == ReloadReply(added: ["rt", "b"], changed: ["a"], removed: [], unchanged: 0))
        #expect(try daemon.show("rt")["source"] as? String == "config")
        // And now ADD of that name is refused: it exists (declared in the config).
        #expect(try daemon.request("ADD rt every=1h command=true").hasPrefix("ERR exists "))
        daemon.expectAlive()
    }

    @Test func configJobsCannotBeCancelledButCanBePaused() throws {
        let daemon = try Daemon(config: """
            [job "cfg"]
            every = 100ms
            command = true

            [job "clock"]
            every = 100ms
            command = true
            """)
        #expect(try daemon.request("ADD rt every=1h command=true") == "OK")
        #expect(try daemon.request("CANCEL cfg").hasPrefix("ERR declared-in-config "))
        // All or nothing: the runtime job named alongside is not cancelled either.
        #expect(try daemon.request("CANCEL rt cfg").hasPrefix("ERR declared-in-config "))
        #expect(try daemon.listNames() == ["cfg", "clock", "rt"])

        try eventually("cfg ran") { try daemon.runs("cfg") >= 1 }
        #expect(try daemon.request("PAUSE cfg") == "OK")
        #expect(try daemon.state("cfg") == "paused")
        let pausedRuns = try daemon.runs("cfg")
        // Use the other job as the clock: while it fires 3 more times, the paused one does not fire.
        let clock = try daemon.runs("clock")
        try eventually("clock ran 3 more times") { try daemon.runs("clock") >= clock + 3 }
        #expect(try daemon.runs("cfg") == pausedRuns, "a paused config job does not fire")

        #expect(try daemon.request("RESUME cfg") == "OK")
        #expect(try daemon.state("cfg") == "scheduled")
        try eventually("cfg fires again") { try daemon.runs("cfg") > pausedRuns }
        daemon.expectAlive()
    }

    @Test func sighupReloads() throws {
        let daemon = try Daemon(config: """
            [job "a"]
            every = 1h
            command = true
            """)
        try daemon.writeConfig("""
            [job "b"]
            every = 100ms
            command = echo b >> $DIR/b.out
            """)
        daemon.signal(SIGHUP)
        eventually("b added by SIGHUP") { (try? daemon.show("b")) != nil }
        #expect(try daemon.request("SHOW a").hasPrefix("ERR no-such-job "))
        eventually("b fires") { !daemon.lines("b.out").isEmpty }
        #expect(daemon.logShows("SIGHUP"))

        // An invalid file on SIGHUP is logged and changes nothing; the daemon carries on.
        try daemon.writeConfig("""
            [job "b"]
            every = never
            command = true
            """)
        daemon.signal(SIGHUP)
        eventually("the rejected reload is logged") {
            daemon.log.contains("reload rejected: \(daemon.configPath):2: every: ")
        }
        #expect(try daemon.listNames() == ["b"])
        #expect(try daemon.options("b").contains("every=100ms"))
        daemon.expectAlive()
    }

    // MARK: - --check-config and start-up

    @Test func checkConfig() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let timerd = try Daemon.binary("timerd")

        let good = dir + "/good.conf"
        try """
            [daemon]
            max_running = 2

            [job "a"]
            every = 5s
            command = true

            [job "b"]
            in = 1h
            argv = /bin/echo hi
            """.write(toFile: good, atomically: true, encoding: .utf8)
        let ok = try Daemon.run(timerd, ["--check-config", "--config", good])
        #expect(ok.status == 0, "\(ok)")
        #expect(ok.stdout.contains("config OK: 2 jobs"), "\(ok.stdout)")
        #expect(ok.stdout.contains(good))
        #expect(ok.stderr.isEmpty, "\(ok.stderr)")

        let bad = dir + "/bad.conf"
        try """
            [daemon]
            max_running = many

            [job "a"]
            every = 5s
            command = true
            timeout = soon

            [job "b"]
            command = true
            """.write(toFile: bad, atomically: true, encoding: .utf8)
        let failed = try Daemon.run(timerd, ["--check-config", "--config", bad])
        #expect(failed.status == 1, "\(failed)")
        #expect(failed.stderr.split(separator: "\n").map(String.init) == [
            "\(bad):2: max_running: expected a whole number ≥ 1, got \"many\"",
            "\(bad):7: timeout: invalid duration \"soon\": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)",
            "\(bad):9: a schedule is required: every=DUR, in=DUR, at=TIME, cron=EXPR, calendar=SPEC, or after=JOB",
        ])
        #expect(failed.stdout.isEmpty, "\(failed.stdout)")

        let missing = try Daemon.run(timerd, ["--check-config", "--config", dir + "/nope.conf"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("\(dir)/nope.conf: cannot read: No such file or directory"), "\(missing.stderr)")
        #expect(!missing.stdout.contains("config OK"))
    }

    @Test func invalidConfigAtStartExitsWithoutReady() throws {
        let notifyDir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: notifyDir) }
        let notify = try NotifySocket(path: notifyDir + "/notify.sock")
        let daemon = try Daemon(config: """
            [job "a"]
            every = 1s
            command = true

            [job "b"]
            every = 5 parsecs
            command = true
            """, environment: ["NOTIFY_SOCKET": notify.path], waitForReady: false)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus != 0)
        #expect(daemon.logShows("\(daemon.configPath):6: every: invalid duration \"5 parsecs\""), "\(daemon.log)")
        #expect(daemon.logShows("not starting"))
        #expect(!FileManager.default.fileExists(atPath: daemon.socket), "no control socket was created")
        // The process is gone, so anything it sent is already queued on the notify socket.
        #expect(!notify.waitFor("READY=1", timeout: 0.2), "timerd sent READY=1 with an invalid config")
    }

    // MARK: - Includes

    @Test func includedFilesAndReloadPicksUpNewOnes() throws {
        // The included directory exists before the daemon starts, so the first file is read at start-up.
        let jobsDir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: jobsDir) }
        try """
            [job "one"]
            every = 100ms
            command = echo one >> \(jobsDir)/one.out
            """.write(toFile: jobsDir + "/one.conf", atomically: true, encoding: .utf8)
        try "[job \"ignored\"]\nevery = 1h\ncommand = true\n".write(toFile: jobsDir + "/notes.txt", atomically: true, encoding: .utf8)
        let daemon = try Daemon(config: """
            [daemon]
            include = \(jobsDir)/*.conf
            include = jobs.d/*.conf

            [job "main"]
            every = 1h
            command = true
            """)
        #expect(try daemon.listNames() == ["main", "one"])
        #expect(try daemon.show("one")["declared_at"] as? String == jobsDir + "/one.conf:1")
        eventually("the included job fires") { (try? String(contentsOfFile: jobsDir + "/one.out", encoding: .utf8)) != nil }

        // A file dropped into the relative jobs.d (missing at start: a wildcard matching nothing is fine).
        try daemon.writeFile("jobs.d/two.conf", """
            # dropped in later
            [job "two"]
            every = 100ms
            command = echo two >> $DIR/two.out
            """)
        #expect(try daemon.reload() == ReloadReply(added: ["two"], changed: [], removed: [], unchanged: 2))
        #expect(try daemon.show("two")["declared_at"] as? String == daemon.directory + "/jobs.d/two.conf:2")
        eventually("two fires") { !daemon.lines("two.out").isEmpty }

        // Removing the file removes its job on the next reload (SIGHUP this time).
        try FileManager.default.removeItem(atPath: jobsDir + "/one.conf")
        daemon.signal(SIGHUP)
        try eventually("one removed by SIGHUP") { try daemon.listNames() == ["main", "two"] }

        // The same name in two files is invalid and changes nothing.
        try daemon.writeFile("jobs.d/three.conf", "[job \"main\"]\nevery = 1s\ncommand = true\n")
        let reply = try daemon.request("RELOAD")
        #expect(reply.hasPrefix("ERR invalid-config \(daemon.directory)/jobs.d/three.conf:1: "), "\(reply)")
        #expect(try daemon.listNames() == ["main", "two"])
        daemon.expectAlive()
    }

    // MARK: - max_running

    @Test func maxRunningMakesFiresWaitForASlot() throws {
        // Each run records that it started, then holds its slot until the test creates `release`.
        let hold = "echo $TIMERD_JOB >> $DIR/started; while [ ! -e $DIR/release ]; do sleep 0.02; done"
        let daemon = try Daemon(config: """
            [daemon]
            max_running = 1
            stop_grace = 0

            [job "first"]
            in = 10ms
            command = \(hold)

            [job "second"]
            in = 10ms
            command = \(hold)
            """)
        eventually("one run started and the other fire waits") {
            daemon.lines("started").count >= 1 && daemon.log.contains("waits for a run slot")
        }
        let started = daemon.lines("started")
        #expect(started.count == 1, "only one run may be going with max_running=1: \(started)")
        let runner = started.first ?? "first"
        let waiter = runner == "first" ? "second" : "first"
        let waiting = try daemon.show(waiter)
        #expect(waiting["pending"] as? Int == 1)
        #expect(waiting["running"] as? Int == 0)
        #expect(waiting["runs"] as? Int == 0)
        #expect(try daemon.show(runner)["running"] as? Int == 1)

        _ = FileManager.default.createFile(atPath: daemon.directory + "/release", contents: nil)
        eventually("the waiting fire ran once the slot was free") { Set(daemon.lines("started")) == ["first", "second"] }
        try eventually("both finished") {
            try daemon.show("first")["last_result"] as? String == "ok" && daemon.show("second")["last_result"] as? String == "ok"
        }
        #expect(try daemon.show(waiter)["pending"] as? Int == 0)
        daemon.expectAlive()
    }

    @Test func reloadRaisingMaxRunningStartsWaitingFires() throws {
        let hold = "echo $TIMERD_JOB >> $DIR/started; while [ ! -e $DIR/release ]; do sleep 0.02; done"
        let jobs = """
            [job "first"]
            in = 10ms
            command = \(hold)

            [job "second"]
            in = 10ms
            command = \(hold)
            """
        let daemon = try Daemon(config: "[daemon]\nmax_running = 1\nstop_grace = 0\n\n" + jobs)
        eventually("a fire waits for a run slot") {
            daemon.lines("started").count >= 1 && daemon.log.contains("waits for a run slot")
        }
        #expect(daemon.lines("started").count == 1)

        try daemon.writeConfig("[daemon]\nmax_running = 2\nstop_grace = 0\n\n" + jobs)
        #expect(try daemon.reload() == ReloadReply(added: [], changed: [], removed: [], unchanged: 2))
        eventually("the waiting fire starts without a slot being freed") { daemon.lines("started").count == 2 }
        #expect(try daemon.show("first")["running"] as? Int == 1)
        #expect(try daemon.show("second")["running"] as? Int == 1)
        _ = FileManager.default.createFile(atPath: daemon.directory + "/release", contents: nil)
        try eventually("both finished") {
            try daemon.show("first")["running"] as? Int == 0 && daemon.show("second")["running"] as? Int == 0
        }
        daemon.expectAlive()
    }
}
