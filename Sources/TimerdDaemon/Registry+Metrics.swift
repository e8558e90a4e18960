import TimerdCore
import TimerdEngine
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

extension Registry {
    /// The Prometheus text exposition of per-job run counters, last success time, last duration, jobs by
    /// state, runs in flight and the fire-lateness histogram (for node_exporter's textfile collector).
    func metricsText() -> String {
        var text = ""
        func family(_ name: String, _ type: String, _ help: String) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func number(_ value: Double) -> String { String(value) }
        let names = engine.liveJobs.map(\.name).sorted()

        family("timerd_job_runs_total", "counter", "Runs that ended, by job and result.")
        for name in names {
            let job = engine.job(name)!
            for result in [RunOutcome.Result.ok, .failed, .timeout, .killed] {
                text += "timerd_job_runs_total{job=\"\(name)\",result=\"\(result.rawValue)\"} \(job.runsByResult[result])\n"
            }
        }
        family("timerd_job_last_success_timestamp_seconds", "gauge", "When the job's last successful run ended (Unix time).")
        for name in names {
            guard let success = engine.job(name)!.lastSuccess else { continue }
            text += "timerd_job_last_success_timestamp_seconds{job=\"\(name)\"} \(number(Double(success.nanosecondsSinceEpoch) / 1e9))\n"
        }
        family("timerd_job_last_duration_seconds", "gauge", "How long the job's last run took.")
        for name in names {
            guard let (_, outcome) = engine.job(name)!.lastOutcome else { continue }
            text += "timerd_job_last_duration_seconds{job=\"\(name)\"} \(number(Double(outcome.duration.nanoseconds) / 1e9))\n"
        }
        // What the runs used, for the jobs whose runs said (`RunUsage`).
        let usage: [(name: String, help: String, value: (UsageTotals) -> String)] = [
            ("timerd_job_cpu_seconds_total", "CPU time the job's runs used (user and system).",
             { number(Double($0.cpu.nanoseconds) / 1e9) }),
            ("timerd_job_io_read_bytes_total", "Bytes the job's runs read from storage.", { String($0.ioReadBytes) }),
            ("timerd_job_io_write_bytes_total", "Bytes the job's runs wrote to storage.", { String($0.ioWriteBytes) }),
        ]
        for metric in usage {
            family(metric.name, "counter", metric.help)
            for name in names {
                let totals = engine.job(name)!.usageTotals
                guard totals != UsageTotals() else { continue }
                text += "\(metric.name){job=\"\(name)\"} \(metric.value(totals))\n"
            }
        }
        family("timerd_job_last_memory_peak_bytes", "gauge", "The most memory the job's last run had in use at once.")
        for name in names {
            guard let peak = engine.job(name)!.lastOutcome?.outcome.usage.memoryPeakBytes else { continue }
            text += "timerd_job_last_memory_peak_bytes{job=\"\(name)\"} \(peak)\n"
        }
        family("timerd_jobs", "gauge", "Jobs by state.")
        for state in [JobState.scheduled, .paused, .finished] {
            text += "timerd_jobs{state=\"\(state.rawValue)\"} \(engine.liveJobs.filter { $0.state == state }.count)\n"
        }
        family("timerd_runs_in_flight", "gauge", "Runs going now.")
        text += "timerd_runs_in_flight \(engine.runningTotal)\n"
        family("timerd_fire_lateness_seconds", "histogram", "Scheduled time to timer handler, per scheduled fire.")
        for (index, bound) in latenessHistogram.bounds.enumerated() {
            text += "timerd_fire_lateness_seconds_bucket{le=\"\(number(bound))\"} \(latenessHistogram.counts[index])\n"
        }
        text += "timerd_fire_lateness_seconds_bucket{le=\"+Inf\"} \(latenessHistogram.count)\n"
        text += "timerd_fire_lateness_seconds_sum \(number(latenessHistogram.sum))\n"
        text += "timerd_fire_lateness_seconds_count \(latenessHistogram.count)\n"
        if let storage = storageStats() {
            family("timerd_state_healthy", "gauge", "1 while the state directory can be written.")
            text += "timerd_state_healthy \(storage.state == "ok" ? 1 : 0)\n"
            family("timerd_state_write_errors_total", "counter", "State store transactions that failed.")
            text += "timerd_state_write_errors_total \(storage.write_errors)\n"
            family("timerd_state_held_changes", "gauge", "Fire bookkeeping and history held until the state can be written.")
            text += "timerd_state_held_changes \(storage.held)\n"
            family("timerd_state_lost_changes_total", "counter", "Fire bookkeeping and history given up while the state could not be written.")
            text += "timerd_state_lost_changes_total \(storage.lost)\n"
        }
        if let cluster {
            // Cluster mode (docs/cluster.md): alert when etcd is out of reach, or a job no node can take.
            let node = "node=\"\(cluster.node)\""
            let placement = placement()
            family("timerd_cluster_etcd_available", "gauge", "1 while this node reaches etcd (with a quorum) and is a live member.")
            text += "timerd_cluster_etcd_available{\(node)} \(engine.clusterRole == .member ? 1 : 0)\n"
            family("timerd_cluster_members", "gauge", "Live members of the cluster, as this node sees it.")
            text += "timerd_cluster_members{\(node)} \(engine.clusterMembers.count)\n"
            family("timerd_cluster_shared_jobs", "gauge", "Shared jobs this node knows of.")
            text += "timerd_cluster_shared_jobs{\(node)} \(sharedJobCount())\n"
            family("timerd_cluster_owned_jobs", "gauge", "Shared jobs this node runs (their owner is this node).")
            text += "timerd_cluster_owned_jobs{\(node)} \(placement.owned[cluster.node] ?? 0)\n"
            family("timerd_cluster_waiting_jobs", "gauge", "Shared jobs no live member can take (run_on tags no member has, or no member in reach).")
            text += "timerd_cluster_waiting_jobs{\(node)} \(placement.waiting)\n"
        }
        return text
    }
}
