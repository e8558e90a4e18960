/// The `CLUSTER` reply: who is in the cluster, which shared jobs each member runs, and how etcd is
/// (`docs/cluster.md`). Every key is present (null when unknown).
public struct ClusterInfo: Codable, Equatable, Sendable {
    /// This node's name.
    public var node: String
    /// `member` (a live member: it runs its share of the shared jobs), `connecting` or `unavailable`
    /// (etcd cannot be reached or has no quorum).
    public var role: String
    /// This node's tags (`[cluster] tags`), for jobs' `run_on`.
    public var tags: [String]
    /// Why the node is not connected, when it is not.
    public var problem: String?
    /// This node's lease (hex, as `etcdctl lease list` shows it) and its TTL in seconds.
    public var lease: String?
    public var lease_ttl: Int
    /// Seconds until the lease expires unless renewed (as this node last learned); null without a lease.
    public var lease_remaining: Double?
    /// Nodes with a live lease, sorted by name.
    public var members: [Member]
    /// Shared jobs this node knows of.
    public var shared_jobs: Int
    /// Scheduled shared jobs no node runs now (`show` says `waiting`, and why), as this node sees it.
    public var waiting_jobs: Int
    /// Fire claims this node made in etcd (`null` before the first).
    public var claims: ClaimStats?
    public var prefix: String
    public var etcd: [Endpoint]

    public struct Member: Codable, Equatable, Sendable {
        public var name: String
        public var since: String?
        public var pid: Int?
        public var tags: [String]
        /// The shared jobs it runs, as this node sees the cluster.
        public var jobs: Int
        public init(name: String, since: String?, pid: Int?, tags: [String] = [], jobs: Int = 0) {
            self.name = name
            self.since = since
            self.pid = pid
            self.tags = tags
            self.jobs = jobs
        }
    }

    /// This node's fire claims: etcd transactions made, fires claimed (each once, won or lost), and the
    /// transactions' round trips in milliseconds (nearest-rank percentiles over the last 1,024).
    public struct ClaimStats: Codable, Equatable, Sendable {
        public var transactions: Int
        public var fires: Int
        public var p50_ms: Double
        public var p99_ms: Double
        public init(transactions: Int, fires: Int, p50_ms: Double, p99_ms: Double) {
            self.transactions = transactions
            self.fires = fires
            self.p50_ms = p50_ms
            self.p99_ms = p99_ms
        }
    }

    public struct Endpoint: Codable, Equatable, Sendable {
        public var url: String
        public var healthy: Bool
        /// etcd's member name behind the URL, its version, and whether it is the raft leader.
        public var member: String?
        public var version: String?
        public var is_leader: Bool
        public var error: String?
        public init(url: String, healthy: Bool, member: String?, version: String?, is_leader: Bool, error: String?) {
            self.url = url
            self.healthy = healthy
            self.member = member
            self.version = version
            self.is_leader = is_leader
            self.error = error
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(url, forKey: .url)
            try c.encode(healthy, forKey: .healthy)
            try c.encode(member, forKey: .member)
            try c.encode(version, forKey: .version)
            try c.encode(is_leader, forKey: .is_leader)
            try c.encode(error, forKey: .error)
        }
    }

    public init(node: String, role: String, tags: [String], problem: String?, lease: String?, lease_ttl: Int,
                lease_remaining: Double?, members: [Member], shared_jobs: Int, waiting_jobs: Int, claims: ClaimStats?,
                prefix: String, etcd: [Endpoint]) {
        self.node = node
        self.role = role
        self.tags = tags
        self.problem = problem
        self.lease = lease
        self.lease_ttl = lease_ttl
        self.lease_remaining = lease_remaining
        self.members = members
        self.shared_jobs = shared_jobs
        self.waiting_jobs = waiting_jobs
        self.claims = claims
        self.prefix = prefix
        self.etcd = etcd
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(node, forKey: .node)
        try c.encode(role, forKey: .role)
        try c.encode(tags, forKey: .tags)
        try c.encode(problem, forKey: .problem)
        try c.encode(lease, forKey: .lease)
        try c.encode(lease_ttl, forKey: .lease_ttl)
        try c.encode(lease_remaining, forKey: .lease_remaining)
        try c.encode(members, forKey: .members)
        try c.encode(shared_jobs, forKey: .shared_jobs)
        try c.encode(waiting_jobs, forKey: .waiting_jobs)
        try c.encode(claims, forKey: .claims)
        try c.encode(prefix, forKey: .prefix)
        try c.encode(etcd, forKey: .etcd)
    }
}

/// What etcd holds for the cluster, as JSON values under the cluster's prefix (`docs/cluster.md`):
/// `jobs/NAME` a `SharedJobRecord`, `claims/NAME` and `triggers/NAME` a `ClaimRecord`, `reports/NODE` a
/// `RunReports`, `members/NODE` a `MemberRecord`, `mode` the cluster's mode.
public struct SharedJobRecord: Codable, Equatable, Sendable {
    /// The job's options (`JobSpec.options`), as [key, value] pairs in order.
    public var options: [[String]]
    public var paused: Bool
    /// Nanoseconds since the epoch: when it was added (its `in=` and `every=` count from here).
    public var added_at: Int64
    public var owner_uid: UInt32
    /// The node it was added on.
    public var node: String

    public init(options: [[String]], paused: Bool, added_at: Int64, owner_uid: UInt32, node: String) {
        self.options = options
        self.paused = paused
        self.added_at = added_at
        self.owner_uid = owner_uid
        self.node = node
    }
}

/// The last scheduled instant of a job that a node won the right to run.
public struct ClaimRecord: Codable, Equatable, Sendable {
    /// The fire's nominal scheduled time, nanoseconds since the epoch.
    public var at: Int64
    public var node: String
    public init(at: Int64, node: String) {
        self.at = at
        self.node = node
    }
}

/// Finished runs of shared jobs, published together by the node that ran them (`reports/NODE`), so every
/// node's history has them.
public struct RunReports: Codable, Equatable, Sendable {
    public var runs: [SharedRunRecord]
    public init(runs: [SharedRunRecord]) { self.runs = runs }
}

/// A finished run of a shared job, as the node that ran it tells the others.
public struct SharedRunRecord: Codable, Equatable, Sendable {
    /// The job (set in a `RunReports` batch).
    public var job: String?
    public var node: String
    public var run: Int
    public var scheduled_at: Int64?
    public var started_at: Int64
    public var ended_at: Int64
    public var result: String
    public var exit_code: Int?
    public var http_status: Int?
    public var lateness_ms: Double?
    /// The output's tail (at most `SharedRunRecord.maxOutput` bytes).
    public var output: String
    /// Whether it was its fire's last attempt (no retry follows): then it fires the jobs that follow it
    /// (`after=`) on the nodes that run them. Absent from older nodes' records: taken as true.
    public var final: Bool?

    public static let maxOutput = 4_096

    public init(node: String, run: Int, scheduled_at: Int64?, started_at: Int64, ended_at: Int64, result: String,
                exit_code: Int?, http_status: Int?, lateness_ms: Double?, output: String, final: Bool? = true) {
        self.node = node
        self.run = run
        self.scheduled_at = scheduled_at
        self.started_at = started_at
        self.ended_at = ended_at
        self.result = result
        self.exit_code = exit_code
        self.http_status = http_status
        self.lateness_ms = lateness_ms
        self.output = output
        self.final = final
    }
}

/// A live node (its key lives on the node's lease).
public struct MemberRecord: Codable, Equatable, Sendable {
    public var since: Int64
    public var pid: Int
    public var version: String
    /// Its `[cluster] tags`.
    public var tags: [String]
    /// The shared config jobs (`cluster = yes`) its config declares.
    public var config_jobs: [String]

    public init(since: Int64, pid: Int, version: String, tags: [String] = [], config_jobs: [String] = []) {
        self.since = since
        self.pid = pid
        self.version = version
        self.tags = tags
        self.config_jobs = config_jobs
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        since = try c.decode(Int64.self, forKey: .since)
        pid = try c.decode(Int.self, forKey: .pid)
        version = try c.decode(String.self, forKey: .version)
        tags = try c.decodeIfPresent([String].self, forKey: .tags) ?? []
        config_jobs = try c.decodeIfPresent([String].self, forKey: .config_jobs) ?? []
    }
}
