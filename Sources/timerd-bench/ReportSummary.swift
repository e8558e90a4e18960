import Foundation
import TimerdSystem

/// One row of the report's first table: a measure of issue #19, timerd's value beside systemd 252's and
/// the floor's (a bare C or Dispatch program doing only that) where they apply, and its target.
struct IssueRow {
    var measure: String
    /// "not measured" when this run has no result for it.
    var timerd: String
    var systemd = "–"
    var floor = "–"
    /// timerd ÷ floor, when both exist.
    var ratio = "–"
    var target: String
    /// nil: not measured, so neither met nor missed.
    var met: Bool?
}

/// Due time → command running at one load, for one scheduler, as every table shows it.
struct CommandLateness {
    var label: String
    var seconds: Double
    var expected: Int
    var starts: Int
    var registerSeconds: Double?
    /// timerd's schedule against the launcher's, at most (`LatenessResult.phase_error_ms`).
    var phaseError: Double? = nil
    var dispatch: Summary?
    /// nil when the scheduler fell behind by more than the probe can measure (its lateness wraps at the
    /// 1 s period), so percentiles would mean nothing: it started fewer than 95% of the fires due, or a
    /// tenth of its starts were half a period late or more (a backlog it was still working off).
    var summary: Summary?
    var samples: [Double]
    var cpuPerFire: Double?
    var load: Double?
    /// CPU time the hypervisor took from the machine over the window, seconds (`LatenessResult.stolen_seconds`).
    var stolen: Double? = nil

    var saturated: Bool { summary == nil }
    /// The percentiles, or how far behind it fell.
    var text: String {
        guard let summary else {
            return "behind: \(String(format: "%.0f", Double(starts) / seconds)) starts/s for \(expected / max(1, Int(seconds))) due, "
                + "p50 \(Report.ms(Summary(milliseconds: samples)?.p50 ?? .nan)) ms (wraps at 1 s)"
        }
        return "\(Report.ms(summary.p50)) / \(Report.ms(summary.p90)) / \(Report.ms(summary.p99)) / \(Report.ms(summary.max))"
    }
}

extension Report {
    /// `scheduler` is `timerd`, `systemd` (bench/peer-systemd.sh) or `launcher` (bench/launcher.c).
    func commandLateness(_ scheduler: String, _ jobs: Int) -> CommandLateness? {
        let samples = Measure.probeSamples("\(out)/\(scheduler)-\(jobs).samples")
        var row: CommandLateness
        if scheduler == "systemd" {
            guard let peer = load(PeerResult.self, "systemd-\(jobs).json") else { return nil }
            row = CommandLateness(
                label: peer.peer, seconds: peer.seconds, expected: peer.expected_fires, starts: peer.starts,
                registerSeconds: peer.register_seconds, samples: samples)
        } else {
            guard let result = load(LatenessResult.self, "\(scheduler)-\(jobs).json") else { return nil }
            row = CommandLateness(
                label: result.peer, seconds: result.seconds, expected: result.expected_fires, starts: result.starts,
                registerSeconds: scheduler == "timerd" ? result.register_seconds : nil, dispatch: result.dispatch_ms,
                samples: samples, cpuPerFire: result.cpu_seconds.map { $0 / Double(max(1, result.expected_fires)) },
                load: result.load_average)
            row.phaseError = result.phase_error_ms
            row.stolen = result.stolen_seconds
        }
        if Double(row.starts) >= 0.95 * Double(row.expected), let summary = Summary(milliseconds: samples), summary.p90 < 500 {
            row.summary = summary
        }
        return row
    }

    /// Issue #19's table: every measure, side by side with systemd 252 and the floor where they apply.
    /// A measure this run has no result for says so; a scenario that adds a field adds its row here.
    func issueTable() -> String {
        let scale = load(ScaleResult.self, "scale.json")
        let idle = load(IdleResult.self, "idle.json")
        var rows: [IssueRow] = []

        rows.append(IssueRow(
            measure: "ADDs pipelined on one connection, each acknowledged after it is on disk",
            timerd: scale.map { "\(fmt($0.pipelined_adds_per_second, 0)) /s" } ?? notMeasured,
            target: "≥ 20,000 /s", met: scale.map { $0.pipelined_adds_per_second >= 20_000 }))
        rows.append(IssueRow(
            measure: "… over 16 connections", timerd: scale?.pipelined_16_adds_per_second.map { "\(fmt($0, 0)) /s" } ?? notMeasured,
            target: "≥ 50,000 /s", met: scale?.pipelined_16_adds_per_second.map { $0 >= 50_000 }))
        let systemdBytes = latenessLoads().lazy.compactMap { jobs -> Double? in
            guard let peer = self.load(PeerResult.self, "systemd-\(jobs).json"), let before = peer.pid1_rss_kb_before,
                  let after = peer.pid1_rss_kb_after else { return nil }
            return (after - before) * 1024 / Double(peer.jobs)
        }.first
        rows.append(IssueRow(
            measure: "Resident memory per idle job at \(scale.map { "\($0.jobs)" } ?? "100,000") jobs, timer included",
            timerd: scale.map { "\(fmt($0.bytes_per_job, 0)) B" } ?? notMeasured,
            systemd: systemdBytes.map { "\(fmt($0, 0)) B (PID 1, per timer + service)" } ?? "–",
            target: "≤ 1,024 B", met: scale.map { $0.bytes_per_job <= 1024 }))
        rows.append(IssueRow(
            measure: "Idle RSS right after start, empty config (VmRSS)", timerd: idle?.empty_rss_kb.map(mib) ?? notMeasured,
            floor: idle.map { "\(mib($0.baseline_rss_kb)) (bare Dispatch program)" } ?? "–",
            target: "≤ 12 MiB", met: idle?.empty_rss_kb.map { $0 <= 12 * 1024 }))
        // Both ways: declared in the config, and added over a connection (at the end of the idle minute).
        let withJobs = idle.map { idle in
            (idle.config_jobs_rss_kb.map { "in the config \(mib($0)); " } ?? "") + "added over a connection \(mib(idle.rss_kb))"
        }
        rows.append(IssueRow(
            measure: "… with 100 hourly jobs", timerd: withJobs ?? notMeasured,
            target: "≤ 14 MiB", met: idle.map { max($0.rss_kb, $0.config_jobs_rss_kb ?? 0) <= 14 * 1024 }))
        rows.append(IssueRow(
            measure: "Wake-ups over an idle minute, 100 hourly jobs, outside systemd",
            timerd: idle.map { fmt($0.wakeups_per_minute, 0) } ?? notMeasured,
            floor: idle.map { "\(fmt($0.baseline_wakeups_per_minute, 0)) (bare Dispatch program)" } ?? "–",
            target: "0", met: idle.map { $0.wakeups_per_minute == 0 }))
        if let seconds = scale?.timerctl_list_seconds {
            rows.append(bigRequestRow(
                "`timerctl --json list` of \(scale.map { "\($0.jobs)" } ?? "100,000") jobs", scale, step: "timerctl-list",
                seconds: seconds, limit: 1.0))
        } else {
            rows.append(bigRequestRow(
                "`LIST` of \(scale.map { "\($0.jobs)" } ?? "100,000") jobs (JSON over the socket)", scale, step: "list",
                seconds: scale?.list_seconds, limit: 1.0))
        }
        rows.append(bigRequestRow(
            "`CANCEL tag=` of \(scale.map { "\($0.jobs)" } ?? "100,000") jobs", scale, step: "cancel",
            seconds: scale?.cancel_seconds, limit: 0.3))
        rows.append(latencyRow(jobs: 200, target: "≤ 1.3 × the bare launcher") { _, ratio in ratio <= 1.3 })
        rows.append(latencyRow(jobs: 1000, target: "≤ 5 ms") { p99, _ in p99 <= 5 })

        var text = "## Issue #19: every measure\n\n"
        text += "The floor is what a program doing only that gets on this machine: the bare C launcher "
        text += "(`bench/launcher.c`, taking turns with timerd at the same load) for lateness, a bare Dispatch program for "
        text += "idle cost. Ratio: timerd ÷ floor; for lateness, the launcher's second series ÷ its first beside it (the floor "
        text += "against itself: how far this run's noise alone moves the ratio).\n\n"
        text += "| Measure | timerd | systemd 252 | Floor | Ratio | Target | Met? |\n|---|---|---|---|---|---|---|\n"
        for row in rows {
            let met = row.met.map { $0 ? "yes" : "no" } ?? "–"
            text += "| \(row.measure) | \(row.timerd) | \(row.systemd) | \(row.floor) | \(row.ratio) | \(row.target) | \(met) |\n"
        }
        return text + "\n"
    }

    var notMeasured: String { "not measured" }

    /// A request over all jobs of the scale scenario: its time and the lateness p99 of the fast jobs
    /// meanwhile (target ≤ 2 ms).
    private func bigRequestRow(_ measure: String, _ scale: ScaleResult?, step: String, seconds: Double?, limit: Double) -> IssueRow {
        guard let seconds, let others = scale?.fast_dispatch_ms_by_step[step] else {
            return IssueRow(measure: measure, timerd: notMeasured, target: "≤ \(fmt(limit * 1000, 0)) ms, others' lateness p99 ≤ 2 ms", met: nil)
        }
        return IssueRow(
            measure: measure, timerd: "\(fmt(seconds * 1000, 0)) ms, others' lateness p99 \(Self.ms(others.p99)) ms",
            target: "≤ \(fmt(limit * 1000, 0)) ms, others' lateness p99 ≤ 2 ms", met: seconds <= limit && others.p99 <= 2)
    }

    /// Due time → command running p99 at `jobs` fires/s: timerd, systemd 252 and the bare launcher.
    private func latencyRow(jobs: Int, target: String, met: (_ p99: Double, _ ratio: Double) -> Bool) -> IssueRow {
        let measure = "Due time → command running, \(jobs) fires/s, p99"
        func p99(_ row: CommandLateness?) -> String {
            guard let row else { return "–" }
            return row.summary.map { "\(Self.ms($0.p99)) ms" } ?? row.text
        }
        let timerd = commandLateness("timerd", jobs)
        let floor = commandLateness("launcher", jobs)
        guard let timerd else { return IssueRow(measure: measure, timerd: notMeasured, target: target, met: nil) }
        var row = IssueRow(measure: measure, timerd: p99(timerd), systemd: p99(commandLateness("systemd", jobs)),
                           floor: p99(floor), target: target, met: false)
        if let load = timerd.load { row.timerd += " (load \(fmt(load, 2)))" }
        if let mine = timerd.summary?.p99 {
            if let base = floor?.summary?.p99 {
                row.ratio = "\(fmt(mine / base, 2)) ×"
                if let again = commandLateness("launcher2", jobs)?.summary?.p99 {
                    row.ratio += " (the floor against itself: \(fmt(again / base, 2)) ×)"
                }
                row.met = met(mine, mine / base)
            } else if floor == nil {
                row.met = target.contains("launcher") ? nil : met(mine, .nan)
            } else {
                row.ratio = "floor behind"
                row.met = target.contains("launcher") ? true : met(mine, .nan)
            }
        }
        return row
    }
}
