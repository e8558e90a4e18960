import Synchronization

/// Client certificates and the CA for `https://` endpoints (PEM files). nil fields: libcurl's defaults.
public struct EtcdTLS: Sendable, Equatable {
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?

    public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
    }
}

public enum EtcdError: Error, Equatable, CustomStringConvertible {
    /// No endpoint answered in time: connection refused, timeout, no quorum ("etcdserver: request timed
    /// out", "no leader", ...). The message names each endpoint tried and why it failed.
    case unavailable(String)
    /// etcd answered with an error that is not about availability.
    case server(String)
    /// The lease does not exist (any more): expired, revoked or never granted.
    case leaseNotFound
    /// A reply that is not what etcd's gateway sends.
    case protocolError(String)
    /// libcurl could not be loaded.
    case libcurl(String)

    public var description: String {
        switch self {
        case .unavailable(let why): "etcd unavailable: \(why)"
        case .server(let why): "etcd: \(why)"
        case .leaseNotFound: "etcd: lease not found"
        case .protocolError(let why): "etcd protocol error: \(why)"
        case .libcurl(let why): why
        }
    }
}

public struct EtcdKeyValue: Sendable, Equatable {
    public var key: String
    public var value: [UInt8]
    public var createRevision: Int64
    public var modRevision: Int64
    public var version: Int64
    public var lease: Int64

    public init(key: String, value: [UInt8] = [], createRevision: Int64 = 0, modRevision: Int64 = 0, version: Int64 = 0, lease: Int64 = 0) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
        self.modRevision = modRevision
        self.version = version
        self.lease = lease
    }

    /// The value as UTF-8 (invalid sequences replaced).
    public var valueString: String { String(decoding: value, as: UTF8.self) }
}

/// One comparison of a transaction; all must hold for its success branch to run. A revision (or version)
/// of 0 means "the key does not exist".
public enum EtcdCompare: Sendable, Equatable {
    case value(String, equals: [UInt8])
    case modRevision(String, equals: Int64)
    case createRevision(String, equals: Int64)
    case version(String, equals: Int64)
}

public enum EtcdOperation: Sendable, Equatable {
    case put(String, value: [UInt8], lease: Int64 = 0)
    case delete(String, prefix: Bool = false)
    case get(String, prefix: Bool = false)
}

public struct EtcdTxnResult: Sendable, Equatable {
    public var succeeded: Bool
    /// The store's revision after the transaction.
    public var revision: Int64
    /// One list per `.get` of the branch that ran, in order.
    public var ranges: [[EtcdKeyValue]]

    public init(succeeded: Bool, revision: Int64, ranges: [[EtcdKeyValue]]) {
        self.succeeded = succeeded
        self.revision = revision
        self.ranges = ranges
    }
}

public struct EtcdEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case put, delete }
    public var kind: Kind
    /// For a delete only the key and `modRevision` (the deletion's revision) are set.
    public var kv: EtcdKeyValue

    public init(kind: Kind, kv: EtcdKeyValue) {
        self.kind = kind
        self.kv = kv
    }
}

public struct EtcdMember: Sendable, Equatable {
    public var id: UInt64
    public var name: String
    public var clientURLs: [String]

    public init(id: UInt64, name: String, clientURLs: [String]) {
        self.id = id
        self.name = name
        self.clientURLs = clientURLs
    }
}

public struct EtcdEndpointStatus: Sendable, Equatable {
    public var endpoint: String
    /// Answered, and knows a leader (no error in the reply).
    public var healthy: Bool
    public var leaderID: UInt64
    public var memberID: UInt64
    public var raftTerm: UInt64
    public var version: String
    /// Why it is not healthy.
    public var error: String?

    public init(endpoint: String, healthy: Bool, leaderID: UInt64, memberID: UInt64, raftTerm: UInt64, version: String, error: String?) {
        self.endpoint = endpoint
        self.healthy = healthy
        self.leaderID = leaderID
        self.memberID = memberID
        self.raftTerm = raftTerm
        self.version = version
        self.error = error
    }
}

/// Why `EtcdClient.watch` returned.
public enum WatchEnd: Sendable, Equatable {
    /// `WatchStop.stop()` was called.
    case stopped
    /// The stream ended or failed (the member went away, lost its leader, ...): watch again, from the
    /// revision after the last one seen, through whichever endpoint works.
    case broken(String)
    /// The start revision was compacted; this is the oldest revision still kept.
    case compacted(Int64)
}

/// Ends a running `watch` from another thread (noticed within about 100 ms).
public final class WatchStop: Sendable {
    private let flag = Atomic<Bool>(false)

    public init() {}

    public func stop() { flag.store(true, ordering: .releasing) }

    public var isStopped: Bool { flag.load(ordering: .acquiring) }
}
