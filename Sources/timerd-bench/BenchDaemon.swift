import Foundation
import TimerdSystem

/// A timerd started for one scenario, on its own socket, config and log file under the work directory, and
/// with a notification socket of its own (`NOTIFY_SOCKET`), as systemd starts it (`Type=notify`): it then
/// sends `READY=1` and keeps its status line up to date (`STATUS=`), work a daemon started without one
/// does not do (with 100,000 jobs that work once held other jobs' fires back 28-52 ms, unseen here).
///
/// As root it also gets a cgroup of its own (`Delegate=yes` in timerd.service) when the cgroup v2 hierarchy
/// can be written: timerd then runs each command in a cgroup of its own, as it does under systemd, work
/// it skips in a cgroup it does not own (docs/performance.md, "Runs in cgroups (round 15)").
final class BenchDaemon {
    let child: ChildProcess
    let socket: String
    let log: String
    let notify: NotifyDrain
    /// The cgroup it was started in (removed, with what timerd made in it, by `stop`); nil: it runs where
    /// `timerd-bench` runs.
    let cgroup: CgroupDirectory?

    /// Starts `timerd` with `config` (the text of `[daemon]` settings and jobs) and no state (an earlier
    /// run's is removed) and waits until it answers `PING`.
    init(timerd: String, workDirectory: String, name: String, config: String) throws {
        let configPath = "\(workDirectory)/\(name).conf"
        socket = "\(workDirectory)/\(name).sock"
        log = "\(workDirectory)/\(name).log"
        try? FileSystem.unlink(socket)
        try? FileManager.default.removeItem(atPath: configPath + ".state")
        try FileSystem.writeAtomically(configPath, config)
        notify = try NotifyDrain(path: "\(workDirectory)/\(name).notify")
        let output = try FileDescriptor.open(log, .writeOnly, options: [.create, .truncate])
        defer { try? output.close() }
        cgroup = Self.makeCgroup(name)
        let cgroupDirectory = try? cgroup?.open()
        defer { try? cgroupDirectory?.close() }
        child = try Spawn.run(
            program: timerd, arguments: ["--config", configPath, "--socket", socket, "--state-dir", configPath + ".state"],
            environment: ["PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workDirectory, "NOTIFY_SOCKET": notify.path],
            output: output, cgroup: cgroupDirectory)
        try FileSystem.writeAtomically("\(workDirectory)/daemon.pid", "\(child.pid)\n")
        let deadline = SystemClock.monotonicNow() + 10_000_000_000
        while true {
            if let client = try? BenchClient(socket: socket), (try? client.request("PING")) == "OK" { return }
            if try child.waitExit() != nil { throw BenchError("timerd exited at start-up; see \(log)") }
            if SystemClock.monotonicNow() > deadline { throw BenchError("timerd did not answer PING within 10 s; see \(log)") }
            usleep(10_000)
        }
    }

    var pid: Int32 { child.pid }

    /// SIGTERM, then waits for it to exit (SIGKILL after 20 s).
    func stop() {
        _ = try? child.signal(.term)
        let deadline = SystemClock.monotonicNow() + 20_000_000_000
        while (try? child.waitExit()) == nil {
            if SystemClock.monotonicNow() > deadline {
                _ = try? child.signal(.kill)
                _ = try? child.waitExit(blocking: true)
                break
            }
            usleep(10_000)
        }
        try? child.pidfd.close()
        notify.stop()
        if let cgroup {
            // What timerd made in it (`supervisor`, `runs` and any run's) first, deepest first.
            for directory in cgroup.descendants() + [cgroup] { try? directory.remove() }
        }
    }

    /// A new cgroup for daemon `name` beside `timerd-bench`'s own, as root on a writable cgroup v2
    /// hierarchy; nil otherwise (timerd then tracks runs by process group, as it says in its log).
    private static func makeCgroup(_ name: String) -> CgroupDirectory? {
        guard getuid() == 0, let own = CgroupHierarchy.own().directory else { return nil }
        let directory = own.child("timerd-bench-\(name)-\(getpid())")
        for leftover in directory.descendants() + [directory] { try? leftover.remove() }
        return (try? directory.create()) != nil ? directory : nil
    }

    var probe: ProcessProbe { ProcessProbe(pid: pid) }
    func residentBytes() throws -> UInt64 { try probe.residentBytes() }
    /// Resets the peak of resident memory (`VmHWM`) to what is resident now (`clear_refs`, value 5).
    func resetPeakResident() throws { try "5".write(toFile: "/proc/\(probe.pid)/clear_refs", atomically: false, encoding: .utf8) }
    /// The peak of resident memory since start or the last `resetPeakResident` (`VmHWM`), in bytes.
    func peakResidentBytes() throws -> UInt64 {
        let status = String(decoding: try FileSystem.readFile("/proc/\(probe.pid)/status"), as: UTF8.self)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kb = UInt64(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ")[0]) else {
            throw BenchError("no VmHWM in /proc/\(probe.pid)/status")
        }
        return kb * 1024
    }
    func contextSwitches() throws -> [String: Int] { try probe.contextSwitches() }
}

/// A datagram socket standing in for systemd's notification socket: a thread of its own reads what the
/// daemon sends, counts it and keeps the last status line.
final class NotifyDrain: @unchecked Sendable {
    let path: String
    private let fd: Int32
    private let lock = NSLock()
    private var stopped = false
    private var messages = 0
    private var lastStatus: String?

    init(path: String) throws {
        self.path = path
        try? FileSystem.unlink(path)
        fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BenchError("notify socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw BenchError("notify socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            let error = errno
            close(fd)
            throw BenchError("bind notify socket \(path): errno \(error)")
        }
        Thread.detachNewThread { [self] in drain() }
    }

    /// Datagrams received so far, and the last `STATUS=` among them.
    var received: (messages: Int, lastStatus: String?) { lock.withLock { (messages, lastStatus) } }

    /// Ends the reading thread (within 0.2 s) and removes the socket.
    func stop() {
        lock.withLock { stopped = true }
        try? FileSystem.unlink(path)
    }

    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !lock.withLock({ stopped }) {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            guard count > 0 else { continue }
            let status = String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n").last { $0.hasPrefix("STATUS=") }
            lock.withLock {
                messages += 1
                if let status { lastStatus = String(status.dropFirst("STATUS=".count)) }
            }
        }
        close(fd)
    }
}

/// What /proc tells about a process.
struct ProcessProbe {
    let pid: Int32

    /// Resident memory in bytes.
    func residentBytes() throws -> UInt64 { try ProcessControl.residentSetBytes(of: String(pid)) }

    /// CPU time used so far in seconds (user + system, all threads, not counting children), from
    /// /proc/PID/stat.
    func cpuSeconds() throws -> Double {
        let text = String(decoding: try FileSystem.readFile("/proc/\(pid)/stat"), as: UTF8.self)
        // Fields after the command name (which may contain spaces) start at the state, field 3.
        guard let close = text.lastIndex(of: ")") else { throw BenchError("/proc/\(pid)/stat: \(text)") }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw BenchError("/proc/\(pid)/stat: \(text)")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Context switches (voluntary + involuntary) so far, by thread id: each switch in is one wake-up.
    func contextSwitches() throws -> [String: Int] {
        var byThread: [String: Int] = [:]
        for task in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
            guard let bytes = try? FileSystem.readFile("/proc/\(pid)/task/\(task)/status") else { continue }
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n")
            where line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                byThread[task, default: 0] += Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        return byThread
    }

    /// Wake-ups between two `contextSwitches()` readings: the growth of each thread alive at the end
    /// (all of a thread's switches if it was born in between). A thread that ended in between woke at
    /// least once to end, which counts too.
    static func wakeups(from before: [String: Int], to after: [String: Int]) -> Int {
        let grown = after.reduce(0) { $0 + $1.value - (before[$1.key] ?? 0) }
        return grown + before.keys.filter { after[$0] == nil }.count
    }
}

extension ChildProcess {
    /// SIGKILL, then reaps it and closes its pidfd: the end of a helper program this benchmark started.
    func killAndReap() {
        _ = try? signal(.kill)
        _ = try? waitExit(blocking: true)
        try? pidfd.close()
    }
}
