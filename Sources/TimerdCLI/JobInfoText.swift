import TimerdCore
import TimerdProtocol
import TimerdSystem

/// `list`'s table and `show`'s block for ``JobInfo`` values. Pure: "now" is passed in.
package enum JobInfoText {
    /// The `list` table: NAME, STATE, SCHEDULE, NEXT, LAST, RESULT; columns two spaces apart, padded to
    /// the widest cell, no trailing spaces. No jobs gives just the header.
    package static func table(_ jobs: [JobInfo], now: WallTime) -> String {
        var rows = [["NAME", "STATE", "SCHEDULE", "NEXT", "LAST", "RESULT"]]
        for job in jobs {
            rows.append([
                job.name, job.state.rawValue, job.schedule,
                TimeText.relative(job.next_fire, now: now),
                TimeText.relative(job.last_started, now: now),
                resultSummary(job),
            ])
        }
        return columns(rows).joined(separator: "\n") + "\n"
    }

    /// Rows as aligned lines: cells two spaces apart, each column padded to its widest cell, the last
    /// column not padded (no trailing spaces).
    static func columns(_ rows: [[String]]) -> [String] {
        var widths: [Int] = []
        for row in rows {
            for (column, cell) in row.enumerated() {
                if column < widths.count { widths[column] = max(widths[column], cell.count) } else { widths.append(cell.count) }
            }
        }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : HelpText.pad(cell, widths[column])
            }.joined(separator: "  ")
        }
    }

    /// RESULT: `running` while the last started run goes on, else `held` while a fire waits for a mode
    /// the job runs in, else the last result with its exit code, signal or (for a webhook) HTTP status when
    /// there is one worth showing (`ok`, `failed (3)`, `killed (SIGKILL)`, `failed (HTTP 503)`), or `-`.
    package static func resultSummary(_ job: JobInfo) -> String {
        if lastRunInProgress(job) { return "running" }
        if job.held_since != nil { return "held" }
        guard let result = job.last_result else { return "-" }
        return summary(result, job, exitCodeLabel: "")
    }

    /// The `show` block: one `label: value` line per field, the last run as an indented group, the recent
    /// runs from the history (when timerd sent any) one per line, and the last output indented under its
    /// label. `cluster` (the node that runs it) only in cluster mode; `run on`, `owner`, `tags` and `modes` only when set (modes: other than
    /// `default`), `held since` only while a fire is held.
    package static func detail(_ job: JobInfo, now: WallTime) -> String {
        var lines: [String] = []
        func add(_ label: String, _ value: String) { lines.append(HelpText.pad(label + ":", 13) + value) }

        add("name", job.name)
        add("state", job.state.rawValue + (job.state == .paused ? job.paused_reason.map { " (\($0))" } ?? "" : ""))
        add("source", job.declared_at.map { "\(job.source), declared at \($0)" } ?? job.source)
        if job.cluster {
            add("cluster", "shared; " + (job.node.map { "runs on node \($0)" } ?? "waiting: " + (job.waiting_reason ?? "no node runs it now")))
        } else if let node = job.node {
            add("cluster", "this node's own (\(node))")
        }
        if !job.run_on.isEmpty { add("run on", "nodes tagged " + job.run_on.joined(separator: ", ")) }
        if job.redacted {
            add("added by", "uid \(job.owner_uid) (details hidden: another user's job)")
        } else if job.owner_uid != 0 {
            add("added by", "uid \(job.owner_uid)")
        }
        add("schedule", job.schedule)
        var others: [String] = []
        for option in job.options {
            let (key, value) = split(option)
            switch key {
            case "every", "start", "in", "at", "cron", "calendar": continue  // in `schedule`
            case "timezone", "dst_gap", "dst_repeat": continue  // in `timezone`
            case "owner", "tag", "modes", "run_on": continue  // lines of their own
            case "command", "argv": add(key, value)
            default: others.append(Option(key: key, value: value).description)
            }
        }
        if !others.isEmpty { add("options", others.joined(separator: " ")) }
        if let owner = job.owner { add("owner", owner) }
        if !job.tags.isEmpty { add("tags", job.tags.joined(separator: ", ")) }
        if !job.modes.isEmpty, job.modes != [Mode.defaultName] { add("modes", job.modes.joined(separator: ", ")) }
        if let zone = job.timezone {
            add("timezone", zone + (job.dst_rules.map { " (DST: \($0))" } ?? ""))
        }
        if let local = job.next_fire_local, let time = try? RFC3339.parse(local) {
            // Cron and calendar jobs: the next fire in the job's zone, which is what their schedule says.
            add("next fire", "\(local) (\(TimeText.relative(time, now: now)))")
        } else {
            add("next fire", timestamp(job.next_fire, now: now))
        }
        if let held = job.held_since { add("held since", timestamp(held, now: now)) }
        add("runs", String(job.runs))
        add("running", String(job.running))
        add("pending", String(job.pending))
        if let skip = job.last_skip {
            add("skipped", "\(job.skipped) (last \(TimeText.relative(skip.at, now: now)): \(skip.reason))")
        } else {
            add("skipped", String(job.skipped))
        }

        if let run = job.last_run {
            add("last run", "#\(run)")
            let inProgress = lastRunInProgress(job)
            if let started = job.last_started { add("  started", timestamp(started, now: now)) }
            if let lateness = job.last_lateness_ms { add("  lateness", TimeText.milliseconds(lateness)) }
            if inProgress {
                add("  result", "running")
                if let previous = job.last_result {
                    add("  previous", "\(outcomeSummary(previous, job)), finished \(TimeText.relative(job.last_finished, now: now))")
                }
            } else {
                if let finished = job.last_finished { add("  finished", timestamp(finished, now: now)) }
                if let result = job.last_result { add("  result", result.rawValue) }
                if let code = job.last_exit_code { add("  exit code", String(code)) }
                if let status = job.last_http_status { add("  status", "HTTP \(status)") }
                if let signal = job.last_signal { add("  signal", "\(signalName(signal)) (\(signal))") }
                if let duration = job.last_duration_ms { add("  duration", TimeText.milliseconds(duration)) }
                if let cpu = job.last_cpu_usage_ms { add("  cpu", TimeText.milliseconds(cpu)) }
                if let peak = job.last_memory_peak_bytes { add("  memory", StatsText.bytes(UInt64(max(0, peak))) + " at peak") }
                if let read = job.last_io_read_bytes, let written = job.last_io_write_bytes {
                    add("  io", "\(StatsText.bytes(UInt64(max(0, read)))) read, \(StatsText.bytes(UInt64(max(0, written)))) written")
                }
                if let reason = job.last_reason { add("  reason", reason) }
            }
        } else {
            add("last run", "never")
        }

        if let recent = job.recent_runs, !recent.isEmpty {
            lines.append("recent runs:")
            lines += columns(recent.map { run in
                ["#\(run.run)", TimeText.relative(run.started_at, now: now), HistoryText.duration(run),
                 HistoryText.resultSummary(run, exitCodeLabel: "exit code ")]
            }).map { "  " + $0 }
        }

        if let output = job.last_output {
            var text = Substring(output)
            while text.last == "\n" || text.last == "\r\n" { text.removeLast() }
            if text.isEmpty {
                add("last output", "(empty)")
            } else {
                lines.append("last output:")
                for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                    lines.append(line.isEmpty ? "" : "  " + line)
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: Helpers

    /// True when the most recently started run has not finished yet (its result is not in `last_result`).
    static func lastRunInProgress(_ job: JobInfo) -> Bool {
        guard job.running > 0, let started = job.last_started else { return false }
        guard let finished = job.last_finished else { return true }
        if let start = try? RFC3339.parse(started), let end = try? RFC3339.parse(finished) { return end < start }
        return finished < started  // same fixed-width UTC format: text order is time order
    }

    private static func outcomeSummary(_ result: JobInfo.Result, _ job: JobInfo) -> String {
        summary(result, job, exitCodeLabel: "exit code ")
    }

    /// `result` with the detail worth showing: a signal, a non-zero exit code, or an HTTP status of a
    /// run that did not succeed.
    private static func summary(_ result: JobInfo.Result, _ job: JobInfo, exitCodeLabel: String) -> String {
        if let signal = job.last_signal { return "\(result.rawValue) (\(signalName(signal)))" }
        if let code = job.last_exit_code, code != 0 { return "\(result.rawValue) (\(exitCodeLabel)\(code))" }
        if let status = job.last_http_status, result != .ok { return "\(result.rawValue) (HTTP \(status))" }
        return result.rawValue
    }

    /// `SIGKILL` for 9; `signal N` for numbers the C library does not name.
    static func signalName(_ number: Int) -> String {
        guard let raw = Int32(exactly: number) else { return "signal \(number)" }
        return Signal(rawValue: raw).description
    }

    /// `2026-11-29T16:00:04.000000Z (in 4s)`, or `-`.
    private static func timestamp(_ text: String?, now: WallTime) -> String {
        guard let text else { return "-" }
        guard let time = try? RFC3339.parse(text) else { return text }
        return "\(text) (\(TimeText.relative(time, now: now)))"
    }

    /// `key=value` → (key, value); a word without `=` → (word, "").
    private static func split(_ option: String) -> (String, String) {
        guard let equals = option.firstIndex(of: "=") else { return (option, "") }
        return (String(option[..<equals]), String(option[option.index(after: equals)...]))
    }
}
