import TimerdProtocol

/// `stats`'s block for a ``DaemonStats`` reply: one `label: value` line per counter, values aligned. Pure.
///
/// ```
/// jobs:       3 scheduled, 1 paused, 2 finished
/// runs:       10 ok, 1 failed, 0 timeout, 0 killed; 1 running, 0 pending, 4 skipped
/// lateness:   p50 0.12ms  p90 0.40ms  p99 1.30ms  max 2.10ms  (57 fires, last 5m)
/// exec:       p50 0.90ms  p90 1.20ms  p99 2.00ms  max 2.00ms  (11 runs, last 5m)
/// requests:   42
/// memory:     10.0 MiB resident
/// uptime:     1h0m0s
/// mode:       default
/// storage:    ok
/// runs in:    cgroups under /sys/fs/cgroup/system.slice/timerd.service/runs (controllers: cpu, io, memory, pids)
/// version:    0.1.0
/// ```
package enum StatsText {
    package static func block(_ stats: DaemonStats) -> String {
        var lines: [String] = []
        func add(_ label: String, _ value: String) { lines.append(HelpText.pad(label + ":", 12) + value) }

        let jobs = stats.jobs
        add("jobs", "\(jobs.scheduled) scheduled, \(jobs.paused) paused, \(jobs.finished) finished" + (jobs.waiting > 0 ? ", \(jobs.waiting) waiting" : ""))
        let runs = stats.runs
        add(
            "runs",
            "\(runs.ok) ok, \(runs.failed) failed, \(runs.timeout) timeout, \(runs.killed) killed; "
                + "\(stats.running) running, \(stats.pending) pending, \(stats.skipped) skipped")
        add("lateness", percentiles(stats.lateness_ms, sample: "fire"))
        add("exec", percentiles(stats.exec_ms, sample: "run"))
        add("requests", String(stats.requests))
        add("memory", bytes(stats.rss_bytes) + " resident")
        add("uptime", uptime(seconds: stats.uptime_seconds))
        add("mode", stats.mode)
        if let storage = stats.storage { add("storage", Self.storage(storage)) }
        if let tracking = stats.run_tracking {
            add("runs in", tracking.by == "cgroup"
                ? "cgroups under \(tracking.cgroups ?? "?") (controllers: "
                    + "\(tracking.controllers.map { $0.isEmpty ? "none" : $0.joined(separator: ", ") } ?? "?"))"
                : "process groups (not cgroups: \(tracking.reason ?? "unknown"))")
        }
        add("version", stats.version)
        return lines.joined(separator: "\n") + "\n"
    }

    /// `ok`, or `failing since 2026-12-01T17:40:00Z: disk full; 3 write errors, 120 changes held`
    /// (errors, held and lost changes are mentioned when there are any).
    package static func storage(_ storage: DaemonStats.Storage) -> String {
        var text = storage.state
        if storage.state != "ok" {
            text += " since \(storage.since ?? "?"): \(storage.reason ?? "unknown")"
        }
        var counts: [String] = []
        if storage.write_errors > 0 { counts.append("\(storage.write_errors) write error\(storage.write_errors == 1 ? "" : "s")") }
        if storage.held > 0 { counts.append("\(storage.held) change\(storage.held == 1 ? "" : "s") held") }
        if storage.lost > 0 { counts.append("\(storage.lost) lost") }
        return counts.isEmpty ? text : text + (storage.state == "ok" ? " (" + counts.joined(separator: ", ") + " since start)" : "; " + counts.joined(separator: ", "))
    }

    /// `p50 0.12ms  p90 0.40ms  p99 1.30ms  max 2.10ms  (57 fires, last 5m)`, or `no fires in the last 5m`
    /// without samples. A missing percentile (which timerd sends only without samples) is `-`.
    package static func percentiles(_ window: DaemonStats.Percentiles, sample: String) -> String {
        let span = "last " + TimeText.coarseSpan(seconds: wholeSeconds(window.window_seconds, rounded: true))
        guard window.samples > 0 else { return "no \(sample)s in the \(span)" }
        let values = [("p50", window.p50), ("p90", window.p90), ("p99", window.p99), ("max", window.max)]
            .map { name, value in "\(name) \(value.map(milliseconds) ?? "-")" }
        let count = "\(window.samples) \(sample)" + (window.samples == 1 ? "" : "s")
        return values.joined(separator: "  ") + "  (\(count), \(span))"
    }

    /// Milliseconds with two decimals: `0.12ms`, `1.30ms`, `1234.50ms`.
    package static func milliseconds(_ ms: Double) -> String {
        fixed(ms, decimals: 2) + "ms"
    }

    /// `512 B`, `1.5 KiB`, `10.0 MiB`, `2.0 GiB`: binary units, one decimal above bytes.
    package static func bytes(_ count: UInt64) -> String {
        guard count >= 1024 else { return "\(count) B" }
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var value = Double(count) / 1024
        var unit = 0
        // Move up while the value would print as 1024.0 or more in this unit.
        while (value * 10).rounded() >= 10_240, unit + 1 < units.count {
            value /= 1024
            unit += 1
        }
        return fixed(value, decimals: 1) + " " + units[unit]
    }

    /// `1h0m0s`, `2d3h4m5s`, `59s`, `0s`: whole seconds (fractions dropped), every unit from the largest
    /// nonzero one down to seconds.
    package static func uptime(seconds: Double) -> String {
        var rest = wholeSeconds(seconds, rounded: false)
        let units: [(String, UInt64)] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)]
        var text = ""
        for (name, size) in units where !text.isEmpty || rest >= size || size == 1 {
            text += "\(rest / size)\(name)"
            rest %= size
        }
        return text
    }

    // MARK: Helpers

    /// `value` with exactly `decimals` digits after the point, rounded half away from zero.
    package static func fixed(_ value: Double, decimals: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (value.magnitude * scale).rounded()
        guard scaled < 9e18 else { return "\(value)" }
        let units = UInt64(scaled)
        let divisor = UInt64(scale)
        let sign = value < 0 && units != 0 ? "-" : ""
        guard decimals > 0 else { return sign + String(units) }
        let fraction = String(units % divisor)
        return sign + "\(units / divisor)." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }

    /// A non-negative count of seconds (0 for negative or non-finite input), rounded or truncated.
    private static func wholeSeconds(_ seconds: Double, rounded: Bool) -> UInt64 {
        guard seconds.isFinite, seconds > 0 else { return 0 }
        let value = rounded ? seconds.rounded() : seconds.rounded(.down)
        return value < 1.8e19 ? UInt64(value) : UInt64.max
    }
}
