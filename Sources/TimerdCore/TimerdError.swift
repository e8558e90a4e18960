/// The one error vocabulary of timerd: protocol `ERR` codes, `timerctl` exit codes and config diagnostics
/// all come from these stable codes (listed in `docs/errors.md`).
///
/// Equality compares the code only, so callers match on what went wrong, not on the wording.
public struct TimerdError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// The verb is not one the daemon knows.
        case unknownVerb = "unknown-verb"
        /// A word or option value is malformed or out of range.
        case badArgument = "bad-argument"
        /// A required word or option is absent.
        case missingArgument = "missing-argument"
        /// Quoting in the request line is unbalanced.
        case badQuoting = "bad-quoting"
        /// The request line is longer than the protocol's cap.
        case lineTooLong = "line-too-long"
        /// The request line is not valid UTF-8.
        case badEncoding = "bad-encoding"
        /// No job has that name.
        case noSuchJob = "no-such-job"
        /// A job with that name already exists (or the generated name was used before).
        case exists = "exists"
        /// The job comes from a config file: edit the file and reload instead.
        case declaredInConfig = "declared-in-config"
        /// The job has finished its schedule and can no longer be paused or resumed.
        case finished = "finished"
        /// `RUN` found the previous run still going and the job's overlap policy forbids another.
        case busy = "busy"
        /// The config files are invalid; the running set was left as it was.
        case invalidConfig = "invalid-config"
        /// The client may not do this: another user's job, a root-only verb or key, or not in the allow-list.
        case permissionDenied = "permission-denied"
        /// The client's user has as many jobs as `user_max_jobs` allows.
        case tooManyJobs = "too-many-jobs"
        /// Too many requests on this connection (`max_request_rate`), or too many runs started by hand for
        /// this user (`user_max_runs_per_minute`); try again later.
        case rateLimited = "rate-limited"
        /// `max_connections` or `max_connections_per_user` is reached; the connection is closed.
        case tooManyConnections = "too-many-connections"
        /// The connection sent nothing for `idle_timeout`; it is closed.
        case idleTimeout = "idle-timeout"
        /// Cluster mode: etcd cannot be reached (or has no quorum), so a change to shared jobs cannot be
        /// made; nothing was changed (`docs/cluster.md`).
        case clusterUnavailable = "cluster-unavailable"
        /// The change could not be written to the state directory (disk full, I/O error, read-only or
        /// removed); nothing was changed (`docs/state.md`).
        case storageUnavailable = "storage-unavailable"
        /// The daemon is shutting down and accepts no new work.
        case shuttingDown = "shutting-down"
        /// An unexpected failure inside the daemon (a bug or an environment failure).
        case `internal` = "internal"
    }

    public var code: Code
    public var message: String
    /// The option key the error is about, when there is one (lets config diagnostics point at a line).
    public var key: String?

    public init(_ code: Code, _ message: String, key: String? = nil) {
        self.code = code
        self.message = message
        self.key = key
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public static func == (lhs: TimerdError, rhs: TimerdError) -> Bool { lhs.code == rhs.code }
}
