import Foundation
import Glibc
import Testing
import TimerdStore

/// Storage faults through the real daemon (`docs/state.md`, "When the disk fails"). For each fault: no
/// acknowledged change is lost across a restart, no refused change is in effect before or after it, jobs
/// keep firing while the fault lasts, and the daemon recovers by itself once the cause is gone (with the
/// run history of the fault written, or counted as lost).
///
/// The faults: the `store-io-error` failpoint, a full disk, a read-only remount (both as root, on a tmpfs
/// mounted in the test's own directory; CI runs the suite as root), the state directory removed while
/// timerd runs, and a state directory that cannot be used at start-up.
@Suite struct StorageFaultTests {
    static let failpoint = "store-io-error"

    // MARK: Faults while running

    @Test func anInjectedIOErrorRefusesChangesAndRecoversWhenItEnds() throws {
        let directory = try makeTemporaryDirectory()
        // Registered before the daemons below exist, so it runs after they are released (stopped).
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        let fault = directory + "/fault"
        let keepRuns = directory + "/keep.runs", hourlyRuns = directory + "/hourly.runs"
        let environment = ["TIMERD_TEST_FAILPOINTS": Self.failpoint, "TIMERD_TEST_STORE_FAULT_FILE": fault]
        let config = "[daemon]\nmetrics_file = metrics.prom\nmetrics_interval = 100ms\n"
        var first: Daemon? = try Daemon(config: config, environment: environment, stateDirectory: state)
        let daemon = first!
        let watcher = try Self.watch(daemon)
        try Self.expectOK(daemon.ctl("add", "resting", "--every", "1h", "--command", "true"))
        try Self.expectOK(daemon.ctl("pause", "resting"))
        try Self.expectOK(daemon.ctl("add", "hourly", "--every", "1h", "--command", "echo $TIMERD_RUN >> \(hourlyRuns)"))
        try Self.addTicker(daemon, "keep", writingTo: keepRuns)
        // The watcher registers asynchronously; once it has seen keep's events it sees what follows.
        #expect(Self.nextEvent(watcher) { $0["job"] as? String == "keep" } != nil, "WATCH saw none of keep's events")

        _ = FileManager.default.createFile(atPath: fault, contents: nil)
        let before = Self.runs(keepRuns).max() ?? 0
        // Every kind of change is refused, and none of them is in effect.
        try Self.expectRefused(daemon.ctl("add", "refused", "--every", "1h", "--command", "true"), "add")
        try Self.expectRefused(daemon.ctl("cancel", "keep"), "cancel")
        try Self.expectRefused(daemon.ctl("pause", "keep"), "pause")
        try Self.expectRefused(daemon.ctl("resume", "resting"), "resume")
        try Self.expectRefused(daemon.ctl("run", "hourly"), "run")
        #expect(try daemon.listNames() == ["hourly", "keep", "resting"])
        #expect(try daemon.state("keep") == "scheduled")
        #expect(try daemon.state("resting") == "paused")
        let duringFault = Self.runsGoOn(keepRuns, after: before)
        // Every surface says so.
        let failing = try Self.storage(daemon)
        #expect(failing["state"] as? String == "failing", "\(failing)")
        #expect((failing["write_errors"] as? Int ?? 0) > 0, "\(failing)")
        #expect(!((failing["reason"] as? String) ?? "").isEmpty, "\(failing)")
        #expect(failing["since"] is String, "\(failing)")
        let line = try Self.storageLine(daemon)
        #expect(line.hasPrefix("failing since ") && line.contains(": "), "storage: \(line)")
        #expect(daemon.notify.waitFor("STATUS=state not saved (", prefix: true, timeout: 10), "\(daemon.notify.received)")
        eventually("metrics say unhealthy") {
            let metrics = daemon.lines("metrics.prom")
            return metrics.contains("timerd_state_healthy 0") && metrics.contains { $0.hasPrefix("timerd_state_write_errors_total ") && !$0.hasSuffix(" 0") }
        }
        let failingEvent = Self.nextEvent(watcher) { $0["event"] as? String == "storage" }
        #expect((failingEvent?["reason"] as? String)?.hasPrefix("failing: ") == true, "\(failingEvent ?? [:])")

        // The cause goes away: the daemon writes again by itself.
        try FileManager.default.removeItem(atPath: fault)
        try Self.expectRecovery(daemon, ticker: "keep", runs: duringFault)
        let okEvent = Self.nextEvent(watcher) { $0["event"] as? String == "storage" }
        #expect((okEvent?["reason"] as? String)?.hasPrefix("ok: ") == true, "\(okEvent ?? [:])")
        eventually("STATUS= without the storage fault") {
            _ = daemon.notify.waitFor("STATUS=", prefix: true, timeout: 0.2)
            return Self.lastStatus(daemon).map { !$0.hasPrefix("STATUS=state not saved") } ?? false
        }
        eventually("metrics say healthy") { daemon.lines("metrics.prom").contains("timerd_state_healthy 1") }
        let recorded = duringFault.intersection(try Self.historyRuns(daemon, "keep"))
        let lastRun = try daemon.runs("keep")
        daemon.stop()
        first = nil

        let again = try Daemon(config: config, environment: environment, stateDirectory: state)
        #expect(try again.listNames() == ["after", "hourly", "keep", "resting"])
        #expect(try again.state("keep") == "scheduled")
        #expect(try again.state("resting") == "paused")
        #expect(try again.runs("hourly") == 0)
        #expect(Self.runs(hourlyRuns).isEmpty, "the refused RUN ran: \(Self.runs(hourlyRuns))")
        // The fire bookkeeping and history held during the fault were written: the run counter did not go
        // back, and the runs of the fault are still in the history.
        #expect(try again.runs("keep") >= lastRun)
        #expect(recorded.isSubset(of: try Self.historyRuns(again, "keep")))
    }

    // CI runs the suite as root; elsewhere this is skipped (mounting needs root).
    @Test(.enabled(if: geteuid() == 0, "mounts a tmpfs: needs root"))
    func aFullDiskRefusesChangesAndRecoversWhenThereIsRoomAgain() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        let tickRuns = directory + "/tick.runs"
        let tmpfs = try Tmpfs(at: state, options: "size=600k")
        defer { tmpfs.unmount() }
        let daemon = try tmpfs.startDaemon()
        try Self.addTicker(daemon, "tick", writingTo: tickRuns)

        // Jobs with a few KB of meta each until the disk is full (600k: about a hundred).
        let client = try Client(path: daemon.socket)
        let padding = String(repeating: "x", count: 3_000)
        var acknowledged: [String] = []
        var refused: String?
        for index in 0..<400 {
            let name = "fill\(index)"
            let reply = try client.request("ADD \(name) every=1h meta=pad=\(padding) command=true")
            if reply == "OK" {
                acknowledged.append(name)
                continue
            }
            #expect(reply.hasPrefix("ERR storage-unavailable "), "\(name): \(reply)")
            refused = name
            break
        }
        let refusedName = try #require(refused, "the 600k tmpfs never filled: \(acknowledged.count) ADDs acknowledged")
        #expect(!acknowledged.isEmpty)
        let before = Self.runs(tickRuns).max() ?? 0
        let listed = Set(try daemon.listNames())
        #expect(!listed.contains(refusedName))
        #expect(Set(acknowledged).isSubset(of: listed), "\(Set(acknowledged).subtracting(listed).sorted())")
        let duringFault = Self.runsGoOn(tickRuns, after: before)
        let failing = try Self.storage(daemon)
        #expect(failing["state"] as? String == "failing", "\(failing)")
        #expect((failing["write_errors"] as? Int ?? 0) > 0, "\(failing)")
        #expect(try Self.storageLine(daemon).hasPrefix("failing since "))

        try Self.expectMounted(tmpfs.remount("size=8m"), "remount size=8m")
        try Self.expectRecovery(daemon, ticker: "tick", runs: duringFault)
        daemon.stop()

        let again = try tmpfs.startDaemon()
        let names = Set(try again.listNames())
        let expected = Set(acknowledged + ["tick", "after"])
        #expect(names == expected, "lost: \(expected.subtracting(names).sorted()); not acknowledged: \(names.subtracting(expected).sorted())")
        again.stop()
        let (store, _) = try StateStore.open(directory: state)
        #expect(try store.integrityCheck() == "ok")
        store.close()
    }

    // CI runs the suite as root; elsewhere this is skipped (mounting needs root).
    @Test(.enabled(if: geteuid() == 0, "mounts a tmpfs: needs root"))
    func aReadOnlyRemountRefusesChangesAndRecoversWhenWritableAgain() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        let fault = directory + "/fault"
        let tickRuns = directory + "/tick.runs"
        let tmpfs = try Tmpfs(at: state, options: "size=8m")
        defer { tmpfs.unmount() }
        let environment = ["TIMERD_TEST_FAILPOINTS": Self.failpoint, "TIMERD_TEST_STORE_FAULT_FILE": fault]
        let daemon = try tmpfs.startDaemon(environment: environment)
        try Self.expectOK(daemon.ctl("add", "kept", "--every", "1h", "--command", "true"))
        try Self.addTicker(daemon, "tick", writingTo: tickRuns)

        // A file system with a file open for writing cannot be remounted read-only (EBUSY), and a healthy
        // store keeps state.db open. After a fault the store closes it and opens it again only to retry;
        // the failpoint makes that first fault.
        _ = FileManager.default.createFile(atPath: fault, contents: nil)
        let before = Self.runs(tickRuns).max() ?? 0
        try Self.expectRefused(daemon.ctl("add", "early", "--every", "1h", "--command", "true"), "add (injected fault)")
        eventually("remount read-only once timerd has closed state.db") { (try? tmpfs.remount("ro"))?.status == 0 }
        try FileManager.default.removeItem(atPath: fault)
        try Self.expectRefused(daemon.ctl("add", "refused", "--every", "1h", "--command", "true"), "add (read-only)")
        try Self.expectRefused(daemon.ctl("cancel", "kept"), "cancel (read-only)")
        #expect(try daemon.listNames() == ["kept", "tick"])
        var reason = ""
        let named = try eventually("the reason names the read-only file system") {
            reason = try Self.storage(daemon)["reason"] as? String ?? ""
            return reason.lowercased().contains("read-only") || reason.lowercased().contains("readonly")
        }
        if !named { Issue.record("reason: \(reason)") }
        #expect(try Self.storage(daemon)["state"] as? String == "failing")
        let duringFault = Self.runsGoOn(tickRuns, after: before)

        try Self.expectMounted(tmpfs.remount("rw"), "remount rw")
        try Self.expectRecovery(daemon, ticker: "tick", runs: duringFault)
        daemon.stop()

        let again = try tmpfs.startDaemon(environment: environment)
        #expect(try again.listNames() == ["after", "kept", "tick"])
    }

    @Test func aRemovedStateDirectoryIsMadeAgainFromTheJobsInMemory() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        let tickRuns = directory + "/tick.runs"
        var first: Daemon? = try Daemon(stateDirectory: state)
        let daemon = first!
        try Self.expectOK(daemon.ctl("add", "kept", "--every", "1h", "--command", "true"))
        try Self.expectOK(daemon.ctl("add", "resting", "--every", "1h", "--command", "true"))
        try Self.expectOK(daemon.ctl("pause", "resting"))
        try Self.addTicker(daemon, "tick", writingTo: tickRuns)

        let before = Self.runs(tickRuns).max() ?? 0
        try FileManager.default.removeItem(atPath: state)
        // Refused if the store finds state.db gone, OK if it has already made it again.
        let right = try daemon.ctl("add", "right", "--every", "1h", "--command", "true")
        #expect(right.status == 0 || (right.status == 1 && right.stderr.contains("storage-unavailable")), "\(right)")
        // The runs after the removal go into the new file (not the first: it may have finished into the old
        // one just before it went).
        let afterRemoval = Self.runsGoOn(tickRuns, after: before + 1)
        try Self.expectRecovery(daemon, ticker: "tick", runs: afterRemoval)
        #expect(FileManager.default.fileExists(atPath: state + "/state.db"))
        daemon.stop()
        first = nil

        let again = try Daemon(stateDirectory: state)
        #expect(try again.listNames() == ["after", "kept", "resting"] + (right.status == 0 ? ["right"] : []) + ["tick"])
        #expect(try again.state("resting") == "paused")
    }

    // MARK: Start-up

    @Test func aStateDirectoryThatCannotBeCreatedStopsStartUp() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        _ = FileManager.default.createFile(atPath: directory + "/file", contents: Data("a regular file\n".utf8))
        let state = directory + "/file/state"
        try Self.expectStartUpFails(stateDirectory: state, naming: "Not a directory")
    }

    // CI runs the suite as root; elsewhere this is skipped (mounting needs root).
    @Test(.enabled(if: geteuid() == 0, "mounts a tmpfs: needs root"))
    func aReadOnlyStateDirectoryStopsStartUp() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        // Mounted read-only and empty: state.db cannot be created.
        let empty = try Tmpfs(at: directory + "/empty", options: "ro,size=1m")
        defer { empty.unmount() }
        try Self.expectStartUpFails(stateDirectory: empty.path, naming: "Read-only file system")

        // Holding the state of an earlier run, then remounted read-only: it could be read, not written.
        let used = try Tmpfs(at: directory + "/used", options: "size=1m")
        defer { used.unmount() }
        let daemon = try used.startDaemon()
        try Self.expectOK(daemon.ctl("add", "kept", "--every", "1h", "--command", "true"))
        daemon.stop()
        try Self.expectMounted(used.remount("ro"), "remount ro")
        try Self.expectStartUpFails(stateDirectory: used.path, naming: nil)
    }

    // MARK: Helpers

    /// Starts timerd on `stateDirectory` and expects it to exit non-zero before `READY=1`, saying on
    /// stderr and in `STATUS=` that it cannot use that directory (and `naming`, the error, if given).
    static func expectStartUpFails(stateDirectory: String, naming error: String?, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let daemon = try Daemon(waitForReady: false, stateDirectory: stateDirectory)
        let exited = eventually("timerd to exit") { !daemon.process.isRunning }
        #expect(exited, "timerd started on \(stateDirectory); log:\n\(daemon.log)", sourceLocation: sourceLocation)
        guard exited else {
            daemon.stop(signal: SIGKILL)
            return
        }
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus != 0, sourceLocation: sourceLocation)
        let log = daemon.log
        #expect(log.contains("cannot use the state directory \(stateDirectory)"), "\(log)", sourceLocation: sourceLocation)
        if let error { #expect(log.contains(error), "\(log)", sourceLocation: sourceLocation) }
        #expect(!daemon.notify.received.contains { $0.contains("READY=1") }, sourceLocation: sourceLocation)
        #expect(daemon.notify.waitFor("STATUS=cannot use the state directory \(stateDirectory)", prefix: true, timeout: 5),
                "\(daemon.notify.received)", sourceLocation: sourceLocation)
    }

    /// Adds `name`, a job every 200 ms appending its run number to `path`, and waits for its first run.
    static func addTicker(_ daemon: Daemon, _ name: String, writingTo path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let command = "echo $TIMERD_RUN >> \(path)"
        expectOK(try daemon.ctl("add", name, "--every", "200ms", "--history-limit", "1000", "--command", command), sourceLocation: sourceLocation)
        eventually("\(name) ran") { !runs(path).isEmpty }
    }

    static func expectOK(_ result: CommandResult, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
    }

    /// timerd answered `ERR storage-unavailable`: timerctl exits 1 and says so.
    static func expectRefused(_ result: CommandResult, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == 1 && result.stderr.contains("storage-unavailable"), "\(what): \(result)", sourceLocation: sourceLocation)
    }

    static func expectMounted(_ result: CommandResult, _ what: String) throws {
        guard result.status == 0 else { throw HarnessError("\(what): \(result)") }
    }

    /// `timerctl stats`'s `storage:` line, without the label.
    static func storageLine(_ daemon: Daemon) throws -> String {
        let result = try daemon.ctl("stats")
        guard result.status == 0 else { throw HarnessError("timerctl stats: \(result)") }
        let line = result.stdout.split(separator: "\n").first { $0.hasPrefix("storage:") }
        guard let line else { throw HarnessError("no storage: line in\n\(result.stdout)") }
        return line.dropFirst("storage:".count).trimmingCharacters(in: .whitespaces)
    }

    /// `timerctl stats --json`'s `storage` object.
    static func storage(_ daemon: Daemon) throws -> [String: Any] {
        let result = try daemon.ctl("stats", "--json")
        guard result.status == 0 else { throw HarnessError("timerctl stats --json: \(result)") }
        let stats = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        guard let storage = stats?["storage"] as? [String: Any] else { throw HarnessError("no storage in \(result.stdout)") }
        return storage
    }

    /// Firing goes on during the fault: waits for three runs of the job writing to `path` after run
    /// `before`, and returns the runs since.
    static func runsGoOn(_ path: String, after before: Int) -> Set<Int> {
        eventually("three runs during the fault") { runs(path).filter { $0 > before }.count >= 3 }
        return Set(runs(path).filter { $0 > before })
    }

    /// Once the cause is gone: `storage: ok` by itself (the store retries with a backoff of at most a few
    /// seconds), an ADD (of `after`) is OK again, and `runs` of `ticker` made during the fault are recorded.
    static func expectRecovery(_ daemon: Daemon, ticker: String, runs: Set<Int>, sourceLocation: SourceLocation = #_sourceLocation) throws {
        var line = ""
        let ok = eventually(timeout: 15, "storage: ok") {
            line = (try? storageLine(daemon)) ?? line
            return line == "ok" || line.hasPrefix("ok (")
        }
        if !ok { Issue.record("storage: \(line)", sourceLocation: sourceLocation) }
        expectOK(try daemon.ctl("add", "after", "--every", "1h", "--command", "true"), sourceLocation: sourceLocation)
        expectRunsRecorded(daemon, ticker, runs, sourceLocation: sourceLocation)
    }

    /// The run numbers a job's command appended to `path`, one a line.
    static func runs(_ path: String) -> [Int] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { Int($0) }
    }

    /// The run numbers in `timerctl history NAME --json`.
    static func historyRuns(_ daemon: Daemon, _ name: String) throws -> Set<Int> {
        let result = try daemon.ctl("history", name, "--limit", "1000", "--json")
        guard result.status == 0 else { throw HarnessError("timerctl history \(name): \(result)") }
        let runs = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] ?? []
        return Set(runs.compactMap { $0["run"] as? Int })
    }

    /// The runs of `name` made while the store failed are in its history once it writes again, or the
    /// store counts as lost at least as many changes as are missing.
    static func expectRunsRecorded(_ daemon: Daemon, _ name: String, _ runs: Set<Int>, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!runs.isEmpty, "no runs during the fault", sourceLocation: sourceLocation)
        var missing = runs, lost = 0
        let recorded = eventually("the runs of the fault in the history") {
            missing = runs.subtracting((try? historyRuns(daemon, name)) ?? [])
            lost = (try? storage(daemon)["lost"] as? Int) ?? 0
            return missing.count <= lost
        }
        if !recorded {
            Issue.record("runs \(missing.sorted()) of \(runs.sorted()) missing from \(name)'s history; lost: \(lost)", sourceLocation: sourceLocation)
        }
    }

    /// A `WATCH` connection for every event (registered once it has seen one: see the callers).
    static func watch(_ daemon: Daemon) throws -> Client {
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH") == #"OK {"watching":"all"}"#)
        return watcher
    }

    /// The next event on `watcher` that `matches`, within `within` seconds.
    static func nextEvent(_ watcher: Client, within seconds: Double = 15, where matches: ([String: Any]) -> Bool) -> [String: Any]? {
        let deadline = Date().addingTimeInterval(seconds)
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(watcher.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while Date() < deadline {
            guard let line = try? watcher.readLine() else { continue }
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            if matches(event) { return event }
        }
        return nil
    }

    /// The last `STATUS=` line timerd sent.
    static func lastStatus(_ daemon: Daemon) -> String? {
        daemon.notify.received.reversed().lazy.compactMap { $0.split(separator: "\n").last { $0.hasPrefix("STATUS=") } }.first.map(String.init)
    }
}

/// A tmpfs the test mounts (as root) and unmounts, lazily if something still holds it, after stopping the
/// daemons it started there.
final class Tmpfs {
    let path: String
    private var mounted = false
    private var daemons: [Daemon] = []

    /// Makes `path` and mounts a tmpfs there with `options` (`size=600k`, `ro,size=1m`).
    init(at path: String, options: String) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let result = try Daemon.run("/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", path])
        guard result.status == 0 else { throw HarnessError("mount -t tmpfs -o \(options) tmpfs \(path): \(result)") }
        mounted = true
    }

    deinit { unmount() }

    /// Starts a daemon with its state here (stopped before the file system is unmounted).
    func startDaemon(environment: [String: String] = [:]) throws -> Daemon {
        let daemon = try Daemon(environment: environment, stateDirectory: path)
        daemons.append(daemon)
        return daemon
    }

    /// `mount -o remount,OPTIONS`.
    func remount(_ options: String) throws -> CommandResult {
        try Daemon.run("/bin/mount", ["-o", "remount," + options, path])
    }

    /// Stops the daemons, then `umount`, or `umount -l` if it is busy. Safe to call more than once.
    func unmount() {
        guard mounted else { return }
        mounted = false
        for daemon in daemons { daemon.stop() }
        if (try? Daemon.run("/bin/umount", [path]))?.status == 0 { return }
        let lazy = try? Daemon.run("/bin/umount", ["-l", path])
        if lazy?.status != 0 { Issue.record("cannot unmount \(path): \(String(describing: lazy))") }
    }
}
