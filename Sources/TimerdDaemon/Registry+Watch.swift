import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem

/// What a `WATCH` connection wants to see.
enum WatchFilter: Sendable {
    case all
    case job(JobName)
    case tag(String)

    var label: String {
        switch self {
        case .all: return "all"
        case .job(let name): return "job:\(name)"
        case .tag(let tag): return "tag:\(tag)"
        }
    }
}

/// A `WATCH` subscriber: `deliver` hands a line to its connection without blocking the registry.
struct Watcher: Sendable {
    var filter: WatchFilter
    /// Who watches: another user's jobs are reported without their reasons.
    var viewer: Client
    var deliver: @Sendable (String) -> Void
}

extension Registry {
    func addWatcher(_ connection: Int, filter: WatchFilter, viewer: Client = .daemon, deliver: @escaping @Sendable (String) -> Void) {
        watchers[connection] = Watcher(filter: filter, viewer: viewer, deliver: deliver)
    }

    func removeWatcher(_ connection: Int) {
        watchers[connection] = nil
    }

    /// Sends an event to every watcher whose filter matches `job` (encoded once, only if anyone watches).
    /// `gone`: the tags and owner of a job no longer in the table (a cancelled one).
    func emit(_ event: String, job name: JobName, run: Int? = nil, scheduledAt: WallTime? = nil,
              result: String? = nil, exitCode: Int? = nil, httpStatus: Int? = nil, reason: String? = nil,
              latenessNs: Int64? = nil, usage: RunUsage? = nil, gone: (tags: [String], ownerUID: UInt32)? = nil) {
        guard !watchers.isEmpty else { return }
        let job = engine.job(name)
        let tags = gone?.tags ?? job?.spec.tags ?? []
        let ownerUID = gone?.ownerUID ?? job?.ownerUID
        let interested = watchers.values.filter { watcher in
            switch watcher.filter {
            case .all: return true
            case .job(let wanted): return wanted == name
            case .tag(let tag): return tags.contains(tag)
            }
        }
        guard !interested.isEmpty else { return }
        var event = WatchEvent(
            at: RFC3339.format(clock.wallNow), event: event, job: name.rawValue, run: run,
            scheduled_at: scheduledAt.map(RFC3339.format), result: result, exit_code: exitCode, http_status: httpStatus, reason: reason,
            lateness_ms: latenessNs.map { Double($0) / 1_000_000 }, cpu_usage_ms: usage?.cpuMilliseconds,
            memory_peak_bytes: usage?.memoryPeakBytes.map(Int.init), io_read_bytes: usage?.ioReadBytes.map(Int.init),
            io_write_bytes: usage?.ioWriteBytes.map(Int.init))
        let line = event.json
        event.reason = nil
        var redacted: String?
        for watcher in interested {
            if let ownerUID, reason != nil, !watcher.viewer.owns(ownerUID) {
                if redacted == nil { redacted = event.json }
                watcher.deliver(redacted!)
            } else {
                watcher.deliver(line)
            }
        }
    }
}

extension Registry {
    /// Sends an event about the daemon itself (no job) to watchers of everything, e.g. `clock`.
    func emitDaemonEvent(_ event: String, reason: String) {
        let interested = watchers.values.filter { if case .all = $0.filter { return true } else { return false } }
        guard !interested.isEmpty else { return }
        let line = WatchEvent(at: RFC3339.format(clock.wallNow), event: event, reason: reason).json
        for watcher in interested { watcher.deliver(line) }
    }
}
