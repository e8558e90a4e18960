import Foundation
import Glibc
import Testing
import TimerdTestSupport

/// Starts the real `timerd` on a temporary socket with a test-owned `NOTIFY_SOCKET`, waits for `READY=1`,
/// and drives it with the real `timerctl` or raw protocol lines. Every daemon a test starts is stopped by
/// PID when the test ends.
final class Daemon: @unchecked Sendable {
    let directory: String
    let socket: String
    let configPath: String
    let logPath: String
    /// The daemon's `--state-dir` (its own, inside `directory`).
    let stateDirectory: String
    let process = Process()
    /// The test-owned `NOTIFY_SOCKET` the daemon reports to.
    let notify: NotifySocket

    /// The `timerd` or `timerctl` the tests start: from `$TIMERD_TEST_BIN_DIR` when set (`make test` sets it
    /// to `.build/release`, the binaries `make build` produces), else from the test bundle's directory (plain
    /// `swift test`: the debug build; `make test-tsan`/`test-asan`: the instrumented one). Throws, naming
    /// the directory, when the binary is not there: a test never falls back to another build's.
    static func binary(_ name: String) throws -> String { try TestBinaries.product(name) }

    /// Starts a daemon. `config` (if given) is written to `timerd.conf` in a fresh temporary directory;
    /// `$DIR` in it is replaced by that directory. `softFileLimit` starts it with that soft limit on open
    /// descriptors (as systemd starts a service with 1,024), through `sh -c 'ulimit -Sn N; exec timerd …'`:
    /// the process keeps the shell's PID, so `process` still is the daemon. With it, `hardFileLimitAtLeast`
    /// raises the hard limit there first where it is lower (root may): the daemon's limits are set in its
    /// own shell, never in the test process, whose limits every test shares. `readOnlySystem` starts it in
    /// a mount namespace of its own where everything but its directory is read-only (`/`, remounted so
    /// there; `/proc`, `/sys`, `/dev` stay as they are), and a network namespace of its own (no network,
    /// not even loopback), for jobs whose commands and webhooks a test did not write (the docs'
    /// examples): whatever they run cannot change the host or reach anything. Through `unshare` (it
    /// execs, so `process` still is the daemon); as root, or else in a user namespace of its own.
    init(config: String? = nil, extraArguments: [String] = [], environment: [String: String] = [:],
         waitForReady: Bool = true, stateDirectory sharedState: String? = nil, softFileLimit: Int? = nil,
         hardFileLimitAtLeast: Int? = nil, readOnlySystem: Bool = false) throws {
        let timerd = try Self.binary("timerd")
        directory = try makeTemporaryDirectory()
        socket = directory + "/timerd.sock"
        configPath = directory + "/timerd.conf"
        logPath = directory + "/timerd.log"
        if let config {
            try config.replacingOccurrences(of: "$DIR", with: directory).write(toFile: configPath, atomically: true, encoding: .utf8)
        }
        notify = try NotifySocket(path: directory + "/notify.sock")
        // Its own state unless the test restarts "the same" daemon on a shared one.
        stateDirectory = sharedState ?? directory + "/state"
        let arguments = ["--socket", socket] + (config == nil ? ["--config", directory + "/absent.conf"] : ["--config", configPath])
            + ["--state-dir", stateDirectory] + extraArguments
        if let softFileLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            let raiseHard = hardFileLimitAtLeast.map {
                "{ [ \"$(ulimit -Hn)\" = unlimited ] || [ \"$(ulimit -Hn)\" -ge \($0) ] || ulimit -Hn \($0); } && "
            } ?? ""
            process.arguments = ["-c", raiseHard + "ulimit -Sn \(softFileLimit) && exec \"$0\" \"$@\"", timerd] + arguments
        } else if readOnlySystem {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments = (getuid() == 0 ? [] : ["--user", "--map-root-user"]) + ["--mount", "--net", "--propagation", "private", "/bin/sh", "-c",
                #"mount --bind "$1" "$1" && mount -o bind,remount,ro / && shift && exec "$@""#, "sh", directory, timerd] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: timerd)
            process.arguments = arguments
        }
        if config == nil { _ = FileManager.default.createFile(atPath: directory + "/absent.conf", contents: Data()) }
        var env = ProcessInfo.processInfo.environment
        env["NOTIFY_SOCKET"] = notify.path
        env["TIMERD_DEBUG"] = "1"
        env.removeValue(forKey: "TIMERD_SOCKET")
        env.removeValue(forKey: "JOURNAL_STREAM")
        for (key, value) in environment { env[key] = value }
        process.environment = env
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle(forWritingAtPath: logPath)
        try process.run()
        if waitForReady {
            guard notify.waitFor("READY=1", timeout: 20) else {
                stop()
                throw HarnessError("timerd did not send READY=1 within 20s; log:\n\(log)")
            }
        }
    }

    deinit {
        stop()
        expectNoSanitizerReport(in: log, from: "timerd (pid \(process.processIdentifier), log \(logPath))")
        // Keep the directory (log, files) only when asked: TIMERD_TEST_KEEP=1.
        removeTemporaryDirectory(directory)
    }

    /// The daemon's stderr so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Whether the log shows `text`, waiting for it: lines are written by the logger's queue a little after
    /// what they report (gathered for up to 20 ms under load, `Gathering`).
    func logShows(_ text: String, timeout: Double = 10) -> Bool {
        eventually(timeout: timeout, "the log to show \(text)") { log.contains(text) }
    }

    /// Sends SIGTERM (if still running) and waits for exit. Returns the exit status. A daemon that has not
    /// exited 60 s later (far beyond any stop_grace the tests set) is a failure: it is killed and reported,
    /// so a wedged stop fails the test instead of hanging the suite.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        if process.isRunning {
            kill(process.processIdentifier, signal)
            if !eventually(timeout: 60, "timerd to exit", { !process.isRunning }) {
                Issue.record("timerd (pid \(process.processIdentifier)) did not exit within 60 s of signal \(signal); killed it. Log tail:\n\(log.suffix(3_000))")
                kill(process.processIdentifier, SIGKILL)
            }
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    /// Runs `timerctl --socket … args`, returning its exit code and output.
    @discardableResult
    func ctl(_ arguments: String...) throws -> CommandResult {
        try Self.run(Self.binary("timerctl"), ["--socket", socket] + arguments)
    }

    /// Sends raw protocol lines on one connection and returns one reply line per request.
    func send(_ lines: String...) throws -> [String] {
        let client = try Client(path: socket)
        return try lines.map { try client.request($0) }
    }

    /// One raw request on a fresh connection.
    func request(_ line: String) throws -> String {
        try Client(path: socket).request(line)
    }

    /// `SHOW name` decoded as a dictionary.
    func show(_ name: String) throws -> [String: Any] {
        let reply = try request("SHOW \(name)")
        guard reply.hasPrefix("OK ") else { throw HarnessError("SHOW \(name): \(reply)") }
        return try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as! [String: Any]
    }

    /// Lines of a file under the test directory (empty if it does not exist yet).
    func lines(_ file: String) -> [String] {
        guard let text = try? String(contentsOfFile: directory + "/" + file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    static func run(_ program: String, _ arguments: [String], environment: [String: String]? = nil) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read both pipes to EOF before waiting, so a chatty child cannot block on a full pipe.
        let group = DispatchGroup()
        nonisolated(unsafe) var stdout = Data(), stderr = Data()
        group.enter()
        DispatchQueue.global().async { stdout = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        stderr = err.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        expectNoSanitizerReport(in: String(decoding: stderr, as: UTF8.self), from: "\(program) \(arguments.joined(separator: " "))")
        return CommandResult(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }
}

struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Waits for `condition` to hold, checking every 10 ms, for at most `timeout` seconds. This waits on an
/// observable condition (a file, a reply), never a fixed delay; the timeout only bounds a failing test.
@discardableResult
func eventually(timeout: Double = 10, _ what: String = "condition", _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(10_000)
    }
    let ok = try condition()
    if !ok { Issue.record("timed out after \(timeout)s waiting for \(what)") }
    return ok
}

/// Fails the test if `output` (a process's stderr) holds a ThreadSanitizer, AddressSanitizer or
/// LeakSanitizer report: under `make test-tsan` and `make test-asan` the binaries the tests start are
/// instrumented too, and their reports go to their stderr (a daemon's log), not the test's.
func expectNoSanitizerReport(in output: String, from process: String) {
    let markers = ["WARNING: ThreadSanitizer:", "ERROR: AddressSanitizer:", "ERROR: LeakSanitizer:"]
    guard let start = markers.compactMap({ output.range(of: $0)?.lowerBound }).min() else { return }
    Issue.record("sanitizer report from \(process):\n\(output[start...])")
}

/// A fresh directory `/tmp/timerd-test-XXXXXX`. Whoever makes one removes it when the test ends
/// (`removeTemporaryDirectory`), so a run leaves nothing in /tmp.
func makeTemporaryDirectory() throws -> String {
    var template = Array("/tmp/timerd-test-XXXXXX".utf8CString)
    guard let result = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
    return String(cString: result)
}

/// Removes a directory from `makeTemporaryDirectory` with everything in it, unless the run keeps them for
/// a look afterwards (`TIMERD_TEST_KEEP=1`).
func removeTemporaryDirectory(_ directory: String) {
    guard ProcessInfo.processInfo.environment["TIMERD_TEST_KEEP"] == nil else { return }
    try? FileManager.default.removeItem(atPath: directory)
}

/// A blocking protocol client on one connection.
final class Client {
    /// -1 once closed: a descriptor is closed exactly once, since a second close would close whatever
    /// another test running meanwhile has been given that number (seen as `recv failed: errno 9`).
    private(set) var fd: Int32
    private var buffer: [UInt8] = []

    init(path: String) throws {
        // Close-on-exec: processes other tests start meanwhile must not inherit test clients.
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8) + [0])
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let error = errno
            // The object is fully initialised here, so its deinit runs when this throws: close once.
            close()
            throw HarnessError("connect \(path): errno \(error)")
        }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close() }

    /// Closes the connection (once; later calls do nothing).
    func close() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        fd = -1
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw HarnessError("send failed: errno \(errno)") }
            offset += n
        }
    }

    func write(_ text: String) throws { try write(Array(text.utf8)) }

    /// Reads one reply line (without the newline). Throws on EOF or timeout.
    func readLine() throws -> String {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return String(decoding: line, as: UTF8.self)
            }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw HarnessError(n == 0 ? "connection closed by timerd" : "recv failed: errno \(errno)") }
            buffer += chunk[..<n]
        }
    }

    func request(_ line: String) throws -> String {
        try write(line + "\n")
        return try readLine()
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }
}

/// A datagram socket standing in for systemd's notify socket.
final class NotifySocket {
    let path: String
    let fd: Int32
    /// Every datagram received so far, in order.
    private(set) var received: [String] = []

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw HarnessError("bind notify socket: errno \(errno)") }
    }

    deinit { close(fd) }

    /// Waits until a datagram containing the line `state` (or, with `prefix`, a line starting with it)
    /// arrives.
    func waitFor(_ state: String, prefix: Bool = false, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let remaining = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
            guard poll(&poller, 1, remaining) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { continue }
            let message = String(decoding: buffer[..<n], as: UTF8.self)
            received.append(message)
            if message.split(separator: "\n").contains(where: { prefix ? $0.hasPrefix(state) : $0 == state }) { return true }
        }
        return false
    }
}
