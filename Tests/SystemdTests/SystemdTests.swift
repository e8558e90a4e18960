import Foundation
import Glibc
import Testing

/// timerd's systemd integration against a real systemd 252, booted once for the whole suite in private
/// PID + mount + cgroup namespaces (see Testbed.swift and /work/shared/design/systemd-in-a-namespace.md).
/// Every test sets up its own units and config (`Testbed.prepare`), so none depends on another's leftovers.
///
/// Skipped, loudly, where the test bed cannot run (not root, no unshare/nsenter, no /lib/systemd/systemd);
/// with `CI=true` that is a failure instead.
@Suite(
    "timerd under a private systemd",
    .serialized,
    // Prerequisites.shouldRun prints why it is false; CI=true makes it true so the suite fails instead.
    .enabled(if: Prerequisites.shouldRun, "needs root, unshare, nsenter and /lib/systemd/systemd (reason printed above)"),
    SystemdTestbedTrait()
)
struct SystemdTests {
    let testbed: Testbed

    init() throws { testbed = try Testbed.require() }

    static let helloConfig = """
        [daemon]
        stop_grace = 3s

        [job "hello"]
        every = 1s
        command = echo "hello $TIMERD_RUN"

        """

    @Test("systemd-analyze verify accepts the generated units")
    func verifyUnits() throws {
        for watchdog in [false, true] {
            let directory = testbed.scratch + (watchdog ? "/verify-watchdog" : "/verify")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let units = try Testbed.generateUnits(configPath: testbed.configPath, watchdog: watchdog)
            try units.service.write(toFile: directory + "/timerd.service", atomically: true, encoding: .utf8)
            try units.socket.write(toFile: directory + "/timerd.socket", atomically: true, encoding: .utf8)
            try Self.helloConfig.write(toFile: testbed.configPath, atomically: true, encoding: .utf8)
            // --man=no: the man pages in Documentation= are not installed on a build machine.
            let result = try Shell.run(["systemd-analyze", "verify", "--man=no",
                                        directory + "/timerd.socket", directory + "/timerd.service"])
            #expect(result.succeeded, "systemd-analyze verify rejected the units (watchdog: \(watchdog)): \(result)")
            let complaints = (result.stdout + result.stderr).split(separator: "\n").filter { $0.contains("timerd") }
            #expect(complaints.isEmpty, "systemd-analyze verify complains about the timerd units: \(complaints)")
        }
    }

    @Test("systemctl start timerd reaches active (running) after READY=1, with STATUS=")
    func startReachesRunningAfterReady() throws {
        try testbed.prepare(config: Self.helloConfig)
        // Type=notify: `systemctl start` returns once systemd saw READY=1.
        try testbed.mustSystemctl("start", "timerd.service")
        let properties = try testbed.show("timerd.service", ["Type", "ActiveState", "SubState", "StatusText", "MainPID"])
        #expect(properties["Type"] == "notify")
        #expect(properties["ActiveState"] == "active", "\(properties)")
        #expect(properties["SubState"] == "running", "\(properties)")
        let statusText = properties["StatusText"] ?? ""
        #expect(statusText.contains("jobs") || statusText.contains("job"), "StatusText= should count jobs: \"\(statusText)\"")
        // READY=1 comes only once the config jobs are armed: `hello` is there at once, no waiting.
        let list = try testbed.timerctl("list")
        #expect(list.succeeded && list.stdout.contains("hello"), "timerctl list right after start: \(list)")
        // The test bed's own safety: starting timerd must not have pulled in the host's boot (Testbed.safetyDropIn).
        let sysinit = testbed.property("sysinit.target", "ActiveState")
        #expect(sysinit == "inactive", "sysinit.target is \(sysinit) in the test bed")
        let status = try testbed.systemctl("status", "timerd.service")
        #expect(status.stdout.contains("Active: active (running)"), "systemctl status:\n\(status.stdout)")
        #expect(status.stdout.contains("Status: \""), "systemctl status shows no Status line:\n\(status.stdout)")
        print("systemctl status timerd:\n\(status.stdout)")
        // RestrictRealtime=yes (timerd.service) filters realtime policies only: timerd's short slice under
        // SCHED_OTHER is still granted (docs/architecture.md, "Scheduling"). /proc/PID/sched is the
        // kernel's debug view (CONFIG_SCHED_DEBUG), and a slice of one's own Linux 6.12's.
        let refused = try testbed.journal(["-u", "timerd.service"]).filter { Testbed.message($0).contains("scheduling: cannot") || Testbed.message($0).contains("scheduling: a realtime") }
        #expect(refused.isEmpty, "\(refused.map(Testbed.message))")
        if let pid = properties["MainPID"], let sched = try? testbed.inside(["cat", "/proc/\(pid)/sched"]), sched.succeeded,
           let line = sched.stdout.split(separator: "\n").first(where: { $0.hasPrefix("se.slice") }) {
            #expect(line.split(separator: " ").last == "300000", "\(line)")
        }
    }

    @Test("a config job's output is in the journal with TIMERD_JOB= and TIMERD_RUN=")
    func jobOutputInJournal() throws {
        try testbed.prepare(config: Self.helloConfig)
        try testbed.mustSystemctl("start", "timerd.service")
        var output: [[String: Any]] = []
        let found = try eventually(timeout: 15, "a journal entry TIMERD_JOB=hello with the job's echo") {
            let entries = try testbed.journal(["-u", "timerd.service", "TIMERD_JOB=hello"])
            // The job's output line, `hello N`, in an entry whose TIMERD_RUN= is that N.
            output = entries.filter {
                guard let run = $0["TIMERD_RUN"] as? String else { return false }
                return Testbed.message($0).hasSuffix("hello \(run)")
            }
            return !output.isEmpty
        }
        if found, let entry = output.first {
            #expect(entry["PRIORITY"] != nil, "no PRIORITY field: \(entry)")
            #expect(entry["_SYSTEMD_UNIT"] as? String == "timerd.service", "\(entry)")
        } else {
            let recent = try testbed.inside(["journalctl", "--no-pager", "-u", "timerd.service", "-o", "json", "-n", "4"])
            print("the newest journal entries of timerd.service, as JSON:\n\(recent.stdout)")
        }
        try eventually(timeout: 15, "a journal entry TIMERD_JOB=hello with TIMERD_EXIT_STATUS= (a run ended)") {
            try testbed.journal(["-u", "timerd.service", "TIMERD_JOB=hello"]).contains { $0["TIMERD_EXIT_STATUS"] != nil }
        }
        try testbed.mustSystemctl("stop", "timerd.service")
    }

    @Test("systemctl reload timerd applies a changed config")
    func reloadAppliesConfig() throws {
        try testbed.prepare(config: Self.helloConfig)
        try testbed.mustSystemctl("start", "timerd.service")
        let before = try testbed.show("timerd.service", ["MainPID", "NRestarts"])
        #expect(try !testbed.timerctl("show", "newjob").succeeded, "newjob exists before the reload")

        let cursor = try testbed.journalCursor()
        try (Self.helloConfig + """
            [job "newjob"]
            every = 1h
            command = echo new

            """).write(toFile: testbed.configPath, atomically: true, encoding: .utf8)
        try testbed.mustSystemctl("reload", "timerd.service")

        try eventually(timeout: 10, "`timerctl show newjob` to succeed after the reload") {
            try testbed.timerctl("show", "newjob").succeeded
        }
        let list = try testbed.timerctl("list")
        #expect(list.stdout.contains("newjob") && list.stdout.contains("hello"), "timerctl list after reload: \(list)")
        try eventually(timeout: 10, "\"config reloaded\" in the journal of timerd.service") {
            try testbed.journal(["-u", "timerd.service"], after: cursor).contains { Testbed.message($0).contains("config reloaded") }
        }
        // A reload, not a restart.
        let after = try testbed.show("timerd.service", ["MainPID", "NRestarts", "ActiveState", "SubState"])
        #expect(after["MainPID"] == before["MainPID"], "MainPID changed over the reload: \(before) -> \(after)")
        #expect(after["ActiveState"] == "active" && after["SubState"] == "running", "\(after)")
        try testbed.mustSystemctl("stop", "timerd.service")
    }

    @Test("the watchdog kills a wedged timerd and Restart=on-failure brings it back")
    func watchdogRestartsWedgedDaemon() throws {
        try testbed.prepare(config: Self.helloConfig, watchdog: true)
        defer {
            // A still-wedged timerd cannot finish a graceful stop (its registry queue is blocked).
            _ = try? testbed.systemctl("kill", "-s", "SIGKILL", "timerd.service")
            try? testbed.stopAll()
        }
        try testbed.mustSystemctl("start", "timerd.service")
        let before = try testbed.show("timerd.service", ["MainPID", "NRestarts", "WatchdogUSec"])
        #expect(before["WatchdogUSec"] == "2s", "\(before)")
        let restarts = Int(before["NRestarts"] ?? "") ?? 0
        #expect(try testbed.timerctl("ping").succeeded)

        let cursor = try testbed.journalCursor()
        try testbed.mustSystemctl("kill", "-s", "SIGUSR1", "--kill-whom=main", "timerd.service")
        let restarted = eventually(timeout: 15, "NRestarts to grow after the registry wedged") {
            (Int(testbed.property("timerd.service", "NRestarts")) ?? 0) > restarts
        }
        if restarted { try eventually(timeout: 15, "the restarted timerd to be active and answer `timerctl ping`") {
            let now = try testbed.show("timerd.service", ["ActiveState", "MainPID"])
            guard now["ActiveState"] == "active", now["MainPID"] != before["MainPID"] else { return false }
            return try testbed.timerctl("ping").succeeded
        } }
        let journal = try testbed.journal(["-u", "timerd.service"], after: cursor).map(Testbed.message)
        let timedOut = journal.contains { $0.contains("Watchdog timeout") }
        #expect(timedOut, "no watchdog timeout in the journal: \(journal)")
        if !restarted {
            let state = try testbed.show("timerd.service", ["MainPID", "ActiveState", "SubState", "Result", "TimeoutAbortUSec"])
            let survived = state["MainPID"] == before["MainPID"] && state["MainPID"] != "0"
            Issue.record("""
                no restart: \(timedOut ? "systemd's watchdog fired (SIGABRT)" : "the watchdog never fired") and \
                \(survived ? "timerd (MainPID \(state["MainPID"] ?? "?")) is STILL RUNNING after the SIGABRT" : "timerd is gone") \
                — state \(state). timerd's lines after the wedge:
                \(journal.prefix(12).joined(separator: "\n"))
                """)
        }
    }

    @Test("each run has a cgroup: what it starts in a new session ends with it (timeout, cancel, end, stop), except under kill_mode=process")
    func runCgroups() throws {
        try testbed.prepare(config: "[daemon]\nstop_grace = 3s\n")
        try testbed.mustSystemctl("start", "timerd.service")
        let cursor = try testbed.journalCursor()
        let started = try testbed.journal(["-u", "timerd.service"]).map(Testbed.message)
        #expect(started.contains { $0.contains("runs: each in a cgroup of its own under ") && $0.contains("/runs") },
                "no cgroup set-up line in: \(started)")
        /// PIDs of `sleep SECONDS` inside the test bed.
        func sleeping(_ seconds: Int) throws -> [String] {
            try testbed.inside(["pgrep", "-x", "-f", "sleep \(seconds)"]).stdout.split(separator: "\n").map(String.init)
        }
        func lastResult(_ job: String) throws -> String? {
            let shown = try testbed.timerctl("--json", "show", job)
            let object = try? JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any]
            return object?["last_result"] as? String
        }

        // A timeout: the escapee (its own session, so out of the process group's reach) dies with the run.
        try testbed.timerctl("add", "timesout", "--in", "10ms", "--timeout", "1s", "--command", "setsid sleep 301 & sleep 300")
        #expect(try eventually(timeout: 10, "the escapee of timesout to start") { try !sleeping(301).isEmpty })
        #expect(try eventually(timeout: 15, "timesout to time out") { try lastResult("timesout") == "timeout" })
        let afterTimeout = try sleeping(301) + sleeping(300)
        #expect(afterTimeout.isEmpty, "left after the timeout: \(afterTimeout)")

        // What a run used comes from its cgroup (cpu.stat): here an escapee that spins for 300 ms of CPU by its
        // own count while the main process, which never reaps it (wait4 would not count it), sleeps.
        let spun = testbed.scratch + "/spun"
        let spin = "while :; do read -r line < /proc/\\$\\$/stat; set -- \\$line; [ \\$(( \\${14} + \\${15} )) -ge 30 ] && break; done"
        try testbed.timerctl("add", "spins", "--in", "10ms", "--command",
                             "setsid sh -c \"\(spin); touch \(spun)\" & while [ ! -e \(spun) ]; do sleep 0.01; done")
        #expect(try eventually(timeout: 15, "spins to end") { try lastResult("spins") == "ok" })
        let shown = try JSONSerialization.jsonObject(with: Data(try testbed.timerctl("--json", "show", "spins").stdout.utf8)) as? [String: Any]
        let cpu = shown?["last_cpu_usage_ms"] as? Double ?? 0
        #expect(cpu >= 300, "spins: \(String(describing: shown))")

        // A job's next run reuses its cgroup, `runs/JOB@1` (the same directory: its inode), and what a run used
        // is its own: the first run spins for 300 ms of CPU, the second does not, and its CPU time does not
        // carry the first's.
        let seen = testbed.scratch + "/again", once = testbed.scratch + "/again-spun"
        let spinHere = "while :; do read -r line < /proc/$$/stat; set -- $line; [ $(( ${14} + ${15} )) -ge 30 ] && break; done"
        try testbed.timerctl("add", "again", "--in", "10ms", "--command",
                             "c=$(sed -n 's/^0:://p' /proc/self/cgroup); for m in /sys/fs/cgroup/unified /sys/fs/cgroup; do "
                                + "[ -e \"$m$c/cgroup.procs\" ] && echo \"$c $(stat -c %i \"$m$c\")\" >> \(seen) && break; done; "
                                + "[ -e \(once) ] || { touch \(once); \(spinHere); }")
        func showAgain() throws -> [String: Any]? {
            try JSONSerialization.jsonObject(with: Data(testbed.timerctl("--json", "show", "again").stdout.utf8)) as? [String: Any]
        }
        #expect(try eventually(timeout: 15, "again's first run to end") { try showAgain()?["last_result"] as? String == "ok" })
        let first = try showAgain()
        #expect(first?["last_cpu_usage_ms"] as? Double ?? 0 >= 300, "again, first run: \(String(describing: first))")
        #expect(try testbed.timerctl("run", "again").succeeded)
        #expect(try eventually(timeout: 15, "again's second run to end") {
            let shown = try showAgain()
            return shown?["runs"] as? Int == 2 && shown?["running"] as? Int == 0 && shown?["last_result"] as? String == "ok"
        })
        let second = try showAgain()
        #expect(second?["last_cpu_usage_ms"] as? Double ?? 1000 < 300, "again, second run: \(String(describing: second))")
        let cgroupsOfAgain = try testbed.inside(["cat", seen]).stdout.split(separator: "\n")
        // Where runs have the memory controller, only Linux 6.12 can reset a cgroup's memory peak for a run:
        // before, each run has a new cgroup (of the same name, the first one being gone).
        let stats = try JSONSerialization.jsonObject(with: Data(try testbed.timerctl("--json", "stats").stdout.utf8)) as? [String: Any]
        let controllers = (stats?["run_tracking"] as? [String: Any])?["controllers"] as? [String] ?? []
        var host = utsname()
        uname(&host)
        let release = withUnsafeBytes(of: host.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let version = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        let reused = !controllers.contains("memory") || (version.count == 2 && (version[0], version[1]) >= (6, 12))
        #expect(cgroupsOfAgain.count == 2 && (cgroupsOfAgain[0] == cgroupsOfAgain[1]) == reused
                    && cgroupsOfAgain.allSatisfy { $0.contains("/runs/again@1 ") },
                "the cgroups of again's two runs (path, inode), reused: \(reused): \(cgroupsOfAgain)")

        // A cancel: the run is stopped, its escapee with it.
        try testbed.timerctl("add", "cancelled", "--in", "10ms", "--command", "setsid sleep 303 & sleep 304")
        #expect(try eventually(timeout: 10, "the escapee of cancelled to start") { try !sleeping(303).isEmpty })
        #expect(try testbed.timerctl("cancel", "cancelled").succeeded)
        #expect(try eventually(timeout: 15, "cancelled's processes to end") { try (sleeping(303) + sleeping(304)).isEmpty })

        // The main process exits: what it left in the cgroup is stopped, and the run ends after it.
        try testbed.timerctl("add", "leaves", "--in", "10ms", "--command", "setsid sleep 302 & exit 0")
        #expect(try eventually(timeout: 15, "leaves to end") { try lastResult("leaves") == "ok" })
        let afterEnd = try sleeping(302)
        #expect(afterEnd.isEmpty, "left after the run ended: \(afterEnd)")

        // kill_mode=process: the escapee stays, in its run's cgroup, until it ends; then the cgroup goes.
        try testbed.timerctl("add", "keeps", "--in", "10ms", "--kill-mode", "process", "--command", "setsid sleep 305 & exit 0")
        #expect(try eventually(timeout: 15, "keeps to end") { try lastResult("keeps") == "ok" })
        let kept = try sleeping(305)
        #expect(kept.count == 1, "kill_mode=process: \(kept)")
        let status = try testbed.systemctl("status", "timerd.service").stdout
        #expect(status.contains("supervisor") && status.contains("keeps@1"), "cgroups of timerd.service:\n\(status)")
        for pid in kept { _ = try testbed.inside(["kill", pid]) }
        // Once what it left has gone, the run's cgroup is removed.
        #expect(try eventually(timeout: 10, "keeps@1's cgroup to go") {
            try !testbed.systemctl("status", "timerd.service").stdout.contains("keeps@1")
        })

        // Stopping timerd while a run's escapee lives: nothing is left for systemd to sweep.
        try testbed.timerctl("add", "atstop", "--in", "10ms", "--command", "setsid sleep 306 & sleep 307")
        #expect(try eventually(timeout: 10, "atstop's escapee to start") { try !sleeping(306).isEmpty })
        try testbed.mustSystemctl("stop", "timerd.service", timeout: 60)
        let afterStop = try sleeping(306) + sleeping(307)
        #expect(afterStop.isEmpty, "left after the stop: \(afterStop)")
        let journal = try testbed.journal(["-u", "timerd.service"], after: cursor).map(Testbed.message)
        let swept = journal.filter { $0.contains("Killing process") || $0.contains("left-over process") }
        #expect(swept.isEmpty, "systemd had to kill what timerd left behind: \(swept)")
    }

    @Test("cgroup limits: enforced where timerd.service was given the controller, refused naming it where not")
    func runLimits() throws {
        try testbed.prepare(config: "")
        try testbed.mustSystemctl("start", "timerd.service")
        let stats = try JSONSerialization.jsonObject(with: Data(try testbed.timerctl("--json", "stats").stdout.utf8)) as? [String: Any]
        let tracking = try #require(stats?["run_tracking"] as? [String: Any], "\(String(describing: stats))")
        #expect(tracking["by"] as? String == "cgroup")
        let controllers = try #require(tracking["controllers"] as? [String])
        func show(_ job: String) throws -> [String: Any] {
            try JSONSerialization.jsonObject(with: Data(try testbed.timerctl("--json", "show", job).stdout.utf8)) as? [String: Any] ?? [:]
        }
        if controllers.contains("memory") {
            // 100 MB held by tail (no newline in /dev/zero) against a 32 MB limit and no swap: the kernel's OOM
            // killer ends it, and the run says which limit.
            let add = try testbed.timerctl("add", "hog", "--in", "10ms", "--memory-max", "32M", "--memory-swap-max", "0",
                                           "--command", "head -c 100000000 /dev/zero | tail")
            #expect(add.succeeded, "\(add)")
            #expect(try eventually(timeout: 30, "hog to end") { try show("hog")["last_result"] as? String != nil })
            let hog = try show("hog")
            #expect(hog["last_result"] as? String == "killed")
            #expect((hog["last_reason"] as? String)?.hasPrefix("killed by its memory limit (memory_max=32M, memory_swap_max=0): the OOM killer ended") == true,
                    "\(hog["last_reason"] ?? "-")")
        } else {
            let add = try testbed.timerctl("add", "hog", "--in", "10ms", "--memory-max", "32M", "--command", "true")
            #expect(!add.succeeded && add.stderr.contains("memory_max needs the memory controller, which timerd's cgroup "),
                    "\(add)")
        }
        if controllers.contains("pids") {
            // Three sleeps at once in a cgroup that allows two tasks: the shell and one sleep; forks fail.
            let add = try testbed.timerctl("add", "forks", "--in", "10ms", "--tasks-max", "2",
                                           "--command", "sleep 1 & sleep 1 & sleep 1 & wait; echo done")
            #expect(add.succeeded, "\(add)")
            #expect(try eventually(timeout: 30, "forks to end") { try show("forks")["last_result"] as? String != nil })
            let forks = try show("forks")
            #expect((forks["last_output"] as? String)?.contains("fork") == true, "\(forks)")
        } else {
            let add = try testbed.timerctl("add", "forks", "--in", "10ms", "--tasks-max", "2", "--command", "true")
            #expect(!add.succeeded && add.stderr.contains("tasks_max needs the pids controller"), "\(add)")
        }
    }

    @Test("systemctl stop with a running job stops within the grace and leaves no job process")
    func stopWithRunningJob() throws {
        try testbed.prepare(config: """
            [daemon]
            stop_grace = 3s

            [job "long"]
            every = 1h
            start = 1h
            command = sleep 300

            """)
        try testbed.mustSystemctl("start", "timerd.service")
        let run = try testbed.timerctl("run", "long")
        #expect(run.succeeded && run.stdout.contains("started"), "timerctl run long: \(run)")
        let sleeping = try eventually(timeout: 10, "`sleep 300` to run inside the namespace") {
            try testbed.inside(["pgrep", "-f", "sleep 300"]).succeeded
        }
        if sleeping {
            let status = try testbed.systemctl("status", "timerd.service")
            #expect(status.stdout.contains("sleep 300"), "the job is not in timerd.service's cgroup:\n\(status.stdout)")
        }

        let cursor = try testbed.journalCursor()
        let started = Date()
        let stop = try testbed.systemctl("stop", "timerd.service", timeout: 120)
        let elapsed = Date().timeIntervalSince(started)
        print("systemctl stop timerd with a running job took \(String(format: "%.2f", elapsed))s (stop_grace 3s, TimeoutStopSec=90s)")
        #expect(stop.succeeded, "\(stop)")
        #expect(elapsed < 15, "stop took \(elapsed)s; stop_grace is 3s")
        let left = try testbed.inside(["pgrep", "-a", "-f", "sleep 300"])
        #expect(!left.succeeded, "job processes left after stop: \(left.stdout)")
        let after = try testbed.show("timerd.service", ["ActiveState", "Result", "ControlGroup"])
        #expect(after["ActiveState"] == "inactive", "\(after)")
        #expect(after["Result"] == "success", "timerd did not exit cleanly on SIGTERM: \(after)")
        // timerd kills its jobs' process groups itself; systemd's KillMode=mixed sweep should find nothing.
        let journal = try testbed.journal(["-u", "timerd.service"], after: cursor).map(Testbed.message)
        let swept = journal.filter { $0.contains("Killing process") || $0.contains("left-over process") }
        #expect(swept.isEmpty, "systemd had to kill what timerd left behind: \(swept)")
        print("journal during stop:\n" + journal.joined(separator: "\n"))
    }

    @Test("socket activation: the first timerctl ping starts timerd; the socket file belongs to systemd")
    func socketActivation() throws {
        try testbed.prepare(config: Self.helloConfig)
        try testbed.mustSystemctl("start", "timerd.socket")
        #expect(testbed.property("timerd.service", "ActiveState") == "inactive", "the service started without a connection")
        #expect(testbed.isSocket(Testbed.socketPath), "systemd did not create \(Testbed.socketPath)")

        let ping = try testbed.timerctl("ping")
        #expect(ping.succeeded && ping.stdout.contains("pong"), "timerctl ping through the activation socket: \(ping)")
        eventually(timeout: 10, "timerd.service to be active after the first connection") {
            testbed.property("timerd.service", "ActiveState") == "active"
        }
        #expect(try testbed.timerctl("list").stdout.contains("hello"))

        // Only the service stops: the socket stays, and so does its file (timerd does not unlink it).
        try testbed.mustSystemctl("stop", "timerd.service")
        #expect(testbed.property("timerd.socket", "ActiveState") == "active")
        #expect(testbed.isSocket(Testbed.socketPath), "\(Testbed.socketPath) vanished when only timerd.service stopped")

        // Both stop: systemd removes the file (RemoveOnStop=yes).
        try testbed.mustSystemctl("stop", "timerd.service", "timerd.socket")
        eventually(timeout: 5, "\(Testbed.socketPath) to be removed when timerd.socket stops") {
            !FileManager.default.fileExists(atPath: testbed.hostPath(Testbed.socketPath))
        }
        #expect(try !testbed.timerctl("ping").succeeded, "timerctl ping answered with the socket stopped")
    }
}
