import Dispatch
import Synchronization
import TimerdCore
import TimerdSystem

/// Severity of a log line, with its syslog number (used as journald's `<N>` prefix).
package enum LogLevel: Int, Sendable {
    case error = 3, warning = 4, notice = 5, info = 6, debug = 7

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

/// Where log lines go. The daemon uses `StderrLogSink`; tests use `MemoryLogSink`.
package protocol LogSink: Sendable {
    func write(_ level: LogLevel, _ line: String)
}

/// The daemon's logger: one line per event, with the job name as `job=NAME` when there is one.
///
/// Cheap to copy; safe from any queue. Core and config code never log: only the daemon does.
package struct Logger: Sendable {
    let sink: any LogSink
    var minimum: LogLevel

    package init(sink: any LogSink, minimum: LogLevel = .info) {
        self.sink = sink
        self.minimum = minimum
    }

    package func log(_ level: LogLevel, job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) {
        guard level.rawValue <= minimum.rawValue else { return }  // lower number = more severe
        var prefix = ""
        if let job { prefix += "job=\(job) " }
        if let run { prefix += "run=\(run) " }
        sink.write(level, prefix + message())
    }

    package func error(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.error, job: job, run: run, message()) }
    package func warning(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.warning, job: job, run: run, message()) }
    package func notice(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.notice, job: job, run: run, message()) }
    package func info(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.info, job: job, run: run, message()) }
    package func debug(job: String? = nil, run: Int? = nil, _ message: @autoclosure () -> String) { log(.debug, job: job, run: run, message()) }
}

/// Writes lines to stderr from its own queue, so a slow reader of stderr never blocks the registry.
///
/// Under systemd (`JOURNAL_STREAM` set) lines carry journald's `<N>` priority prefix and no timestamp;
/// otherwise `2026-11-29T16:00:00.123456Z INFO message`. If the reader stalls and more than
/// `maxBacklog` lines wait, new lines are dropped and the drop count is reported once writing resumes.
package final class StderrLogSink: LogSink {
    private let queue = DispatchQueue(label: "timerd.log")
    private let journal: Bool
    private let backlog = Mutex<(pending: Int, dropped: Int)>((0, 0))
    private let maxBacklog = 10_000

    package init(journal: Bool) {
        self.journal = journal
    }

    package func write(_ level: LogLevel, _ line: String) {
        let accepted = backlog.withLock { state -> Bool in
            guard state.pending < maxBacklog else {
                state.dropped += 1
                return false
            }
            state.pending += 1
            return true
        }
        guard accepted else { return }
        let text: String
        if journal {
            text = "<\(level.rawValue)>\(line)\n"
        } else {
            text = "\(RFC3339.format(SystemClock.wallNow())) \(level.label) \(line)\n"
        }
        queue.async { [self] in
            CurrentProcess.writeToStderr(text)
            let dropped = backlog.withLock { state -> Int in
                state.pending -= 1
                defer { state.dropped = 0 }
                return state.dropped
            }
            if dropped > 0 {
                CurrentProcess.writeToStderr(journal ? "<4>log: dropped \(dropped) lines (stderr was not being read)\n"
                    : "\(RFC3339.format(SystemClock.wallNow())) WARN log: dropped \(dropped) lines (stderr was not being read)\n")
            }
        }
    }

    /// Waits until every accepted line is written (used just before exit).
    package func flush() {
        queue.sync {}
    }
}

/// Keeps lines in memory, for tests.
package final class MemoryLogSink: LogSink {
    private let lines = Mutex<[String]>([])

    package init() {}

    package func write(_ level: LogLevel, _ line: String) {
        lines.withLock { $0.append("\(level.label) \(line)") }
    }

    package var all: [String] { lines.withLock { $0 } }
}
