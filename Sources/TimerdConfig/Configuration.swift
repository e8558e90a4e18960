import TimerdCore

/// The `[daemon]` section.
public struct DaemonSettings: Equatable, Sendable {
    /// Control socket path from `[daemon] socket` (already resolved against the config file's directory);
    /// nil when not set. `--socket` and `TIMERD_SOCKET` take precedence over it.
    public var socket: String?
    /// Daemon-wide cap on concurrent runs.
    public var maxRunning: Int
    /// Time running jobs get to finish when the daemon stops.
    public var stopGrace: Duration
    /// Where the log goes: `auto` (the journal when stderr is the journal, else stderr), `journal`, `stderr`.
    public var log: String
    /// Where to write Prometheus metrics (`metrics_file`), resolved against the config's directory; nil: off.
    public var metricsFile: String?
    /// How often the metrics file is rewritten (`metrics_interval`, default 15s).
    public var metricsInterval: Duration = .seconds(15)

    /// Who may do what over the control socket (`socket_group`, `allow_users`, limits; `docs/security.md`).
    public var access = AccessSettings()

    /// The `[cluster]` section (`docs/cluster.md`); nil: a single-host daemon.
    public var cluster: ClusterSettings?

    /// `[pool "NAME"]` sections: each pool's `max_running`, the cap on runs of the jobs in it (`pool=NAME`).
    public var pools: [String: Int] = [:]

    public static let logTargets = ["auto", "journal", "stderr"]

    public init(
        socket: String? = nil, maxRunning: Int = Limits.defaultMaxRunning, stopGrace: Duration = Limits.defaultStopGrace,
        log: String = "auto"
    ) {
        self.socket = socket
        self.maxRunning = maxRunning
        self.stopGrace = stopGrace
        self.log = log
    }

    /// The settings used when there is no config file or no `[daemon]` section.
    public static let defaults = DaemonSettings()
}

/// The access settings of the `[daemon]` section. Every limit has its default from `Limits`.
public struct AccessSettings: Equatable, Sendable {
    /// Group of the control socket file (mode 0660); nil: `timerd` if that group exists, else root only (0600).
    public var socketGroup: String?
    /// With either list set, only root, the listed users and members of the listed groups may add jobs.
    public var allowUsers: [String]?
    public var allowGroups: [String]?
    public var maxConnections = Limits.defaultMaxConnections
    public var maxConnectionsPerUser = Limits.defaultMaxConnectionsPerUser
    /// Requests per second per connection of a non-root client.
    public var maxRequestRate = Limits.defaultMaxRequestRate
    public var idleTimeout = Limits.defaultIdleTimeout
    public var userMaxJobs = Limits.defaultUserMaxJobs
    public var userMaxRunsPerMinute = Limits.defaultUserMaxRunsPerMinute
    /// Bytes of last-run output held in memory across all jobs.
    public var maxOutputMemory = Limits.defaultMaxOutputMemory
    /// The most a run of a job of a user other than root may use (`user_memory_max`, `user_limit_nofile`, …):
    /// a job asking for more is refused, one that sets nothing gets these.
    public var userCeiling = ResourceSettings()
    /// Where each `user_KEY` was given (`file:line`), for errors found when timerd applies it.
    public var userCeilingDeclared: [String: String] = [:]

    public init() {}

    /// The access keys that take a whole number: their range and where the value goes.
    static let wholeNumberKeys: [String: (ClosedRange<Int>, WritableKeyPath<AccessSettings, Int> & Sendable)] = [
        "max_connections": (1...1_000_000, \.maxConnections),
        "max_connections_per_user": (1...1_000_000, \.maxConnectionsPerUser),
        "max_request_rate": (1...1_000_000, \.maxRequestRate),
        "user_max_jobs": (0...10_000_000, \.userMaxJobs),
        "user_max_runs_per_minute": (0...1_000_000, \.userMaxRunsPerMinute),
    ]

    /// The `[daemon]` keys read into these settings.
    public static let keys = [
        "socket_group", "allow_users", "allow_groups", "max_connections", "max_connections_per_user", "max_request_rate",
        "idle_timeout", "user_max_jobs", "user_max_runs_per_minute", "max_output_memory",
    ] + ResourceSettings.ceilingKeys.map { "user_" + $0 }
}

/// The `[cluster]` section: the etcd cluster the nodes share jobs through (`docs/cluster.md`).
public struct ClusterSettings: Equatable, Sendable {
    /// etcd client URLs (`etcd = http://host:2379,…`).
    public var endpoints: [String] = []
    /// TLS to etcd: the CA that signed its certificate, and this node's client certificate and key.
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    /// Every key timerd writes starts with this (`prefix`, default `/timerd/`; always ends in `/`).
    public var prefix = "/timerd/"
    /// This node's name (`node`, default the host name); unique in the cluster.
    public var node = ""
    /// The lease that proves a node alive (`lease_ttl`, default 10s): a node that stops renewing it loses
    /// its membership (and its share of the shared jobs) this long after its last renewal.
    public var leaseTTL: Duration = .seconds(10)
    /// This node's tags (`tags = ssd, eu-west`), which a shared job's `run_on=` asks for; none by default.
    public var tags: [String] = []

    public init() {}

    public static let keys = ["etcd", "ca_file", "cert_file", "key_file", "prefix", "node", "lease_ttl", "tags"]
    /// etcd's smallest lease is 2s (with its default election timeout); above an hour is surely a typo.
    public static let leaseTTLRange = 2...3_600
}

/// A job declared in a config file, with where it was declared.
public struct ConfiguredJob: Equatable, Sendable {
    public var spec: JobSpec
    /// The file holding the job's section.
    public var file: String
    /// The line of its `[job "NAME"]` header.
    public var line: Int

    public init(spec: JobSpec, file: String, line: Int) {
        self.spec = spec
        self.file = file
        self.line = line
    }

    /// `file:line`, for messages such as "declared at /etc/timerd/timerd.conf:12".
    public var location: String { "\(file):\(line)" }
}

/// A fully validated configuration: daemon settings and the declared jobs.
public struct Configuration: Equatable, Sendable {
    public var settings: DaemonSettings
    /// Jobs in declaration order: the main file's first, then each included file in include order.
    public var jobs: [ConfiguredJob]
    /// Every file read: the main file first, then the included ones.
    public var files: [String]

    public init(settings: DaemonSettings = .defaults, jobs: [ConfiguredJob] = [], files: [String] = []) {
        self.settings = settings
        self.jobs = jobs
        self.files = files
    }

    /// No config file: default settings, no jobs.
    public static let empty = Configuration()

    /// The job named `name`, if the configuration declares it.
    public func job(named name: JobName) -> ConfiguredJob? { jobs.first { $0.spec.name == name } }
}
