import TimerdCore
import TimerdProtocol

/// `why`'s table for a `WHY` reply. Pure: "now" and the local zone are passed in.
///
/// ```
/// SCHEDULED  OUTCOME  RUN  LATE  DETAIL
/// 16:00:00   ran      12   2ms   ok
/// 15:00:00   skipped  -    -     run 11 is still going (overlap=skip)
/// ```
package enum WhyText {
    /// The table, in the order given (timerd sends the newest first). SCHEDULED is local time as in
    /// `history`; DETAIL is a run's result (`running` until it ends, and what it led to) or why the fire did not run.
    /// No fires gives just the header.
    package static func table(_ fires: [DueFire], now: WallTime, zone: ZoneRules) -> String {
        var rows = [["SCHEDULED", "OUTCOME", "RUN", "LATE", "DETAIL"]]
        for fire in fires {
            // A run's result, and what it led to (`pause_after_failures`: the job was paused).
            let detail = fire.outcome == "ran" ? (fire.result ?? "running") + (fire.reason.map { "; \($0)" } ?? "") : (fire.reason ?? "-")
            rows.append([
                HistoryText.localTime(fire.scheduled, now: now, zone: zone), fire.outcome, fire.run.map(String.init) ?? "-",
                fire.lateness_ms.map(TimeText.milliseconds) ?? "-", detail,
            ])
        }
        return JobInfoText.columns(rows).joined(separator: "\n") + "\n"
    }
}
