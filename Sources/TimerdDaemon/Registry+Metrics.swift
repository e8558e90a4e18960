import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem

/// A Prometheus-style cumulative histogram.
struct Histogram: Sendable {
    let bounds: [Double]
    private(set) var counts: [Int]
    private(set) var sum = 0.0
    private(set) var count = 0

    init(bounds: [Double]) {
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count)
    }

    mutating func record(seconds: Double) {
        for index in bounds.indices where seconds <= bounds[index] { counts[index] += 1 }
        sum += seconds
        count += 1
    }
}

/// One job's numbers for the metrics, read on the registry's queue.
struct JobMetrics: Sendable {
    var name: JobName
    var state: JobState
    var runsByResult: ResultCounts
    var lastSuccess: WallTime?
    var lastDuration: Duration?
    var usageTotals: UsageTotals
    var lastMemoryPeak: Int64?
}

/// The daemon's own numbers for the metrics, read in one step of the registry's queue.
struct DaemonMetrics: Sendable {
    var runsInFlight: Int
    var lateness: Histogram
    var storage: DaemonStats.Storage?
    var cluster: (node: String, etcdAvailable: Bool, members: Int, sharedJobs: Int, owned: Int, waiting: Int)?
}

extension Registry {
    /// The Prometheus text exposition of per-job run counters, last success time, last duration, jobs by
    /// state, runs in flight and the fire-lateness histogram (for node_exporter's textfile collector). As
    /// `LIST` is (`JobList`): each turn of the registry's queue reads a slice of jobs' numbers (timers
    /// fire between turns) and the registry's background thread, which keeps clear of fires, writes that
    /// slice's lines. In one step, 100,000 jobs held fires back 60–100 ms each time the file was written
    /// (docs/performance.md, "LIST (round 14)").
    nonisolated func metricsText() async -> String {
        let names = await JobList.sorted(listNames(tag: nil))
        let text = MetricsText()
        for start in stride(from: 0, to: names.count, by: Self.metricsSlice) {
            let jobs = await metrics(of: names[start..<min(start + Self.metricsSlice, names.count)])
            await background.run { text.add(jobs) }
        }
        let daemon = await daemonMetrics()
        return await background.run { [background] in text.finish(daemon, pause: background.standAside) }
    }

    /// Jobs read per turn of the registry's queue for the metrics: a few numbers each.
    static let metricsSlice = 500

    /// The jobs among `names` that still exist (one step of the queue).
    private func metrics(of names: ArraySlice<JobName>) -> [JobMetrics] {
        sliceStep(names) { _, job in
            let last = job.lastOutcome?.outcome
            return JobMetrics(
                name: job.spec.name, state: job.state, runsByResult: job.runsByResult, lastSuccess: job.lastSuccess,
                lastDuration: last?.duration, usageTotals: job.usageTotals, lastMemoryPeak: last?.usage.memoryPeakBytes)
        }
    }

    private func daemonMetrics() -> DaemonMetrics {
        var metrics = DaemonMetrics(runsInFlight: engine.runningTotal, lateness: latenessHistogram, storage: storageStats())
        if let cluster {
            let placement = placement()
            metrics.cluster = (
                cluster.node, engine.clusterRole == .member, engine.clusterMembers.count, sharedJobCount(),
                placement.owned[cluster.node] ?? 0, placement.waiting)
        }
        return metrics
    }
}

/// The metrics' text, written a slice of jobs at a time (`add`, jobs in name order), each family's lines
/// apart, then put together with the daemon's own (`finish`). Used by one thread at a time.
final class MetricsText: Sendable {
    private struct State {
        /// Per job family, its lines so far.
        var lines = Array(repeating: "", count: MetricsText.jobFamilies.count)
        var byState: [JobState: Int] = [:]
    }

    private let state = Locked(State())

    /// The per-job families, in the order they are written: name, type, help.
    static let jobFamilies: [(name: String, type: String, help: String)] = [
        ("timerd_job_runs_total", "counter", "Runs that ended, by job and result."),
        ("timerd_job_last_success_timestamp_seconds", "gauge", "When the job's last successful run ended (Unix time)."),
        ("timerd_job_last_duration_seconds", "gauge", "How long the job's last run took."),
        // What the runs used, for the jobs whose runs said (`RunUsage`).
        ("timerd_job_cpu_seconds_total", "counter", "CPU time the job's runs used (user and system)."),
        ("timerd_job_io_read_bytes_total", "counter", "Bytes the job's runs read from storage."),
        ("timerd_job_io_write_bytes_total", "counter", "Bytes the job's runs wrote to storage."),
        ("timerd_job_last_memory_peak_bytes", "gauge", "The most memory the job's last run had in use at once."),
    ]

    private static func number(_ value: Double) -> String { String(value) }

    func add(_ jobs: [JobMetrics]) {
        state.withLock { state in
            for job in jobs {
                let name = job.name
                for result in [RunOutcome.Result.ok, .failed, .timeout, .killed] {
                    state.lines[0] += "timerd_job_runs_total{job=\"\(name)\",result=\"\(result.rawValue)\"} \(job.runsByResult[result])\n"
                }
                if let success = job.lastSuccess {
                    state.lines[1] += "timerd_job_last_success_timestamp_seconds{job=\"\(name)\"} \(Self.number(Double(success.nanosecondsSinceEpoch) / 1e9))\n"
                }
                if let duration = job.lastDuration {
                    state.lines[2] += "timerd_job_last_duration_seconds{job=\"\(name)\"} \(Self.number(Double(duration.nanoseconds) / 1e9))\n"
                }
                let usage = job.usageTotals
                if usage != UsageTotals() {
                    state.lines[3] += "timerd_job_cpu_seconds_total{job=\"\(name)\"} \(Self.number(Double(usage.cpu.nanoseconds) / 1e9))\n"
                    state.lines[4] += "timerd_job_io_read_bytes_total{job=\"\(name)\"} \(usage.ioReadBytes)\n"
                    state.lines[5] += "timerd_job_io_write_bytes_total{job=\"\(name)\"} \(usage.ioWriteBytes)\n"
                }
                if let peak = job.lastMemoryPeak {
                    state.lines[6] += "timerd_job_last_memory_peak_bytes{job=\"\(name)\"} \(peak)\n"
                }
                state.byState[job.state, default: 0] += 1
            }
        }
    }

    /// The whole text, with `daemon`'s numbers; `pause` between families.
    func finish(_ daemon: DaemonMetrics, pause: () -> Void = {}) -> String {
        let (lines, byState) = state.withLock { state in
            defer { state = State() }
            return (state.lines, state.byState)
        }
        var text = ""
        func family(_ name: String, _ type: String, _ help: String) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        for (family, jobLines) in zip(Self.jobFamilies, lines) {
            pause()
            text += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.type)\n"
            text += jobLines
        }
        family("timerd_jobs", "gauge", "Jobs by state.")
        for state in [JobState.scheduled, .paused, .finished] {
            text += "timerd_jobs{state=\"\(state.rawValue)\"} \(byState[state] ?? 0)\n"
        }
        family("timerd_runs_in_flight", "gauge", "Runs going now.")
        text += "timerd_runs_in_flight \(daemon.runsInFlight)\n"
        let lateness = daemon.lateness
        family("timerd_fire_lateness_seconds", "histogram", "Scheduled time to timer handler, per scheduled fire.")
        for (index, bound) in lateness.bounds.enumerated() {
            text += "timerd_fire_lateness_seconds_bucket{le=\"\(Self.number(bound))\"} \(lateness.counts[index])\n"
        }
        text += "timerd_fire_lateness_seconds_bucket{le=\"+Inf\"} \(lateness.count)\n"
        text += "timerd_fire_lateness_seconds_sum \(Self.number(lateness.sum))\n"
        text += "timerd_fire_lateness_seconds_count \(lateness.count)\n"
        if let storage = daemon.storage {
            family("timerd_state_healthy", "gauge", "1 while the state directory can be written.")
            text += "timerd_state_healthy \(storage.state == "ok" ? 1 : 0)\n"
            family("timerd_state_write_errors_total", "counter", "State store transactions that failed.")
            text += "timerd_state_write_errors_total \(storage.write_errors)\n"
            family("timerd_state_held_changes", "gauge", "Fire bookkeeping and history held until the state can be written.")
            text += "timerd_state_held_changes \(storage.held)\n"
            family("timerd_state_lost_changes_total", "counter", "Fire bookkeeping and history given up while the state could not be written.")
            text += "timerd_state_lost_changes_total \(storage.lost)\n"
        }
        if let cluster = daemon.cluster {
            // Cluster mode (docs/cluster.md): alert when etcd is out of reach, or a job no node can take.
            let node = "node=\"\(cluster.node)\""
            family("timerd_cluster_etcd_available", "gauge", "1 while this node reaches etcd (with a quorum) and is a live member.")
            text += "timerd_cluster_etcd_available{\(node)} \(cluster.etcdAvailable ? 1 : 0)\n"
            family("timerd_cluster_members", "gauge", "Live members of the cluster, as this node sees it.")
            text += "timerd_cluster_members{\(node)} \(cluster.members)\n"
            family("timerd_cluster_shared_jobs", "gauge", "Shared jobs this node knows of.")
            text += "timerd_cluster_shared_jobs{\(node)} \(cluster.sharedJobs)\n"
            family("timerd_cluster_owned_jobs", "gauge", "Shared jobs this node runs (their owner is this node).")
            text += "timerd_cluster_owned_jobs{\(node)} \(cluster.owned)\n"
            family("timerd_cluster_waiting_jobs", "gauge", "Shared jobs no live member can take (run_on tags no member has, or no member in reach).")
            text += "timerd_cluster_waiting_jobs{\(node)} \(cluster.waiting)\n"
        }
        return text
    }
}
