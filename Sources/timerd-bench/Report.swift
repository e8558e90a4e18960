import Foundation
import TimerdSystem

/// Turns the results in the output directory into `report.md`, CDF data files and a gnuplot script for
/// `lateness.png`. Peers' results (`systemd-N.json` / `.samples`, from bench/peer-systemd.sh) are
/// included when present.
struct Report {
    var out: String

    struct PeerResult: Decodable {
        var peer: String
        var jobs: Int
        var seconds: Double
        var expected_fires: Int
        var starts: Int
        var register_seconds: Double?
        var pid1_rss_kb_before: Double?
        var pid1_rss_kb_after: Double?
    }

    /// One line of the lateness plot: command start lateness of one scheduler at one load.
    struct Series {
        var label: String
        var file: String
        var milliseconds: [Double]
    }

    func load<T: Decodable>(_ type: T.Type, _ name: String) -> T? {
        guard let bytes = try? FileSystem.readFile("\(out)/\(name)") else { return nil }
        return try? JSONDecoder().decode(type, from: Data(bytes))
    }

    func write() throws {
        var text = "# timerd benchmark\n\n"
        text += environment() + "\n"
        text += issueTable()
        text += clusterTable()
        var series: [Series] = []
        let loads = latenessLoads()
        for jobs in loads {
            text += "## Lateness: \(jobs) jobs each due every second (\(jobs) fires/s, phases spread evenly)\n\n"
            text += "Each run starts `bench/probe`, which writes how late it started against its due time. timerd's jobs "
            text += "are added one `ADD` at a time, each `start` set to put job i at i/N of the wall-clock second, the "
            text += "launcher's phases (Registering: how long that took, and how far `LIST`'s next fires are from them). "
            if let turns = load(LatenessResult.self, "timerd-\(jobs).json")?.turns, turns > 1 {
                if commandLateness("launcher2", jobs) != nil {
                    text += "timerd and the launcher twice over took turns, \(turns) windows each (timerd, launcher, launcher again, "
                    text += "launcher again, launcher, timerd, …; timerd's jobs paused while a launcher ran), so all three saw the same "
                    text += "mix of moments; systemd before them. The launcher's second series is the floor against itself: the same "
                    text += "program measured the same way, so its distance from the first is what this run's noise alone does to a ratio. "
                } else {
                    text += "timerd and the launcher took turns, \(turns) windows each (timerd, launcher, launcher, timerd, …; "
                    text += "timerd's jobs paused while the launcher ran), so both saw the same mix of moments; systemd before them. "
                }
                text += "The window is the sum of a scheduler's; the load is the machine's one-minute load average at the end "
                text += "of its last window, "
            } else {
                text += "The three ran back to back; the load is the machine's one-minute load average at the end of each window, "
            }
            text += "CPU per fire the scheduler's own CPU time (not its children's) over the fires due, stolen the CPU time "
            text += "the hypervisor took from the machine's CPUs during the window (a stall for every scheduler alike).\n\n"
            text += "| Scheduler | Window | Fires due | Commands started | Registering | Due → handler p50 / p99 / max (ms) "
            text += "| Due → command running p50 / p90 / p99 / max (ms) | CPU per fire | Load | Stolen |\n"
            text += "|---|---|---|---|---|---|---|---|---|---|\n"
            for scheduler in ["timerd", "systemd", "launcher", "launcher2"] {
                guard let row = commandLateness(scheduler, jobs) else { continue }
                text += "| \(row.label) | \(fmt(row.seconds, 0)) s | \(row.expected) | \(row.starts)"
                let phases = row.phaseError.map { ", phases within \(fmt($0, 2)) ms" } ?? ""
                text += " | \(row.registerSeconds.map { "\(fmt($0 * 1000, 0)) ms\(phases)" } ?? "–") | \(triple(row.dispatch))"
                text += " | \(row.text) | \(row.cpuPerFire.map { "\(fmt($0 * 1e6, 0)) µs" } ?? "–")"
                text += " | \(row.load.map { fmt($0, 2) } ?? "–") | \(row.stolen.map { "\(fmt($0 * 1000, 0)) ms" } ?? "–") |\n"
                if row.summary != nil {
                    series.append(Series(label: "\(row.label), \(jobs) fires/s", file: "cdf-\(scheduler)-\(jobs).dat", milliseconds: row.samples))
                }
            }
            text += "\n"
            if let peer = load(PeerResult.self, "systemd-\(jobs).json"), let before = peer.pid1_rss_kb_before,
               let after = peer.pid1_rss_kb_after {
                text += "\(peer.peer): its PID 1 grew from \(mib(UInt64(before))) to \(mib(UInt64(after))) for \(peer.jobs) "
                text += "timers with their services (\(fmt((after - before) * 1024 / Double(peer.jobs), 0)) bytes each).\n\n"
            }
        }
        if let scale = load(ScaleResult.self, "scale.json") {
            text += "## Scale: \(scale.jobs) registered jobs\n\n"
            text += "| Measure | Value |\n|---|---|\n"
            text += "| `ADD` pipelined on one connection | \(fmt(scale.pipelined_seconds, 2)) s (\(fmt(scale.pipelined_adds_per_second, 0)) /s) |\n"
            text += "| `ADD`, one connection per request | \(fmt(scale.per_client_seconds, 2)) s (\(fmt(scale.per_client_adds_per_second, 0)) /s) |\n"
            text += "| Resident memory before → after | \(mib(scale.rss_before_kb)) → \(mib(scale.rss_after_kb)) |\n"
            text += "| Memory per job | \(fmt(scale.bytes_per_job, 0)) bytes, its deadline included (one kernel timer per "
            text += "clock for all jobs; an armed Dispatch timer source per job would be \(fmt(scale.dispatch_timer_bytes, 0)) more, "
            text += "measured alone: `timerd-bench dispatch-timers \(scale.jobs)`) |\n"
            text += "| `LIST` (all jobs) | \(fmt(scale.list_seconds * 1000, 0)) ms, \(fmt(Double(scale.list_bytes) / 1_048_576, 1)) MiB reply |\n"
            if let firstByte = scale.list_first_byte_seconds, let peak = scale.list_peak_rss_kb {
                text += "| … its first bytes after; the daemon's peak resident memory meanwhile | \(fmt(firstByte * 1000, 0)) ms; \(fmt(Double(peak) / 1024, 1)) MiB |\n"
            }
            if let seconds = scale.timerctl_list_seconds {
                text += "| `timerctl --json list` to /dev/null, start to exit | \(fmt(seconds * 1000, 0)) ms |\n"
            }
            text += "| `CANCEL tag=bulk` (all jobs) | \(fmt(scale.cancel_seconds * 1000, 0)) ms |\n"
            if let notifications = scale.notifications {
                text += "| Notifications sent (`NOTIFY_SOCKET`, as under systemd); the last status line | \(notifications); "
                text += "`\(scale.last_status ?? "none")` |\n"
            }
            text += "| \(scale.fast_jobs) jobs every 100 ms meanwhile: due → handler p50 / p99 / max | \(triple(scale.fast_dispatch_ms)) ms |\n"
            text += "| … due → command running p50 / p90 / p99 / max | \(quad(scale.fast_command_ms)) ms |\n"
            for step in ["pipelined", "list", "timerctl-list", "cancel", "per-client"] {
                guard let summary = scale.fast_dispatch_ms_by_step[step] else { continue }
                text += "| … due → handler p50 / p99 / max during the \(step) step | \(triple(summary)) ms |\n"
            }
            text += "\n"
        }
        if let load = load(ThroughputResult.self, "throughput.json") {
            text += "## Sustained command runs\n\n"
            text += "\(load.jobs) jobs each due every second running `/bin/true` (\(fmt(load.offered_per_second, 0)) fires/s "
            text += "offered, phases spread evenly, `max_running` \(load.max_running)), \(fmt(load.seconds, 0)) s: "
            text += "**\(fmt(load.runs_per_second, 0)) runs/s** completed (\(load.runs_ok) ok, \(load.runs_failed) failed, "
            text += "\(load.skipped) fires missed because they could not start before the job's next due time).\n\n"
        }
        if let hooks = load(WebhookThroughputResult.self, "webhooks.json") {
            text += "## Sustained webhook requests\n\n"
            text += "\(hooks.jobs) webhook jobs each due every second (\(fmt(hooks.offered_per_second, 0)) requests/s offered) "
            text += "to a local nginx answering 200, \(fmt(hooks.seconds, 0)) s: **\(fmt(hooks.requests_per_second, 0)) requests/s** "
            text += "completed (\(hooks.requests_ok) ok, \(hooks.requests_failed) failed, \(hooks.skipped) fires missed), "
            text += "at most \(hooks.max_threads) daemon threads.\n\n"
        }
        text += clusterSection()
        if let idle = load(IdleResult.self, "idle.json") {
            text += "## Idle\n\n"
            if let empty = idle.empty_rss_kb, let added = idle.jobs_rss_kb {
                text += "Resident 2 s after start with no jobs: **\(mib(empty))**; 2 s after \(idle.jobs) jobs every hour "
                text += "were added over one connection: **\(mib(added))**. "
            }
            if let config = idle.config_jobs_rss_kb {
                text += "Resident 2 s after start with the same \(idle.jobs) jobs declared in the config: **\(mib(config))**. "
            }
            text += "\(idle.jobs) jobs every hour, no client, \(fmt(idle.seconds, 0)) s: resident \(mib(idle.rss_kb)), "
            text += "\(idle.threads) threads, \(idle.context_switches) context switches in all threads "
            text += "(**\(fmt(idle.wakeups_per_minute, 1)) wake-ups/min**; no watchdog outside systemd). "
            text += "For comparison, measured the same way: a bare program with one idle Dispatch timer, "
            text += "\(fmt(idle.baseline_wakeups_per_minute, 1)) wake-ups/min (\(mib(idle.baseline_rss_kb)) resident); the same "
            text += "program after running one block on the global concurrent queue, "
            text += "\(fmt(idle.baseline_global_wakeups_per_minute, 1)) wake-ups/min. libdispatch on Linux starts a "
            text += "once-a-second worker-pool monitor timer the first time a global-queue worker runs "
            text += "(`_dispatch_workq_init_once` in swift-corelibs-libdispatch), and Swift concurrency's default "
            text += "executor is that queue (timerd points it at a serial queue of its own, `GlobalExecutor`).\n\n"
        }
        try Measure.write(text, to: "\(out)/report.md")
        try writePlot(series.filter { !$0.milliseconds.isEmpty })
        print(text, terminator: "")
    }

    /// The loads with a timerd, peer or launcher result, largest first.
    func latenessLoads() -> [Int] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []
        var loads = Set<Int>()
        for name in names where name.hasSuffix(".json") {
            for prefix in ["timerd-", "systemd-", "launcher-"] where name.hasPrefix(prefix) {
                if let jobs = Int(name.dropFirst(prefix.count).dropLast(5)) { loads.insert(jobs) }
            }
        }
        return loads.sorted(by: >)
    }

    func environment() -> String {
        let cpu = (try? FileSystem.readFile("/proc/cpuinfo")).map { String(decoding: $0, as: UTF8.self) }?
            .split(separator: "\n").first { $0.hasPrefix("model name") }?
            .split(separator: ":", maxSplits: 1).last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        var uts = utsname()
        uname(&uts)
        let kernel = withUnsafeBytes(of: &uts.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return "Machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) CPUs (\(cpu)), Linux \(kernel). "
            + "Release build with the static Swift standard library. Produced by `make bench`.\n"
    }

    /// CDF files (about 2,000 points each) and `lateness.gp`, which draws them with a log time axis.
    func writePlot(_ series: [Series]) throws {
        var plots: [String] = []
        for line in series {
            let sorted = line.milliseconds.sorted()
            let step = max(1, sorted.count / 2_000)
            var data = ""
            for index in stride(from: 0, to: sorted.count, by: step) {
                data += "\(max(sorted[index], 0.001)) \(Double(index + 1) / Double(sorted.count))\n"
            }
            data += "\(max(sorted[sorted.count - 1], 0.001)) 1\n"
            try Measure.write(data, to: "\(out)/\(line.file)")
            plots.append("'\(out)/\(line.file)' using 1:2 with lines linewidth 2 title '\(line.label)'")
        }
        guard !plots.isEmpty else { return }
        try Measure.write("""
            set terminal pngcairo size 900,540 font ',10'
            set output '\(out)/lateness.png'
            set title 'Due time → command running (each command reports its own start)'
            set xlabel 'lateness (ms, log scale)'
            set ylabel 'fraction of runs started within'
            set logscale x
            set grid
            set key bottom right
            set yrange [0:1]
            plot \(plots.joined(separator: ", \\\n     "))

            """, to: "\(out)/lateness.gp")
    }

    func fmt(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }
    func mib(_ kb: UInt64) -> String { "\(fmt(Double(kb) / 1024, 1)) MiB" }
    static func ms(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }
    func ms(_ value: Double) -> String { Self.ms(value) }
    func triple(_ s: Summary?) -> String { s.map { "\(ms($0.p50)) / \(ms($0.p99)) / \(ms($0.max))" } ?? "–" }
    func quad(_ s: Summary?) -> String { s.map { "\(ms($0.p50)) / \(ms($0.p90)) / \(ms($0.p99)) / \(ms($0.max))" } ?? "–" }
}
