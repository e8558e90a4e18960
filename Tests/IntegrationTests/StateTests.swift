import Foundation
import Glibc
import Testing
import TimerdStore

/// Durable state through the real daemon: jobs added at run time, their runs and pause come back after a
/// restart; history survives; missed fires follow `misfire`; `kill -9` never loses an acknowledged change;
/// a corrupt database is moved aside.
@Suite struct StateTests {
    static func info(_ daemon: Daemon, _ name: String) throws -> [String: Any] { try daemon.show(name) }

    static func historyRuns(_ daemon: Daemon, _ name: String, limit: Int = 20) throws -> [[String: Any]] {
        let reply = try daemon.request("HISTORY \(name) limit=\(limit)")
        guard reply.hasPrefix("OK ") else { throw HarnessError("HISTORY \(name): \(reply)") }
        return try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as! [[String: Any]]
    }

    /// Changes sent in one write start while earlier ones wait for their commit (group commit within a
    /// connection), yet take effect in order: changes of one job one after the other, a read after them
    /// sees them, and what was acknowledged is what a restart finds.
    @Test func pipelinedChangesTakeEffectInOrderAndSurviveARestart() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        var first: Daemon? = try Daemon(stateDirectory: state)
        let client = try Client(path: first!.socket)
        var lines: [String] = []
        var expected: [String] = []
        for i in 0..<200 {
            lines += ["ADD p\(i) every=1h command=true", "ADD p\(i) every=2h command=true", "PAUSE p\(i)"]
            expected += ["OK", "ERR exists", "OK"]
            if i % 2 == 0 {
                lines += ["CANCEL p\(i)", "ADD p\(i) every=3h command=true"]
                expected += ["OK", "OK"]
            }
        }
        lines += ["SHOW p0", "LIST"]
        try client.write(lines.map { $0 + "\n" }.joined())
        for (index, prefix) in expected.enumerated() {
            let reply = try client.readLine()
            #expect(reply.hasPrefix(prefix), "reply \(index) to \(lines[index]): \(reply.prefix(120))")
        }
        let show = try client.readLine()
        #expect(show.contains("\"every\":\"3h\"") || show.contains("every 3h"), "\(show.prefix(300))")
        #expect(try client.readLine().hasPrefix("OK [{"))
        first?.stop()
        first = nil

        let again = try Daemon(stateDirectory: state)
        #expect(try again.listNames().count == 200)
        for i in [0, 1, 198, 199] {
            // Even ones were cancelled and added again (not paused), odd ones stay paused.
            #expect(try again.state("p\(i)") == (i % 2 == 0 ? "scheduled" : "paused"), "p\(i)")
        }
    }

    /// Every verb that goes into a burst's batch (`ControlHandler.handleBatch`), with lines that are
    /// refused, a line in error and an `ADD` with an owner process (which makes the burst go one request
    /// at a time): each gets its own reply, in order, and the others are not affected.
    @Test func aBurstOfMixedChangesGetsOneReplyEachInOrder() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let daemon = try Daemon(stateDirectory: directory + "/state")
        let client = try Client(path: daemon.socket)
        let marker = directory + "/ran"
        let burst: [(line: String, reply: String)] = [
            ("ADD a every=1h command=true", "OK"),
            ("EXEC start=1h command=true", "OK {\"name\":\"exec-"),
            ("ADD b every=1h command='touch \(marker)'", "OK"),
            ("PAUSE a", "OK"),
            ("ADD a every=2h command=true", "ERR exists"),
            ("ADD c every=nonsense command=true", "ERR bad-argument"),
            ("CANCEL nosuch", "ERR no-such-job"),
            ("RUN b", "OK {\"status\":\"started\"}"),
            ("RESUME a", "OK"),
            ("ADD d every=1h", "ERR"),
            ("CANCEL a", "OK"),
            ("EXEC start=1h command=true", "OK {\"name\":\"exec-"),
            ("ADD a every=3h command=true", "OK"),
        ]
        try client.write(burst.map { $0.line + "\n" }.joined())
        for (line, reply) in burst {
            let got = try client.readLine()
            #expect(got.hasPrefix(reply), "\(line): \(got.prefix(160))")
        }
        #expect(eventually("b ran") { FileManager.default.fileExists(atPath: marker) })
        #expect(try daemon.listNames().filter { !$0.hasPrefix("exec-") } == ["a", "b"])
        #expect(try daemon.listNames().filter { $0.hasPrefix("exec-") }.count == 2)
        #expect(try daemon.show("a")["schedule"] as? String == "every 3h")

        // An owner process in the burst: handled one request at a time, same replies.
        let owner = "owner=pid:\(getpid())"
        let second: [(line: String, reply: String)] = [
            ("ADD e every=1h command=true", "OK"),
            ("ADD owned every=1h \(owner) command=true", "OK"),
            ("ADD e every=1h command=true", "ERR exists"),
            ("CANCEL owned", "OK"),
            ("PAUSE e", "OK"),
        ]
        try client.write(second.map { $0.line + "\n" }.joined())
        for (line, reply) in second {
            let got = try client.readLine()
            #expect(got.hasPrefix(reply), "\(line): \(got.prefix(160))")
        }
        #expect(try daemon.state("e") == "paused")
        #expect(try !daemon.listNames().contains("owned"))
    }

    @Test func jobsAddedAtRunTimeComeBackWithTheirState() throws {
        let directory = try makeTemporaryDirectory()
        // Registered before the daemons below exist, so it runs after they are released (stopped).
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        var first: Daemon? = try Daemon(stateDirectory: state)
        let daemon = first!
        #expect(try daemon.request("ADD hourly every=1h command='echo $TIMERD_RUN >> \(state)-hourly'") == "OK")
        #expect(try daemon.request("ADD weekdays cron='0 9 * * 1-5' timezone=Europe/Berlin command=true") == "OK")
        #expect(try daemon.request("ADD resting every=1m command=true") == "OK")
        #expect(try daemon.request("PAUSE resting") == "OK")
        #expect(try daemon.request("ADD gone every=1m command=true") == "OK")
        #expect(try daemon.request("CANCEL gone") == "OK")
        #expect(try daemon.request("ADD mine every=1m owner=connection command=true") == "OK")
        #expect(try daemon.request("RUN hourly").hasPrefix("OK"))
        try eventually("run 1 finished") { try daemon.show("hourly")["last_result"] as? String == "ok" }
        let nextBefore = try #require(try daemon.show("hourly")["next_fire"] as? String)
        daemon.stop()
        first = nil

        let again = try Daemon(stateDirectory: state)
        #expect(try again.listNames() == ["hourly", "resting", "weekdays"])
        #expect(try again.state("resting") == "paused")
        #expect(try again.show("hourly")["runs"] as? Int == 1)
        #expect(try again.show("weekdays")["schedule"] as? String == "cron 0 9 * * 1-5")
        #expect(try again.show("weekdays")["timezone"] as? String == "Europe/Berlin")
        // The interval keeps its phase: the next fire is where it was before the restart.
        let nextAfter = try #require(try again.show("hourly")["next_fire"] as? String)
        #expect(abs(try seconds(nextAfter) - seconds(nextBefore)) < 0.5, "\(nextBefore) → \(nextAfter)")
        // Run numbers continue.
        #expect(try again.request("RUN hourly").hasPrefix("OK"))
        eventually("run 2") { (try? String(contentsOfFile: state + "-hourly", encoding: .utf8)) == "1\n2\n" }
        // The history of the run before the restart is there, the new one first.
        try eventually("run 2 in the history") { try Self.historyRuns(again, "hourly").count == 2 }
        let runs = try Self.historyRuns(again, "hourly")
        #expect(runs.map { $0["run"] as? Int } == [2, 1])
        #expect(runs[0]["result"] as? String == "ok")
        #expect(runs[0]["scheduled_at"] is NSNull)  // by hand
        #expect((try again.show("hourly")["recent_runs"] as? [[String: Any]])?.count == 2)
    }

    /// `show`'s last run after a restart says what it said before: a run its timeout stopped keeps its
    /// reason in its own words and the signal that ended it.
    @Test func theLastRunKeepsItsReasonAndSignalAcrossARestart() throws {
        let directory = try makeTemporaryDirectory()
        // Registered before the daemons below exist, so it runs after they are released (stopped).
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        var first: Daemon? = try Daemon(stateDirectory: state)
        let daemon = first!
        #expect(try daemon.request("ADD slow every=1h timeout=200ms command='exec sleep 30'") == "OK")
        #expect(try daemon.request("RUN slow").hasPrefix("OK"))
        try eventually("the run timed out") { try daemon.show("slow")["last_result"] as? String == "timeout" }
        let before = try daemon.show("slow")
        let text = try daemon.ctl("show", "slow")
        #expect(before["last_signal"] as? Int == Int(SIGTERM))
        #expect((before["last_reason"] as? String)?.contains("timed out") == true, "\(before)")
        daemon.stop()
        first = nil

        let again = try Daemon(stateDirectory: state)
        let after = try again.show("slow")
        for key in ["last_run", "last_result", "last_reason", "last_signal", "last_exit_code", "last_cpu_usage_ms", "last_memory_peak_bytes"] {
            #expect(String(describing: after[key]) == String(describing: before[key]), "\(key)")
        }
        // The text's lines about the last run are the same too (its times are shown relative to now).
        let lastRunLines = { (output: String) in
            output.split(separator: "\n").filter { $0.hasPrefix("  result") || $0.hasPrefix("  reason") || $0.hasPrefix("  signal") }
        }
        #expect(lastRunLines(try again.ctl("show", "slow").stdout) == lastRunLines(text.stdout), "\(text.stdout)")
        #expect(!lastRunLines(text.stdout).isEmpty, "\(text.stdout)")
    }

    /// A config job's run numbers go on across restarts, as a runtime job's do: `TIMERD_RUN`, the
    /// history and `show`'s `runs` agree, and the number names one run for good.
    @Test func configJobsNumberTheirRunsOnAcrossRestarts() throws {
        let directory = try makeTemporaryDirectory()
        // Registered before the daemons below exist, so it runs after they are released (stopped).
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        let numbers = directory + "/numbers"
        let config = """
            [job "count"]
            every = 1h
            command = echo $TIMERD_RUN >> \(numbers)
            """
        for round in 1...3 {
            let daemon = try Daemon(config: config, stateDirectory: state)
            if round > 1 {
                // Before it runs again: the count and the last run come back from the history.
                let info = try daemon.show("count")
                #expect(info["runs"] as? Int == round - 1, "round \(round): \(info)")
                #expect(info["last_run"] as? Int == round - 1, "round \(round)")
            }
            #expect(try daemon.request("RUN count").hasPrefix("OK"))
            try eventually("run \(round) ended") { try daemon.show("count")["last_result"] as? String == "ok" && daemon.show("count")["last_run"] as? Int == round }
            #expect(try daemon.show("count")["runs"] as? Int == round)
            daemon.stop()
        }
        #expect(try String(contentsOfFile: numbers, encoding: .utf8) == "1\n2\n3\n")
        let last = try Daemon(config: config, stateDirectory: state)
        #expect(try Self.historyRuns(last, "count").map { $0["run"] as? Int } == [3, 2, 1])
        let history = try last.ctl("history", "count")
        #expect(history.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: " ").first.map(String.init) } == ["3", "2", "1"],
                "\(history.stdout)")
        // Taken out of the config and put back: its history stayed, and its numbers go on (docs/state.md).
        try "".write(toFile: last.configPath, atomically: true, encoding: .utf8)
        #expect(try last.request("RELOAD").hasPrefix("OK"))
        #expect(try last.request("SHOW count").hasPrefix("ERR no-such-job"))
        try config.write(toFile: last.configPath, atomically: true, encoding: .utf8)
        #expect(try last.request("RELOAD").hasPrefix("OK"))
        #expect(try Self.historyRuns(last, "count").map { $0["run"] as? Int } == [3, 2, 1])
        #expect(try last.request("RUN count").hasPrefix("OK"))
        try eventually("run 4 ended") { try last.show("count")["last_run"] as? Int == 4 && last.show("count")["last_result"] as? String == "ok" }
        #expect(try String(contentsOfFile: numbers, encoding: .utf8) == "1\n2\n3\n4\n")
    }

    @Test func historyIsKeptAndPrunedPerJob() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD h every=1h history_limit=3 command='echo out $TIMERD_RUN; exit $((TIMERD_RUN % 2))'") == "OK")
        for run in 1...5 {
            #expect(try daemon.request("RUN h").hasPrefix("OK"))
            try eventually("run \(run)") { try daemon.show("h")["last_run"] as? Int == run && daemon.show("h")["running"] as? Int == 0 }
        }
        try eventually("pruned to 3") { try Self.historyRuns(daemon, "h").map { $0["run"] as? Int } == [5, 4, 3] }
        let runs = try Self.historyRuns(daemon, "h")
        #expect(runs[0]["result"] as? String == "failed" && runs[0]["exit_code"] as? Int == 1)
        #expect(runs[1]["result"] as? String == "ok" && runs[1]["exit_code"] as? Int == 0)
        #expect(runs[0]["output"] as? String == "out 5\n")
        #expect(try Self.historyRuns(daemon, "h", limit: 1).count == 1)
        #expect(try daemon.request("HISTORY nosuch").hasPrefix("ERR no-such-job"))
        #expect(try daemon.request("HISTORY h limit=0").hasPrefix("ERR bad-argument"))
    }

    /// Three interval jobs, one per policy, miss five fires while timerd is down (the test clock jumps).
    @Test func missedFiresFollowTheMisfirePolicy() throws {
        let directory = try makeTemporaryDirectory()
        // Registered before the daemons below exist, so it runs after they are released (stopped).
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        let clockDirectory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(clockDirectory) }
        let clock = clockDirectory + "/clock"
        try "2026-06-01T12:00:00Z".write(toFile: clock, atomically: true, encoding: .utf8)
        let environment = ["TIMERD_TEST_FAILPOINTS": "test-clock", "TIMERD_TEST_CLOCK_FILE": clock]
        var first: Daemon? = try Daemon(environment: environment, stateDirectory: state)
        for policy in ["skip", "once", "all"] {
            #expect(try first!.request("ADD \(policy) every=1m misfire=\(policy) misfire_grace=1s command='echo $TIMERD_SCHEDULED_AT >> \(state)-\(policy)'") == "OK")
        }
        #expect(try first!.request("ADD daily calendar='*-*-* 12:03:00 UTC' misfire=once misfire_grace=1s command='echo $TIMERD_SCHEDULED_AT >> \(state)-daily'") == "OK")
        let phase = try #require(try first!.show("skip")["next_fire"] as? String)
        first!.stop()
        first = nil
        // Five minutes and a half later: fires at 12:01 … 12:05 were missed (and 12:03 of the daily one).
        let later = try seconds(phase) + 4 * 60 + 30
        try rfc3339(later).write(toFile: clock, atomically: true, encoding: .utf8)
        let again = try Daemon(environment: environment, stateDirectory: state)
        func lines(_ policy: String) -> [String] {
            ((try? String(contentsOfFile: "\(state)-\(policy)", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        eventually("all replayed five, in order") { lines("all").count == 5 }
        eventually("once ran once") { lines("once").count == 1 && lines("daily").count == 1 }
        // Replayed oldest first, one per missed minute, starting with the fire that was next at the stop.
        let replayed = try lines("all").map { try seconds($0) }
        #expect(replayed.first.map { abs($0 - (try! seconds(phase))) < 0.5 } == true, "\(lines("all"))")
        #expect(zip(replayed, replayed.dropFirst()).allSatisfy { abs($1 - $0 - 60) < 0.5 }, "\(lines("all"))")
        // The latest missed fire (jobs added a few µs apart: compare to the second).
        #expect(lines("once").map { $0.prefix(19) } == [(lines("all").last ?? "").prefix(19)])
        #expect(lines("daily").first?.hasPrefix("2026-06-01T12:03:00") == true)
        #expect(try again.show("skip")["skipped"] as? Int == 5)
        #expect(try again.show("once")["skipped"] as? Int == 4)
        #expect(lines("skip").isEmpty)
        // The phase is kept: the next fire is on the original minute grid.
        let next = try #require(try again.show("skip")["next_fire"] as? String)
        let offset = (try seconds(next) - seconds(phase)).truncatingRemainder(dividingBy: 60)
        #expect(abs(offset) < 0.5 || abs(offset - 60) < 0.5, "\(phase) → \(next)")
    }

    /// kill -9 in a loop while clients add and cancel at full speed: every acknowledged ADD is there after
    /// the restart, every acknowledged CANCEL is not, and SQLite's integrity check passes.
    @Test func killNineNeverLosesAnAcknowledgedChange() throws {
        let directory = try makeTemporaryDirectory()
        // Registered before the daemons below exist, so it runs after they are released (stopped).
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        var present = Set<String>()
        var absent = Set<String>()
        var counter = 0
        for cycle in 0..<50 {
            let daemon = try Daemon(stateDirectory: state)
            // Everything acknowledged before is still true.
            let names = Set(try daemon.listNames())
            let lost = present.subtracting(names)
            let back = absent.intersection(names)
            #expect(lost.isEmpty, "cycle \(cycle): \(lost.count) of \(present.count) acknowledged jobs lost, e.g. \(lost.sorted().prefix(5)); listed \(names.count)")
            #expect(back.isEmpty, "cycle \(cycle): \(back.count) cancelled jobs came back, e.g. \(back.sorted().prefix(5))")
            let results = KillNineResults()
            DispatchQueue.concurrentPerform(iterations: 3) { client in
                guard let connection = try? Client(path: daemon.socket) else { return }
                for step in 0..<40 {
                    let name = "c\(cycle)-\(client)-\(step)"
                    guard let reply = try? connection.request("ADD \(name) every=1h command=true") else { return }
                    if reply == "OK" { results.added(name) }
                    if step % 3 == 0 {
                        // A CANCEL whose reply never came may or may not have happened.
                        results.uncertain(name)
                        if let cancel = try? connection.request("CANCEL \(name)"), cancel == "OK" { results.cancelled(name) }
                    }
                    if cycle % 2 == 0, step == 20, client == 0 {
                        kill(daemon.process.processIdentifier, SIGKILL)
                        results.markKilled()
                    }
                }
            }
            // Killed once per cycle, by PID, while it is certainly alive: mid-way by client 0 in even cycles,
            // here in odd ones (never a second kill that could reach a reused PID).
            #expect(results.killed || daemon.process.isRunning, "cycle \(cycle): timerd exited on its own; log:\n\(daemon.log.suffix(3000))")
            if results.killed { daemon.process.waitUntilExit() } else { daemon.stop(signal: SIGKILL) }
            #expect(daemon.process.terminationReason == .uncaughtSignal && daemon.process.terminationStatus == SIGKILL,
                    "cycle \(cycle): timerd ended with \(daemon.process.terminationStatus), not by our SIGKILL; log:\n\(daemon.log.suffix(3000))")
            let (added, cancelled, uncertain) = results.value
            present.formUnion(added.subtracting(uncertain))
            absent.formUnion(cancelled)
            counter += added.count
        }
        #expect(counter > 1000, "only \(counter) ADDs were acknowledged")
        let final = try Daemon(stateDirectory: state)
        let names = Set(try final.listNames())
        #expect(present.subtracting(names).isEmpty, "\(present.subtracting(names).count) acknowledged jobs lost")
        #expect(absent.intersection(names).isEmpty, "\(absent.intersection(names).count) cancelled jobs came back")
        final.stop(signal: SIGKILL)
        let (store, recovered) = try StateStore.open(directory: state)
        #expect(recovered == nil)
        #expect(try store.integrityCheck() == "ok")
        store.close()
    }

    @Test func aCorruptDatabaseIsMovedAsideAndTimerdStarts() throws {
        let directory = try makeTemporaryDirectory()
        // Registered before the daemons below exist, so it runs after they are released (stopped).
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try Data("this is not a database, it is a file that was damaged".utf8).write(to: URL(fileURLWithPath: state + "/state.db"))
        let daemon = try Daemon(config: """
            [job "cfg"]
            every = 1h
            command = true
            """, stateDirectory: state)
        #expect(try daemon.listNames() == ["cfg"])
        let aside = try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.hasPrefix("state.db.corrupt-") }
        #expect(aside.count == 1, "\(aside)")
        #expect(daemon.logShows(aside.first ?? "state.db.corrupt-"), "\(daemon.log)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: state + "/" + (aside.first ?? ""))).count > 10)
        #expect(try daemon.request("ADD fresh every=1h command=true") == "OK")
    }
}

/// Lock-protected name sets for the kill -9 clients: acknowledged ADDs and CANCELs, and CANCELs sent.
final class KillNineResults: @unchecked Sendable {
    private let lock = NSLock()
    private var addedNames = Set<String>()
    private var cancelledNames = Set<String>()
    private var uncertainNames = Set<String>()
    private var wasKilled = false
    func markKilled() { lock.lock(); wasKilled = true; lock.unlock() }
    var killed: Bool { lock.lock(); defer { lock.unlock() }; return wasKilled }
    func added(_ name: String) { lock.lock(); addedNames.insert(name); lock.unlock() }
    func cancelled(_ name: String) { lock.lock(); cancelledNames.insert(name); lock.unlock() }
    func uncertain(_ name: String) { lock.lock(); uncertainNames.insert(name); lock.unlock() }
    var value: (Set<String>, Set<String>, Set<String>) {
        lock.lock()
        defer { lock.unlock() }
        return (addedNames, cancelledNames, uncertainNames)
    }
}

/// RFC 3339 with microseconds, UTC, from epoch seconds.
func rfc3339(_ seconds: Double) -> String {
    rfc3339Micro(Date(timeIntervalSince1970: seconds))
}
