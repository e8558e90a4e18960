import CTimerdSystemd
import Dispatch
import TimerdCore
import TimerdEngine
import TimerdSystem

/// A log line's severity (the engine's `LogLevel`), with its syslog number (journald's `PRIORITY=` and
/// `<N>` prefix).
extension LogLevel {
    var label: String {
        switch self {
        case .error: return "ERROR"
        case .warning: return "WARN"
        case .notice: return "NOTICE"
        case .info: return "INFO"
        case .debug: return "DEBUG"
        }
    }
}

/// One event: a message plus the structured fields journald indexes.
package struct LogEntry: Sendable {
    package var level: LogLevel
    package var message: String
    package var job: String?
    package var run: Int?
    /// How a run ended: its exit status, or `signal:N` (journald field `TIMERD_EXIT_STATUS`).
    package var exitStatus: String?

    /// `job=NAME run=N message`, the one-line form for stderr and tests.
    package var line: String {
        var prefix = ""
        if let job { prefix += "job=\(job) " }
        if let run { prefix += "run=\(run) " }
        return prefix + message
    }
}

/// Where log entries go. The daemon uses `QueuedLogSink` (stderr or the journal); tests use `MemoryLogSink`.
package protocol LogSink: Sendable {
    func write(_ entry: LogEntry)
}

/// The daemon's logger: one entry per event, with the job name when there is one.
///
/// Cheap to copy; safe from any queue. Core and config code never log: only the daemon does.
package struct Logger: Sendable {
    let sink: any LogSink
    var minimum: LogLevel

    package init(sink: any LogSink, minimum: LogLevel = .info) {
        self.sink = sink
        self.minimum = minimum
    }

    package func log(
        _ level: LogLevel, job: String? = nil, run: Int? = nil, exitStatus: String? = nil,
        _ message: @autoclosure () -> String
    ) {
        guard level.rawValue <= minimum.rawValue else { return }  // lower number = more severe
        sink.write(LogEntry(level: level, message: message(), job: job, run: run, exitStatus: exitStatus))
    }

    package func error(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.error, job: job, run: run, message()) }
    package func warning(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.warning, job: job, run: run, message()) }
    package func notice(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.notice, job: job, run: run, message()) }
    package func info(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.info, job: job, run: run, message()) }
    package func debug(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.debug, job: job, run: run, message()) }
}

/// Where the daemon's log goes.
package enum LogTarget: String, Sendable {
    /// Plain lines on stderr: `2026-11-29T16:00:00.123456Z INFO job=x message`.
    case stderr
    /// `sd_journal_send` with structured fields (`TIMERD_JOB=`, `TIMERD_RUN=`, `TIMERD_EXIT_STATUS=`).
    case journal

    /// The journal when stderr is connected to it (systemd sets `JOURNAL_STREAM` to stderr's
    /// `device:inode`), stderr otherwise.
    package static func automatic() -> LogTarget {
        guard let stream = CurrentProcess.environmentVariable("JOURNAL_STREAM"),
              let identity = try? FileDescriptor.standardError.deviceAndInode() else { return .stderr }
        return stream == "\(identity.device):\(identity.inode)" ? .journal : .stderr
    }
}

/// Writes entries from its own queue, so a slow reader of stderr or a busy journald never blocks the
/// registry. Entries wait in a list; one turn of the queue writes all that are there (on stderr in one
/// `write`), so a burst of thousands of lines costs a few system calls, not one each. A line logged after
/// a quiet spell is written at once; lines logged within `Gathering.window` (20 ms) of the last write
/// wait for the next one. If more than `maxBacklog` entries wait, new ones are dropped and the drop count
/// is reported once writing resumes.
package final class QueuedLogSink: LogSink {
    private let queue = DispatchQueue(label: "timerd.log")
    private let target: LogTarget
    private let backlog = Locked<(entries: [(LogEntry, WallTime)], dropped: Int, gathering: Gathering)>(([], 0, Gathering()))
    private let maxBacklog = 10_000
    private let clock: any Clock

    package init(target: LogTarget, clock: any Clock) {
        self.target = target
        self.clock = clock
    }

    package func write(_ entry: LogEntry) {
        let stamp = clock.wallNow
        let time = backlog.withLock { state -> DispatchTime? in
            guard state.entries.count < maxBacklog else {
                state.dropped += 1
                return nil
            }
            state.entries.append((entry, stamp))
            return state.gathering.arrived()
        }
        if let time { Gathering.schedule(at: time, on: queue) { [self] in drain() } }
    }

    /// Writes every waiting entry, then the drop count if entries were dropped meanwhile.
    private func drain() {
        let (entries, dropped) = backlog.withLock { state in
            defer {
                state.entries = []
                state.dropped = 0
                state.gathering.taking()
            }
            return (state.entries, state.dropped)
        }
        switch target {
        case .stderr:
            var text = ""
            for (entry, stamp) in entries { text += Self.line(entry, at: stamp) }
            if !text.isEmpty { CurrentProcess.writeToStderr(text) }
        case .journal:
            for (entry, stamp) in entries { emit(entry, at: stamp) }
        }
        if dropped > 0 {
            emit(LogEntry(level: .warning, message: "log: dropped \(dropped) entries (the log was not being read)"), at: clock.wallNow)
        }
    }

    private static func line(_ entry: LogEntry, at stamp: WallTime) -> String {
        "\(RFC3339.format(stamp)) \(entry.level.label) \(entry.line)\n"
    }

    /// Waits until every accepted entry is written (used just before exit).
    package func flush() {
        queue.sync { drain() }
    }

    private func emit(_ entry: LogEntry, at stamp: WallTime) {
        switch target {
        case .stderr:
            CurrentProcess.writeToStderr(Self.line(entry, at: stamp))
        case .journal:
            var fields = [
                "MESSAGE=\(entry.line)", "PRIORITY=\(entry.level.rawValue)", "SYSLOG_IDENTIFIER=timerd",
            ]
            if let job = entry.job { fields.append("TIMERD_JOB=\(job)") }
            if let run = entry.run { fields.append("TIMERD_RUN=\(run)") }
            if let status = entry.exitStatus { fields.append("TIMERD_EXIT_STATUS=\(status)") }
            Journal.send(fields)
        }
    }
}

/// `sd_journal_sendv` from Swift (the variadic `sd_journal_send` cannot be called).
enum Journal {
    static func send(_ fields: [String]) {
        // One buffer holding every field, so every iovec points into memory valid for the whole call.
        var storage: [UInt8] = []
        var ranges: [Range<Int>] = []
        for field in fields {
            let start = storage.count
            storage.append(contentsOf: field.utf8)
            ranges.append(start..<storage.count)
        }
        storage.withUnsafeMutableBytes { raw in
            let vectors = ranges.map { range in
                iovec(iov_base: raw.baseAddress.map { $0 + range.lowerBound }, iov_len: range.count)
            }
            _ = vectors.withUnsafeBufferPointer { tsd_journal_sendv($0.baseAddress, Int32($0.count)) }
        }
    }
}

/// Keeps entries in memory, for tests.
package final class MemoryLogSink: LogSink {
    private let entries = Locked<[LogEntry]>([])

    package init() {}

    package func write(_ entry: LogEntry) {
        entries.withLock { $0.append(entry) }
    }

    /// Every entry as `LEVEL job=… run=… message`.
    package var all: [String] { entries.withLock { $0.map { "\($0.level.label) \($0.line)" } } }
}
