/// Every limit timerd enforces, with its documented default (see `docs/configuration.md`).
public enum Limits {
    /// Longest protocol request line in bytes, not counting the newline.
    public static let maxLineBytes = 65_536
    /// How much of a run's combined stdout/stderr is kept for `show`.
    public static let outputTailBytes = 4_096
    /// Longest single output line logged; longer lines are cut and marked.
    public static let maxLoggedLineBytes = 2_048
    /// Default daemon-wide cap on concurrent runs (`max_running`).
    public static let defaultMaxRunning = 64
    /// Time between SIGTERM and SIGKILL when a run times out or is replaced (`kill_grace`).
    public static let defaultKillGrace = Duration.seconds(5)
    /// A fire handled up to this late still runs as scheduled; later, it counts as missed (`misfire_grace`).
    public static let defaultMisfireGrace = Duration.seconds(60)
    public static let minimumMisfireGrace = Duration.seconds(1)
    /// Finished runs kept per job in the state store (`history_limit`), and the most a job may ask for.
    public static let defaultHistoryLimit = 100
    public static let maximumHistoryLimit = 10_000
    /// Due fires and what became of each (`timerctl why`) kept per job in the state store.
    public static let fireRecordsKept = 50
    /// With `misfire=all`, at most this many missed fires are replayed; older ones are skipped (and said so).
    public static let maximumReplays = 100
    /// Time running jobs get to finish when the daemon stops (`stop_grace`).
    public static let defaultStopGrace = Duration.seconds(10)
    /// Shortest `every` interval accepted.
    public static let minimumInterval = Duration.milliseconds(10)

    /// Daemon-wide cap on open control connections (`max_connections`).
    public static let defaultMaxConnections = 16_384
    /// Open control connections per non-root user (`max_connections_per_user`).
    public static let defaultMaxConnectionsPerUser = 256
    /// Requests per second one non-root connection may send (`max_request_rate`).
    public static let defaultMaxRequestRate = 200
    /// A connection that sends nothing for this long is closed, unless it watches or owns jobs (`idle_timeout`).
    public static let defaultIdleTimeout = Duration.seconds(300)
    /// Jobs one non-root user may have (`user_max_jobs`).
    public static let defaultUserMaxJobs = 1_000
    /// Runs one non-root user's jobs may start per minute, scheduled and by hand (`user_max_runs_per_minute`).
    public static let defaultUserMaxRunsPerMinute = 600
    /// Memory for the last output of every job held for `show` (`max_output_memory`); beyond it the oldest
    /// outputs are dropped from memory (the history on disk keeps them).
    public static let defaultMaxOutputMemory = 64 << 20
    /// The most failed runs in a row `pause_after_failures` waits for.
    public static let maximumPauseAfterFailures = 1_000
}
