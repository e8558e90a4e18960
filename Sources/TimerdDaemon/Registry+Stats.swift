import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem

extension Registry {
    /// The `STATS` counters. `requests` is counted by the control handler, outside the registry.
    func stats(requests: Int, version: String) -> DaemonStats {
        var jobCounts = DaemonStats.JobCounts()
        var pending = 0
        for job in engine.liveJobs {
            switch job.state {
            case .scheduled where engine.isWaiting(job): jobCounts.waiting += 1
            case .scheduled: jobCounts.scheduled += 1
            case .paused: jobCounts.paused += 1
            case .finished: jobCounts.finished += 1
            }
            pending += job.pending
        }
        let runsByResult = engine.runsByResult
        var runCounts = DaemonStats.RunCounts()
        runCounts.ok = runsByResult[.ok]
        runCounts.failed = runsByResult[.failed]
        runCounts.timeout = runsByResult[.timeout]
        runCounts.killed = runsByResult[.killed]
        let now = clock.monotonicNow
        return DaemonStats(
            jobs: jobCounts, runs: runCounts, running: engine.runningTotal, pending: pending, skipped: engine.skippedTotal,
            lateness_ms: Self.percentiles(lateness.summary(now: now)),
            exec_ms: Self.percentiles(execLatency.summary(now: now)),
            requests: requests, rss_bytes: (try? CurrentProcess.residentSetBytes()) ?? 0,
            uptime_seconds: Double((now - startedMono).nanoseconds) / 1e9, mode: engine.currentMode, version: version,
            storage: storageStats(), run_tracking: runTracking, watchers: watchers.count)
    }

    /// The store's health and counters for `STATS` (nil without a store).
    nonisolated func storageStats() -> DaemonStats.Storage? {
        guard let store else { return nil }
        let counters = store.counters
        switch store.health {
        case .ok:
            return DaemonStats.Storage(state: "ok", write_errors: counters.writeErrors, held: counters.backlog, lost: counters.lost)
        case .failing(let since, let reason):
            return DaemonStats.Storage(
                state: "failing", since: RFC3339.format(since), reason: reason, write_errors: counters.writeErrors,
                held: counters.backlog, lost: counters.lost)
        }
    }

    private static func percentiles(_ summary: SlidingWindow.Summary) -> DaemonStats.Percentiles {
        func ms(_ ns: Int64?) -> Double? { ns.map { Double($0) / 1_000_000 } }
        return DaemonStats.Percentiles(
            window_seconds: Double(statsWindow.nanoseconds) / 1e9, samples: summary.count, p50: ms(summary.p50),
            p90: ms(summary.p90), p99: ms(summary.p99), max: ms(summary.max))
    }
}
