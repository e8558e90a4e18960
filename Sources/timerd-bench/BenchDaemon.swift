import Foundation
import TimerdSystem

/// A timerd started for one scenario, on its own socket, config and log file under the work directory.
final class BenchDaemon {
    let child: ChildProcess
    let socket: String
    let log: String

    /// Starts `timerd` with `config` (the text of `[daemon]` settings and jobs) and no state (an earlier
    /// run's is removed) and waits until it answers `PING`.
    init(timerd: String, workDirectory: String, name: String, config: String) throws {
        let configPath = "\(workDirectory)/\(name).conf"
        socket = "\(workDirectory)/\(name).sock"
        log = "\(workDirectory)/\(name).log"
        try? FileSystem.unlink(socket)
        try? FileManager.default.removeItem(atPath: configPath + ".state")
        try FileSystem.writeAtomically(configPath, config)
        let output = try FileDescriptor.open(log, .writeOnly, options: [.create, .truncate])
        defer { try? output.close() }
        child = try Spawn.run(
            program: timerd, arguments: ["--config", configPath, "--socket", socket, "--state-dir", configPath + ".state"],
            environment: ["PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workDirectory], output: output)
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
