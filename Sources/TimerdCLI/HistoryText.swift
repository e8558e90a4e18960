import TimerdCore
import TimerdProtocol

/// `history`'s table for a `HISTORY` reply, and the pieces `show` uses for its recent runs. Pure: "now"
/// and the local zone are passed in.
///
/// ```
/// RUN  SCHEDULED            STARTED              DURATION  RESULT      LATE
/// 14   15:55:00             15:55:00             1.234s    failed (3)  2ms
/// 13   manual               15:52:10             1.1s      ok          -
/// 12   2026-11-28 23:55:00  2026-11-29 00:01:20  3s        ok          6m20s
/// ```
package enum HistoryText {
    /// The table: RUN, SCHEDULED, STARTED, DURATION, (CPU, MEMORY,) RESULT, LATE, in the order given (timerd sends the
    /// newest first). Times are local (`zone`): the time of day for today, with the date before it for
    /// other days. SCHEDULED is `manual` for a run started by hand (`timerctl run`), whose LATE is `-`.
    /// No runs gives just the header.
    package static func table(_ runs: [RunRecord], now: WallTime, zone: ZoneRules) -> String {
        // Cluster mode: which node ran each run.
        let nodes = runs.contains { $0.node != nil }
        // What the runs used, when any of them says (commands' runs recorded by a timerd that measures it).
        let usage = runs.contains { $0.cpu_usage_ms != nil || $0.memory_peak_bytes != nil }
        // Which attempt at its fire each run was, when any was a retry (`retries`).
        let attempts = runs.contains { $0.attempt > 1 }
        var header = ["RUN"] + (attempts ? ["TRY"] : []) + ["SCHEDULED", "STARTED", "DURATION"]
        if usage { header += ["CPU", "MEMORY"] }
        header += ["RESULT", "LATE"]
        if nodes { header.append("NODE") }
        var rows = [header]
        for run in runs {
            var row: [String] = [String(run.run)] + (attempts ? [String(run.attempt)] : []) + [
                run.scheduled_at.map { localTime($0, now: now, zone: zone) } ?? "manual",
                localTime(run.started_at, now: now, zone: zone),
                duration(run),
            ]
            if usage {
                row.append(run.cpu_usage_ms.map(TimeText.milliseconds) ?? "-")
                row.append(run.memory_peak_bytes.map { StatsText.bytes(UInt64(max(0, $0))) } ?? "-")
            }
            row.append(resultSummary(run))
            row.append(run.lateness_ms.map(TimeText.milliseconds) ?? "-")
            if nodes { row.append(run.node ?? "-") }
            rows.append(row)
        }
        return JobInfoText.columns(rows).joined(separator: "\n") + "\n"
    }

    /// The result with the detail worth showing, as `list`'s RESULT column: a non-zero exit code
    /// (`failed (3)`, or `failed (exit code 3)` with that label) or the HTTP status of a webhook run that
    /// did not succeed (`failed (HTTP 503)`). The history keeps no signal: a run ended by one shows
    /// `timeout` or `killed` alone.
    package static func resultSummary(_ run: RunRecord, exitCodeLabel: String = "") -> String {
        if let code = run.exit_code, code != 0 { return "\(run.result) (\(exitCodeLabel)\(code))" }
        if let status = run.http_status, run.result != JobInfo.Result.ok.rawValue { return "\(run.result) (HTTP \(status))" }
        return run.result
    }

    /// From start to end (`1.234s`, `2m5s`), or `-` when a time does not parse.
    package static func duration(_ run: RunRecord) -> String {
        guard let start = try? RFC3339.parse(run.started_at), let end = try? RFC3339.parse(run.ended_at) else { return "-" }
        return TimeText.milliseconds(Double(end.nanosecondsSinceEpoch - start.nanosecondsSinceEpoch) / 1_000_000)
    }

    /// `15:55:00` when `text` is on the same local day as `now`, else `2026-11-28 23:55:00`; fractions of
    /// a second are dropped. The text itself when it does not parse.
    package static func localTime(_ text: String, now: WallTime, zone: ZoneRules) -> String {
        guard let time = try? RFC3339.parse(text) else { return text }
        let local = zone.localTime(wholeSeconds(time))
        let today = zone.localTime(wholeSeconds(now))
        let clock = "\(two(local.hour)):\(two(local.minute)):\(two(local.second))"
        if local.year == today.year, local.yearDay == today.yearDay { return clock }
        return "\(local.fullYear)-\(two(local.month + 1))-\(two(local.day)) " + clock
    }

    /// Seconds since the epoch, rounded down (also before 1970).
    private static func wholeSeconds(_ time: WallTime) -> Int64 {
        let nanoseconds = time.nanosecondsSinceEpoch
        let seconds = nanoseconds / 1_000_000_000
        return nanoseconds % 1_000_000_000 < 0 ? seconds - 1 : seconds
    }

    private static func two(_ value: Int) -> String { value < 10 && value >= 0 ? "0\(value)" : "\(value)" }
}
