import CTimerdSys
import Glibc

/// How a child process ended.
public enum TerminationStatus: Sendable, Hashable, CustomStringConvertible {
    /// It called exit with this code (0...255).
    case exited(Int32)
    /// A signal killed it.
    case signaled(Signal)

    /// True for `.exited(0)`.
    public var isSuccess: Bool { self == .exited(0) }

    /// "exited with code 3" or "killed by SIGTERM".
    public var description: String {
        switch self {
        case .exited(let code): "exited with code \(code)"
        case .signaled(let signal): "killed by \(signal)"
        }
    }
}

/// What a reaped process and the children it reaped used (`wait4`'s rusage).
public struct ResourceUsage: Sendable, Equatable {
    /// CPU time, user and system.
    public var cpu: Duration
    /// The largest resident set of any one of them (not their sum).
    public var maxResidentBytes: Int64
    /// Read from and written to storage (the kernel's 512-byte block counts; not what page cache served).
    public var blocksReadBytes: Int64
    public var blocksWrittenBytes: Int64

    public init(cpu: Duration, maxResidentBytes: Int64, blocksReadBytes: Int64, blocksWrittenBytes: Int64) {
        self.cpu = cpu
        self.maxResidentBytes = maxResidentBytes
        self.blocksReadBytes = blocksReadBytes
        self.blocksWrittenBytes = blocksWrittenBytes
    }
}

/// Waiting for and signalling processes by pid.
public enum ProcessControl {
    /// Reaps child `pid` if it has ended: its status, or nil if it is still running. With
    /// `blocking`, waits for it to end (never nil). Call it without blocking once the child's
    /// pidfd is readable. Throws ECHILD if `pid` is not an unreaped child of this process.
    ///
    /// The corresponding C function is `waitpid`.
    public static func waitExit(pid: Int32, blocking: Bool = false) throws(Errno) -> TerminationStatus? {
        try waitExitWithUsage(pid: pid, blocking: blocking)?.status
    }

    /// `waitExit`, with what the child and the children it reaped used.
    ///
    /// The corresponding C function is `wait4`.
    public static func waitExitWithUsage(
        pid: Int32, blocking: Bool = false
    ) throws(Errno) -> (status: TerminationStatus, usage: ResourceUsage)? {
        var kind: Int32 = 0
        var value: Int32 = 0
        var used = tsys_usage()
        let reaped = try retryOnInterrupt { tsys_wait(pid, blocking ? 1 : 0, &kind, &value, &used) }
        if reaped == 0 {
            return nil
        }
        let usage = ResourceUsage(
            cpu: .microseconds(used.cpu_usec), maxResidentBytes: used.max_rss_kib * 1024,
            blocksReadBytes: used.in_blocks * 512, blocksWrittenBytes: used.out_blocks * 512)
        return (kind == TSYS_WAIT_EXITED ? .exited(value) : .signaled(Signal(rawValue: value)), usage)
    }

    /// Sends `signal` to every process in process group `processGroup` (a spawned child's pid,
    /// since it leads its own group). Returns false if no such group exists any more (ESRCH).
    /// The group id can be reused only once every member is gone and the leader was reaped.
    ///
    /// The corresponding C function is `kill` (with a negative pid).
    public static func signalProcessGroup(_ processGroup: Int32, _ signal: Signal) throws(Errno) -> Bool {
        precondition(processGroup > 1, "refusing to signal process group \(processGroup)")
        return try sendSignal(Glibc.kill(-processGroup, signal.rawValue))
    }

    /// Sends `signal` to process `pid`. Returns false if it no longer exists (ESRCH).
    /// Prefer `ChildProcess.signal`, which cannot hit a recycled pid.
    ///
    /// The corresponding C function is `kill`.
    public static func signalProcess(_ pid: Int32, _ signal: Signal) throws(Errno) -> Bool {
        precondition(pid > 0, "refusing to signal pid \(pid)")
        return try sendSignal(Glibc.kill(pid, signal.rawValue))
    }

    /// Resident set size in bytes of process `pid` (`"self"` for this one), from /proc/PID/statm.
    public static func residentSetBytes(of pid: String) throws(Errno) -> UInt64 {
        let text = String(decoding: try FileSystem.readFile("/proc/\(pid)/statm"), as: UTF8.self)
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = UInt64(fields[1]) else {
            throw .invalidArgument
        }
        return pages * UInt64(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Opens a close-on-exec pidfd for any process (not only a child): it becomes readable
    /// when the process ends. Throws ESRCH if there is no such process.
    ///
    /// The corresponding C function is `pidfd_open`.
    public static func openPidfd(_ pid: Int32) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try checkResult(tsys_pidfd_open(pid)))
    }

    static func sendSignal(_ result: Int32) throws(Errno) -> Bool {
        if result == 0 {
            return true
        }
        let error = Errno.current
        if error == .noSuchProcess {
            return false
        }
        throw error
    }
}

/// Facts about, and actions on, the current process.
public enum CurrentProcess {
    /// Runs `body` on a new, detached thread, which starts with the caller's signal mask.
    ///
    /// The corresponding C function is `pthread_create`.
    public static func detachThread(_ body: @escaping @Sendable () -> Void) throws(Errno) {
        final class Box: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let box = Unmanaged.passRetained(Box(body))
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, box.toOpaque())
        guard result == 0 else {
            box.release()
            throw Errno(rawValue: result)
        }
        pthread_detach(thread)
    }

    /// The process id.
    ///
    /// The corresponding C function is `getpid`.
    public static var id: Int32 { getpid() }

    /// Asks for a scheduling slice of `nanoseconds` for the calling thread and every thread it starts
    /// afterwards: on Linux 6.12 and later (EEVDF) a thread with a shorter slice than the one running
    /// preempts it when it wakes, instead of waiting up to the running one's slice (1.4 ms by default
    /// on 2 CPUs); earlier kernels accept and ignore it. Commands started with `Spawn` afterwards get the
    /// scheduling this thread had before. Call it once, before any other thread exists. Throws
    /// `ENOTSUP` under a realtime or deadline policy, which it leaves alone.
    ///
    /// The corresponding C function is `sched_setattr` (`sched_runtime`).
    public static func requestSchedulingSlice(nanoseconds: UInt64) throws(Errno) {
        _ = try checkResult(tsys_sched_request_slice(nanoseconds))
    }

    /// The scheduling slice of thread `thread` (0: the calling one), in nanoseconds, as Linux 6.12 and
    /// later report it (the one asked for, else the kernel's default; earlier kernels say 0), nil if it
    /// cannot be read.
    ///
    /// The corresponding C function is `sched_getattr` (`sched_runtime`).
    public static func schedulingSlice(thread: Int32 = 0) -> UInt64? {
        let slice = tsys_sched_slice(thread)
        return slice == UInt64.max ? nil : slice
    }

    /// The real user id.
    ///
    /// The corresponding C function is `getuid`.
    public static var userID: UInt32 { getuid() }

    /// The real group id.
    ///
    /// The corresponding C function is `getgid`.
    public static var groupID: UInt32 { getgid() }

    /// The value of environment variable `name`, or nil if unset.
    ///
    /// The corresponding C function is `getenv`.
    public static func environmentVariable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// The whole environment. Entries without "=" are skipped; a repeated name keeps its first
    /// value, as `getenv` does.
    ///
    /// The corresponding C variable is `environ`.
    public static func environment() -> [String: String] {
        var result: [String: String] = [:]
        guard var entry = tsys_environ() else {
            return result
        }
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.utf8.firstIndex(of: UInt8(ascii: "=")) {
                let name = String(text[..<equals])
                if result[name] == nil {
                    result[name] = String(text[text.utf8.index(after: equals)...])
                }
            }
            entry += 1
        }
        return result
    }

    /// The host name.
    ///
    /// The corresponding C function is `gethostname`.
    public static func hostname() throws(Errno) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        _ = try checkResult(gethostname(&buffer, buffer.count - 1))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The CPUs online now (at least 1).
    ///
    /// The corresponding C function is `sysconf` (`_SC_NPROCESSORS_ONLN`).
    public static func onlineProcessors() -> Int {
        max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }

    /// Resident set size in bytes, from /proc/self/statm.
    public static func residentSetBytes() throws(Errno) -> UInt64 {
        try ProcessControl.residentSetBytes(of: "self")
    }

    /// The soft and hard limits on open descriptors.
    ///
    /// The corresponding C function is `getrlimit` (`RLIMIT_NOFILE`).
    public static func openFileLimits() throws(Errno) -> (soft: UInt64, hard: UInt64) {
        var limit = rlimit()
        _ = try checkResult(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit))
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// The soft and hard limits of `resource` (an `RLIMIT_*` number), `UInt64.max` for none; nil when the
    /// kernel does not know the resource.
    ///
    /// The corresponding C function is `getrlimit`.
    public static func resourceLimits(_ resource: Int32) -> (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(UInt32(bitPattern: resource)), &limit) == 0 else { return nil }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// This process's OOM score adjustment (/proc/self/oom_score_adj), which the processes it starts inherit.
    public static func oomScoreAdjustment() -> Int? {
        guard let bytes = try? FileSystem.readFile("/proc/self/oom_score_adj") else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace })
    }

    /// Raises the soft limit on open descriptors to the hard limit: a server with thousands of clients
    /// needs more than the 1,024 that systemd gives a service by default (its hard limit there is
    /// 524,288). An unlimited hard limit counts as 1,048,576 (the kernel's default `fs.nr_open`, which
    /// caps this limit). Returns the soft limit before and after (equal when there was nothing to raise).
    ///
    /// The corresponding C functions are `getrlimit` and `setrlimit` (`RLIMIT_NOFILE`).
    @discardableResult
    public static func raiseOpenFileLimit() throws(Errno) -> (from: UInt64, to: UInt64) {
        var limit = rlimit()
        _ = try checkResult(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit))
        let old = limit.rlim_cur
        let target = limit.rlim_max == rlim_t.max ? rlim_t(1 << 20) : limit.rlim_max
        guard old < target else { return (UInt64(old), UInt64(old)) }
        limit.rlim_cur = target
        _ = try checkResult(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit))
        return (UInt64(old), UInt64(target))
    }

    /// Writes `text` to standard error in one `write` (looping only over a short write), so
    /// lines from several threads do not interleave. Errors are ignored: there is nowhere to
    /// report them.
    ///
    /// The corresponding C function is `write`.
    public static func writeToStderr(_ text: String) {
        try? FileDescriptor.standardError.writeAll(text)
    }

    /// Ends the process with `code` after running exit handlers and flushing stdio.
    ///
    /// The corresponding C function is `exit`.
    public static func exit(_ code: Int32) -> Never {
        Glibc.exit(code)
    }
}

/// The system clocks.
public enum SystemClock {
    /// The local time of day of `secondsSinceEpoch` in the system's time zone, as `HH:MM:SS`.
    ///
    /// The corresponding C function is `localtime_r`.
    public static func localTimeOfDay(_ secondsSinceEpoch: Int64) -> String {
        var seconds = time_t(secondsSinceEpoch)
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "??:??:??" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }

    /// Wall-clock time since the Unix epoch (for calendar schedules and display).
    ///
    /// The corresponding C function is `clock_gettime` (`CLOCK_REALTIME`).
    public static func wallClockNow() -> (seconds: Int64, nanoseconds: Int32) {
        let now = read(CLOCK_REALTIME)
        return (Int64(now.tv_sec), Int32(now.tv_nsec))
    }

    /// Nanoseconds on a clock that never jumps (for intervals and timeouts); it does not
    /// advance while the system is suspended.
    ///
    /// The corresponding C function is `clock_gettime` (`CLOCK_MONOTONIC`).
    public static func monotonicNow() -> UInt64 {
        let now = read(CLOCK_MONOTONIC)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    private static func read(_ clock: clockid_t) -> timespec {
        var now = timespec()
        // Cannot fail for these clocks with a valid pointer.
        let result = clock_gettime(clock, &now)
        precondition(result == 0, "clock_gettime failed")
        return now
    }
}
