import Foundation
import Glibc
import Testing
import TimerdTestSupport

/// Whether this machine can boot a private systemd (see docs in /work/shared/design/systemd-in-a-namespace.md),
/// and what to do when it cannot: skip loudly, or fail when `CI=true`.
enum Prerequisites {
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// Why the test bed cannot run here, or nil.
    static let problem: String? = {
        var problems: [String] = []
        if geteuid() != 0 { problems.append("not running as root (euid \(geteuid()))") }
        for tool in ["unshare", "nsenter", "systemctl", "journalctl", "systemd-analyze", "timeout", "bash", "kill"]
        where Shell.which(tool) == nil {
            problems.append("`\(tool)` is not on PATH")
        }
        if !FileManager.default.isExecutableFile(atPath: Testbed.systemdBinary) {
            problems.append("\(Testbed.systemdBinary) is missing")
        }
        if !FileManager.default.fileExists(atPath: "/sys/fs/cgroup") { problems.append("/sys/fs/cgroup is missing") }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }()

    /// The suite's `.enabled(if:)` condition. Prints the reason, loudly, once.
    static let shouldRun: Bool = {
        guard let problem else { return true }
        let bar = String(repeating: "!", count: 100)
        if isCI {
            print("\n\(bar)\n!! SystemdTests CANNOT RUN: \(problem).\n!! CI=true, so this is a FAILURE, not a skip.\n\(bar)\n")
            return true  // runs, and the suite's scope fails with the reason
        }
        print("\n\(bar)\n!! SystemdTests SKIPPED: \(problem).\n!! These tests boot a private systemd in PID+mount namespaces and need root, util-linux's unshare/nsenter and\n!! \(Testbed.systemdBinary). Nothing about timerd's systemd integration was tested. (With CI=true this fails.)\n\(bar)\n")
        return false
    }()
}

/// Boots the private systemd once around the whole suite and tears it down afterwards, whatever happens
/// inside. The booted test bed is reachable from the tests as `Testbed.current`.
struct SystemdTestbedTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        if let problem = Prerequisites.problem {
            throw TestbedError("SystemdTests cannot run (and CI=true requires them): \(problem)")
        }
        let testbed = try Testbed.boot()
        defer { testbed.shutdown() }
        try await Testbed.$current.withValue(testbed) {
            try await function()
        }
    }
}

/// A private systemd, booted in PID + mount (+ cgroup) namespaces with its own `/tmp` and `/run`, a volatile
/// journal and a target of its own (`testbed.target`), so it starts nothing but what the tests ask for.
/// Everything it starts lives under a cgroup of its own, removed at the end.
final class Testbed: @unchecked Sendable {
    @TaskLocal static var current: Testbed?

    static let systemdBinary = "/lib/systemd/systemd"
    /// The repository (for `systemd/timerd.service` and `timerd.socket`).
    static let repository: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }  // Tests/SystemdTests/Testbed.swift
        return url.path
    }()
    /// The directory holding the `timerd` and `timerctl` under test: `$TIMERD_TEST_BIN_DIR` when set (`make
    /// test`: the release build), else the test bundle's (TestBinaries).
    static let builtBinaries = TestBinaries.productDirectory
    /// Where the namespace runs them from: the build directory, or a copy under /var/tmp when the build is
    /// under /tmp or /run, which the namespace replaces with its own tmpfs (a checkout in /tmp).
    static let binaries: String = {
        let built = builtBinaries
        guard built.hasPrefix("/tmp/") || built.hasPrefix("/run/") else { return built }
        var template = Array("/var/tmp/timerd-systemd-bin-XXXXXX".utf8CString)
        guard let result = mkdtemp(&template) else { return built }
        let copy = String(cString: result)
        for binary in ["timerd", "timerctl"] {
            try? FileManager.default.copyItem(atPath: built + "/" + binary, toPath: copy + "/" + binary)
        }
        return copy
    }()
    static let socketPath = "/run/timerd/timerd.sock"

    /// Scratch directory on the host's /var/tmp (visible inside; /tmp and /run are not).
    let scratch: String
    /// The `unshare` process (started by the suite; the namespaced systemd is its only child).
    let unshare: Process
    /// Host PID of the namespaced systemd (PID 1 inside).
    let systemdPID: pid_t
    /// Powers the systemd off should this test process die without tearing down.
    let guardian: Process
    var configPath: String { scratch + "/timerd.conf" }
    var consoleLog: String { (try? String(contentsOfFile: scratch + "/console.log", encoding: .utf8)) ?? "" }

    private init(scratch: String, unshare: Process, systemdPID: pid_t, guardian: Process) {
        self.scratch = scratch
        self.unshare = unshare
        self.systemdPID = systemdPID
        self.guardian = guardian
    }

    static func require() throws -> Testbed {
        guard let current else { throw TestbedError("no test bed: the suite's SystemdTestbedTrait did not run") }
        return current
    }

    // MARK: - Boot and power-off

    static func boot() throws -> Testbed {
        let started = Date()
        for binary in ["timerd", "timerctl"] { _ = try TestBinaries.product(binary) }
        let scratch = try makeScratchDirectory()
        do {
            try FileManager.default.copyItem(atPath: repository + "/tools/private-systemd.sh", toPath: scratch + "/boot.sh")
            try guardianScript.write(toFile: scratch + "/guardian.sh", atomically: true, encoding: .utf8)
            _ = FileManager.default.createFile(atPath: scratch + "/console.log", contents: nil)
            _ = FileManager.default.createFile(atPath: scratch + "/cgroups", contents: nil)
        } catch {
            try? FileManager.default.removeItem(atPath: scratch)
            throw error
        }
        let cgroupName = "timerd-testbed-" + (scratch as NSString).lastPathComponent

        // boot.sh execs unshare, so this process *is* the unshare process. Foundation starts it in a
        // process group of its own: a Ctrl-C on the terminal does not reach it or its systemd.
        let unshare = Process()
        unshare.executableURL = URL(fileURLWithPath: "/bin/bash")
        unshare.arguments = [
            scratch + "/boot.sh", cgroupName, scratch, "testbed.target", "timerd SystemdTests test bed", systemdBinary,
        ]
        unshare.standardInput = FileHandle.nullDevice
        let console = FileHandle(forWritingAtPath: scratch + "/console.log")
        unshare.standardOutput = console
        unshare.standardError = console
        do {
            try unshare.run()
        } catch {
            removeCgroups(listedIn: scratch)
            try? FileManager.default.removeItem(atPath: scratch)
            throw error
        }

        // The namespaced systemd: the only child of the unshare process, once it has exec'd systemd.
        var systemdPID: pid_t = 0
        _ = waitUntil(timeout: 20) {
            guard unshare.isRunning else { return true }
            let children = (try? String(contentsOfFile: "/proc/\(unshare.processIdentifier)/task/\(unshare.processIdentifier)/children", encoding: .utf8)) ?? ""
            let pids = children.split(separator: " ").compactMap { pid_t($0.trimmed) }
            if pids.count == 1, pids[0] > 1, comm(of: pids[0]) == "systemd" { systemdPID = pids[0] }
            return systemdPID != 0
        }
        let guardian = Process()
        guardian.executableURL = URL(fileURLWithPath: "/bin/bash")
        guardian.arguments = [
            scratch + "/guardian.sh", String(getpid()), String(unshare.processIdentifier), String(systemdPID), scratch,
            ProcessInfo.processInfo.environment["TIMERD_TEST_KEEP"] != nil ? "keep" : "",
        ]
        guardian.standardInput = FileHandle.nullDevice
        guardian.standardOutput = console
        guardian.standardError = console
        let testbed = Testbed(scratch: scratch, unshare: unshare, systemdPID: systemdPID, guardian: guardian)
        guard systemdPID != 0 else {
            let log = testbed.consoleLog
            testbed.shutdown()
            throw TestbedError("the namespaced systemd did not start (unshare \(unshare.isRunning ? "running" : "exited")); console:\n\(log)")
        }
        do {
            try guardian.run()
        } catch {
            testbed.shutdown()
            throw error
        }

        var state = ""
        let running = waitUntil(timeout: 60) {
            guard unshare.isRunning else { return false }
            state = ((try? testbed.systemctl("is-system-running"))?.stdout ?? "").trimmed
            return state == "running" || state == "degraded"
        }
        guard running, state == "running" else {
            let failed = (try? testbed.systemctl("--failed", "--no-legend"))?.stdout ?? ""
            let log = testbed.consoleLog
            testbed.shutdown()
            throw TestbedError("the namespaced systemd did not reach `running` (last state \"\(state)\"); failed units: \(failed)\nconsole:\n\(log)")
        }
        print("SystemdTests: private systemd up as host PID \(systemdPID) (unshare \(unshare.processIdentifier)) in \(String(format: "%.1f", Date().timeIntervalSince(started)))s; scratch \(scratch)")
        return testbed
    }

    /// Powers the private systemd off (SIGRTMIN+4 to it, never to anything else), waits for the unshare
    /// process to exit, removes the cgroups and the scratch directory. Safe to call on a partial boot.
    func shutdown() {
        let started = Date()
        let keep = ProcessInfo.processInfo.environment["TIMERD_TEST_KEEP"] != nil
        if keep, isOurSystemd(), let journal = try? inside(["journalctl", "--no-pager", "-o", "short-monotonic"]) {
            try? journal.stdout.write(toFile: scratch + "/journal.txt", atomically: true, encoding: .utf8)
        }
        if isOurSystemd() {
            // Under make test-tsan/test-asan timerd is instrumented and its reports go to the journal (its
            // stderr); stop it first, so that LeakSanitizer's check at exit is in there too.
            _ = try? systemctl("stop", "timerd.service", "timerd.socket")
            let messages = (try? inside(["journalctl", "--no-pager", "-o", "cat", "-u", "timerd.service"]))?.stdout ?? ""
            for marker in ["WARNING: ThreadSanitizer:", "ERROR: AddressSanitizer:", "ERROR: LeakSanitizer:"] {
                if let start = messages.range(of: marker)?.lowerBound {
                    Issue.record("sanitizer report from timerd under the private systemd:\n\(messages[start...])")
                    break
                }
            }
        }
        if isOurSystemd() {
            _ = try? Shell.run(["kill", "-s", "RTMIN+4", String(systemdPID)], timeout: 10)
        }
        var exited = waitUntil(timeout: 45) { !unshare.isRunning }
        if !exited, isOurSystemd() {
            // SIGKILL to a PID namespace's init kills every process in that namespace.
            print("SystemdTests: the private systemd did not power off within 45s; SIGKILL to host PID \(systemdPID)")
            kill(systemdPID, SIGKILL)
            exited = waitUntil(timeout: 15) { !unshare.isRunning }
        }
        if !exited, unshare.isRunning {
            print("SystemdTests: unshare \(unshare.processIdentifier) still running; SIGKILL to it")
            kill(unshare.processIdentifier, SIGKILL)
            exited = waitUntil(timeout: 15) { !unshare.isRunning }
        }
        if guardian.isRunning {
            kill(guardian.processIdentifier, SIGTERM)
            _ = waitUntil(timeout: 10) { !guardian.isRunning }
        }
        let leftovers = Self.removeCgroups(listedIn: scratch)
        if !exited || !leftovers.isEmpty {
            print("SystemdTests: TEARDOWN PROBLEM: unshare \(exited ? "exited" : "STILL RUNNING (pid \(unshare.processIdentifier))"); cgroups left: \(leftovers); console:\n\(consoleLog)")
        } else {
            print("SystemdTests: private systemd powered off in \(String(format: "%.1f", Date().timeIntervalSince(started)))s")
        }
        if Self.binaries != Self.builtBinaries {
            try? FileManager.default.removeItem(atPath: Self.binaries)
        }
        if !keep {
            try? FileManager.default.removeItem(atPath: scratch)
        } else {
            print("SystemdTests: kept \(scratch) with the whole journal in journal.txt (TIMERD_TEST_KEEP)")
        }
    }

    /// The PID still names the systemd this test bed started: a child of our unshare, called systemd, not PID 1.
    private func isOurSystemd() -> Bool {
        guard systemdPID > 1, unshare.isRunning else { return false }
        return Self.comm(of: systemdPID) == "systemd" && Self.parent(of: systemdPID) == unshare.processIdentifier
    }

    private static func comm(of pid: pid_t) -> String? {
        (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmed
    }

    private static func parent(of pid: pid_t) -> pid_t? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("PPid:") {
            return pid_t(line.dropFirst(5).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// Removes the cgroups boot.sh created (and what systemd created below them), deepest first. Only
    /// empty cgroups can be removed, so this never touches a live process. Returns what is left.
    @discardableResult
    private static func removeCgroups(listedIn scratch: String) -> [String] {
        let list = (try? String(contentsOfFile: scratch + "/cgroups", encoding: .utf8)) ?? ""
        var left: [String] = []
        for root in list.split(separator: "\n").map(String.init) where root.hasPrefix("/sys/fs/cgroup/") && root.contains("/timerd-testbed-") {
            _ = try? Shell.run(["find", root, "-depth", "-type", "d", "-exec", "rmdir", "{}", ";"], timeout: 20)
            if FileManager.default.fileExists(atPath: root) { left.append(root) }
        }
        return left
    }

    private static func makeScratchDirectory() throws -> String {
        var template = Array("/var/tmp/timerd-systemd-test-XXXXXX".utf8CString)
        guard let result = mkdtemp(&template) else { throw TestbedError("mkdtemp in /var/tmp failed: errno \(errno)") }
        let path = String(cString: result)
        chmod(path, 0o755)
        return path
    }

    // MARK: - Driving it

    /// Runs a command inside the namespaces (sees the private /run, /tmp and PID 1).
    func inside(_ command: [String], timeout: Double = 60) throws -> CommandResult {
        try Shell.run(["nsenter", "-t", String(systemdPID), "-m", "-p", "--"] + command, timeout: timeout)
    }

    @discardableResult
    func systemctl(_ arguments: String..., timeout: Double = 60) throws -> CommandResult {
        try inside(["systemctl", "--no-pager"] + arguments, timeout: timeout)
    }

    /// `systemctl start|stop|…` that must succeed.
    @discardableResult
    func mustSystemctl(_ arguments: String..., timeout: Double = 60) throws -> CommandResult {
        let result = try inside(["systemctl", "--no-pager"] + arguments, timeout: timeout)
        guard result.succeeded else {
            throw TestbedError("\(result)\nstatus:\n\(statusText())\njournal:\n\(journalTail())")
        }
        return result
    }

    /// `systemctl show -p …` as a dictionary.
    func show(_ unit: String, _ properties: [String]) throws -> [String: String] {
        let result = try inside(["systemctl", "show", unit, "-p", properties.joined(separator: ",")])
        var values: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    func property(_ unit: String, _ name: String) -> String {
        ((try? show(unit, [name])) ?? [:])[name] ?? ""
    }

    /// `timerctl --socket /run/timerd/timerd.sock …`, inside the namespaces.
    @discardableResult
    func timerctl(_ arguments: String..., timeout: Double = 30) throws -> CommandResult {
        try inside([Self.binaries + "/timerctl", "--socket", Self.socketPath] + arguments, timeout: timeout)
    }

    /// Journal entries as JSON objects: `journalctl ARGS -o json`.
    func journal(_ arguments: [String], after cursor: String? = nil) throws -> [[String: Any]] {
        var command = ["journalctl", "--no-pager", "-o", "json"] + arguments
        if let cursor { command.append("--after-cursor=\(cursor)") }
        let result = try inside(command)
        return result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// The cursor of the newest journal entry (to read only what comes after it).
    func journalCursor() throws -> String? {
        try journal(["-n", "1"]).last?["__CURSOR"] as? String
    }

    /// The MESSAGE of an entry (journalctl shows non-UTF-8 or binary messages as arrays of bytes).
    static func message(_ entry: [String: Any]) -> String {
        if let text = entry["MESSAGE"] as? String { return text }
        if let bytes = entry["MESSAGE"] as? [Int] { return String(decoding: bytes.map { UInt8(truncatingIfNeeded: $0) }, as: UTF8.self) }
        return ""
    }

    /// For failure messages.
    func journalTail(_ lines: Int = 40) -> String {
        ((try? inside(["journalctl", "--no-pager", "-u", "timerd.service", "-u", "timerd.socket", "-n", String(lines)]))?.stdout) ?? ""
    }

    func statusText() -> String {
        ((try? systemctl("status", "timerd.service", "timerd.socket"))?.stdout) ?? ""
    }

    /// A path inside the namespaces' mount namespace, seen from the host.
    func hostPath(_ path: String) -> String { "/proc/\(systemdPID)/root" + path }

    /// Whether `path` (inside) is a Unix socket.
    func isSocket(_ path: String) -> Bool {
        var info = stat()
        guard lstat(hostPath(path), &info) == 0 else { return false }
        return (info.st_mode & S_IFMT) == S_IFSOCK
    }

    // MARK: - Units and config

    /// The units under test, generated from the repository's: `@BINDIR@` is the build directory and the
    /// config is the test's. `watchdog` turns WatchdogSec= down to 2s and enables the wedge failpoint.
    static func generateUnits(configPath: String, watchdog: Bool) throws -> (service: String, socket: String) {
        let unitDirectory = repository + "/systemd"
        var service = try String(contentsOfFile: unitDirectory + "/timerd.service", encoding: .utf8)
        let socket = try String(contentsOfFile: unitDirectory + "/timerd.socket", encoding: .utf8)
        let production = "--config /etc/timerd/timerd.conf"
        guard service.contains("@BINDIR@"), service.contains(production) else {
            throw TestbedError("systemd/timerd.service no longer has `@BINDIR@` and `\(production)` in ExecStart=; update Testbed.generateUnits")
        }
        service = service.replacingOccurrences(of: "@BINDIR@", with: binaries)
            .replacingOccurrences(of: production, with: "--config \(configPath) --state-dir /run/timerd-test-state")
        if watchdog {
            var lines = service.components(separatedBy: "\n")
            guard let index = lines.firstIndex(where: { $0.hasPrefix("WatchdogSec=") }) else {
                throw TestbedError("systemd/timerd.service has no WatchdogSec= line to shorten")
            }
            lines[index] = "WatchdogSec=2s"
            lines.insert("Environment=TIMERD_TEST_FAILPOINTS=wedge-registry-on-usr1", at: index + 1)
            service = lines.joined(separator: "\n")
        }
        return (service, socket)
    }

    /// Test-bed-only drop-in (not part of the units under test). Without it, starting the units would pull in
    /// sysinit.target through the default dependencies: fstab mounts, systemd-tmpfiles, sysctl, udev,
    /// timesyncd… run against this shared machine. And ConfigurationDirectory=/StateDirectory= would create
    /// /etc/timerd and /var/lib/timerd on the host (only /run and /tmp are private here): the generated
    /// unit keeps its state under /run instead.
    static let safetyDropIn = """
        # SystemdTests test bed only: keep the private systemd from touching the shared machine.
        [Unit]
        DefaultDependencies=no
        Conflicts=shutdown.target
        Before=shutdown.target

        """

    /// Under `make test-tsan`/`test-asan`: the sanitizers' options of the test run (their suppressions
    /// above all), which systemd's clean environment would otherwise leave out of timerd's.
    static func sanitizerEnvironment() -> String {
        let environment = ProcessInfo.processInfo.environment
        return ["TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS"].compactMap { key in
            environment[key].map { "Environment=\"\(key)=\($0)\"\n" }
        }.joined()
    }

    /// Stops timerd (service and socket), writes the config and the units, and reloads systemd.
    func prepare(config: String, watchdog: Bool = false) throws {
        try stopAll()
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let units = try Self.generateUnits(configPath: configPath, watchdog: watchdog)
        let directory = hostPath("/run/systemd/system")
        let fileManager = FileManager.default
        try fileManager.createDirectory(atPath: directory + "/timerd.service.d", withIntermediateDirectories: true)
        try fileManager.createDirectory(atPath: directory + "/timerd.socket.d", withIntermediateDirectories: true)
        try units.service.write(toFile: directory + "/timerd.service", atomically: true, encoding: .utf8)
        try units.socket.write(toFile: directory + "/timerd.socket", atomically: true, encoding: .utf8)
        try (Self.safetyDropIn + "[Service]\nConfigurationDirectory=\nStateDirectory=\n" + Self.sanitizerEnvironment())
            .write(toFile: directory + "/timerd.service.d/10-testbed.conf", atomically: true, encoding: .utf8)
        try Self.safetyDropIn.write(toFile: directory + "/timerd.socket.d/10-testbed.conf", atomically: true, encoding: .utf8)
        try mustSystemctl("daemon-reload")
    }

    /// Stops the service and the socket and forgets failures and restart counts.
    func stopAll() throws {
        try systemctl("stop", "timerd.service", "timerd.socket", timeout: 120)
        try systemctl("reset-failed", "timerd.service", "timerd.socket")
    }

    // MARK: - Scripts

    /// Powers the private systemd off if the test process dies (crash, kill) without tearing it down. It
    /// polls while both the test process and the unshare process exist; it only signals a PID that is still
    /// a `systemd` child of that unshare process.
    private static let guardianScript = #"""
        test=$1 unshare=$2 systemd=$3 scratch=$4 keep=$5
        while [ -e "/proc/$test" ] && [ -e "/proc/$unshare" ]; do sleep 1; done
        if [ -e "/proc/$unshare" ] && [ "$(cat "/proc/$systemd/comm" 2>/dev/null)" = systemd ] \
           && grep -qE "^PPid:[[:space:]]+$unshare\$" "/proc/$systemd/status"; then
          echo "guardian: test process $test is gone; powering off the test systemd (host PID $systemd)"
          kill -s RTMIN+4 "$systemd"
        fi
        # The test process ended without its teardown (killed, crashed): once the unshare has exited, do
        # what the teardown would have, so no cgroup or scratch directory is left behind.
        [ -e "/proc/$test" ] && exit 0
        for _ in $(seq 60); do [ -e "/proc/$unshare" ] || break; sleep 1; done
        [ -e "/proc/$unshare" ] && exit 0
        while read -r root; do
          case $root in /sys/fs/cgroup/*timerd-testbed-*) find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null ;; esac
        done < "$scratch/cgroups"
        [ "$keep" = keep ] || rm -rf "$scratch"
        """#
}
