import Dispatch
import Synchronization
import TimerdHTTP
import TimerdSystem

/// A blocking client of etcd's v3 JSON gateway (wire format: `EtcdWire`) over libcurl (`HTTPExchange`,
/// TimerdHTTP). Every call may be made from any thread; each request uses a curl easy handle of its own
/// on the calling thread, taken from a small pool so that its connection to the member is reused.
///
/// Endpoints: calls go to the preferred endpoint (the last one that answered); when it cannot be reached
/// within `requestTimeout`, or answers that it cannot serve (no leader, request timed out), each other
/// endpoint is tried once in turn within the same call, and the one that answers becomes preferred. When
/// none does: `.unavailable`, naming each endpoint's failure. So a call takes at most about
/// `requestTimeout` × the number of endpoints.
///
/// Reads are linearizable (etcd's default), so a member cut off from the quorum times out instead of
/// serving stale data. A write retried on another endpoint after a timeout may have been applied by the
/// first one: a put is then applied twice (harmless), a txn may report the failure its own first attempt
/// caused. Callers that need to know (compare-and-swap) re-read.
public final class EtcdClient: Sendable {
    /// The base URLs, e.g. `http://127.0.0.1:2379`, without a trailing slash.
    public let endpoints: [String]
    public let tls: EtcdTLS?
    public let requestTimeout: Duration
    /// Index into `endpoints` of the one tried first.
    private let preferred = Atomic<Int>(0)
    /// Easy handles with their open connections, for the next requests (the watch has its own).
    private let handles = HTTPHandlePool(capacity: 8)

    public init(endpoints: [String], tls: EtcdTLS? = nil, requestTimeout: Duration = .seconds(1),
                library: String = "libcurl.so.4") throws(EtcdError) {
        guard !endpoints.isEmpty else { throw .unavailable("no endpoints configured") }
        do {
            try HTTPLibrary.load(library)
        } catch {
            throw .libcurl(error.message)
        }
        self.endpoints = endpoints.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        self.tls = tls
        self.requestTimeout = requestTimeout
    }

    // MARK: - KV

    public func get(_ key: String, prefix: Bool = false) throws(EtcdError) -> (kvs: [EtcdKeyValue], revision: Int64) {
        let reply = try call("/v3/kv/range", EtcdWire.range(key, prefix: prefix))
        return (try EtcdWire.keyValues(reply), try EtcdWire.revision(reply))
    }

    /// Returns the revision of the put.
    @discardableResult
    public func put(_ key: String, _ value: [UInt8], lease: Int64 = 0) throws(EtcdError) -> Int64 {
        try EtcdWire.revision(call("/v3/kv/put", EtcdWire.put(key, value: value, lease: lease)))
    }

    @discardableResult
    public func delete(_ key: String, prefix: Bool = false) throws(EtcdError) -> (deleted: Int64, revision: Int64) {
        let reply = try call("/v3/kv/deleterange", EtcdWire.range(key, prefix: prefix))
        return (try EtcdWire.int64(reply.deleted), try EtcdWire.revision(reply))
    }

    public func txn(compare: [EtcdCompare], success: [EtcdOperation], failure: [EtcdOperation] = []) throws(EtcdError) -> EtcdTxnResult {
        try EtcdWire.txnResult(call("/v3/kv/txn", EtcdWire.txn(compare: compare, success: success, failure: failure)))
    }

    // MARK: - Leases

    public func grantLease(ttl: Int64) throws(EtcdError) -> (id: Int64, ttl: Int64) {
        let reply = try call("/v3/lease/grant", EtcdWire.LeaseRequest(ttl: String(ttl)))
        return (try EtcdWire.int64(reply.id), try EtcdWire.int64(reply.ttl))
    }

    /// One keepalive; returns the lease's TTL again. `.leaseNotFound` when it expired or never existed.
    @discardableResult
    public func keepAlive(_ lease: Int64) throws(EtcdError) -> Int64 {
        // A stream of one: {"result":{…,"TTL":"n"}}, without TTL for an unknown lease.
        let reply = try call("/v3/lease/keepalive", EtcdWire.LeaseRequest(id: String(lease)))
        guard let result = reply.result else { throw .protocolError("keepalive reply without result") }
        let ttl = try EtcdWire.int64(result.ttl)
        guard ttl > 0 else { throw .leaseNotFound }
        return ttl
    }

    public func revoke(_ lease: Int64) throws(EtcdError) {
        _ = try call("/v3/lease/revoke", EtcdWire.LeaseRequest(id: String(lease)))
    }

    // MARK: - Cluster

    public func members() throws(EtcdError) -> [EtcdMember] {
        try EtcdWire.members(call("/v3/cluster/member/list", EtcdWire.EmptyRequest()))
    }

    /// Every endpoint's own view, asked in parallel, each within `requestTimeout`. Never throws: an
    /// endpoint that does not answer is unhealthy with the reason.
    public func status() -> [EtcdEndpointStatus] {
        let results = Locked([EtcdEndpointStatus?](repeating: nil, count: endpoints.count))
        DispatchQueue.concurrentPerform(iterations: endpoints.count) { index in
            let endpoint = endpoints[index]
            let status: EtcdEndpointStatus
            do {
                status = try EtcdWire.status(request(endpoint, "/v3/maintenance/status", EtcdWire.EmptyRequest()), endpoint: endpoint)
            } catch {
                status = EtcdEndpointStatus(endpoint: endpoint, healthy: false, leaderID: 0, memberID: 0, raftTerm: 0,
                                            version: "", error: "\(error)")
            }
            results.withLock { $0[index] = status }
        }
        return results.withLock { $0.compactMap { $0 } }
    }

    // MARK: - Requests

    /// POSTs `body` to `path` at the preferred endpoint, else at each other one in turn (see the type's
    /// comment); the reply object of the first that serves it.
    func call(_ path: String, _ body: some Encodable) throws(EtcdError) -> EtcdWire.Reply {
        let body = EtcdWire.encode(body)
        let first = preferred.load(ordering: .relaxed)
        var failures: [String] = []
        for offset in 0..<endpoints.count {
            let index = (first + offset) % endpoints.count
            do {
                let reply = try request(endpoints[index], path, body: body)
                preferred.store(index, ordering: .relaxed)
                return reply
            } catch let failure {
                switch failure {
                case .unavailable(let why): failures.append("\(endpoints[index]): \(why)")
                default:
                    // It answered: it is fine as an endpoint.
                    preferred.store(index, ordering: .relaxed)
                    throw failure
                }
            }
        }
        throw .unavailable(failures.joined(separator: "; "))
    }

    /// One endpoint, one attempt. `.unavailable` (with the reason only) when it cannot serve.
    func request(_ endpoint: String, _ path: String, _ body: some Encodable) throws(EtcdError) -> EtcdWire.Reply {
        try request(endpoint, path, body: EtcdWire.encode(body))
    }

    /// `request` with the body encoded.
    func request(_ endpoint: String, _ path: String, body: [UInt8]) throws(EtcdError) -> EtcdWire.Reply {
        guard let exchange = HTTPExchange(post(endpoint + path, body: body, timeout: requestTimeout), pool: handles)
        else { throw .unavailable("cannot set up a request (out of memory)") }
        let response = exchange.perform()
        if let failure = response.failure { throw .unavailable(failure.message) }
        let status = response.status ?? 0
        let reply: EtcdWire.Reply
        do {
            reply = try EtcdWire.object(response.body)
        } catch {
            // A proxy or a member shutting down may answer 5xx with something else.
            if status >= 500 { throw .unavailable("HTTP \(status)") }
            throw error
        }
        switch EtcdWire.failure(reply, status: status) {
        case nil: return reply
        case .unavailable(let why)?: throw .unavailable(why)
        case .final(let error)?: throw error
        }
    }

    // MARK: - Watch

    /// Streams events for `key` (or every key under it, `prefix`) from `startRevision` (0: from now).
    /// Blocks the calling thread until `stop` is flagged (noticed within about 100 ms even when nothing
    /// flows), the stream breaks, or `startRevision` was compacted, and says which. `onCreated` runs once
    /// the watch is in place, with the store's revision then; `onEvents` for each batch of events, with
    /// the store's revision when it was sent. Both run on the calling thread.
    ///
    /// The endpoint: the preferred one, else the others in turn until one accepts the watch (answers
    /// "created" within `requestTimeout`). A member
    /// that loses its quorum later keeps the stream open but sends nothing new (etcd's gateway does not
    /// ask for a leader); callers that care check `status()` or their own keepalives.
    /// `end`: the keys from `key` up to (not including) `end` instead.
    public func watch(_ key: String, prefix: Bool, end: String? = nil, from startRevision: Int64, stop: WatchStop,
                      onCreated: (Int64) -> Void, onEvents: ([EtcdEvent], Int64) -> Void) -> WatchEnd {
        let body = EtcdWire.encode(EtcdWire.watch(key, prefix: prefix, end: end, from: startRevision))
        let first = preferred.load(ordering: .relaxed)
        var failures: [String] = []
        for offset in 0..<endpoints.count {
            let index = (first + offset) % endpoints.count
            switch stream(endpoints[index], body: body, stop: stop, onCreated: onCreated, onEvents: onEvents) {
            case .notCreated(let why):
                failures.append("\(endpoints[index]): \(why)")
            case .ended(let end):
                // Not made preferred here: a watch stopped for being silent (a frozen member) must not
                // pull the requests back to that member. Requests keep `preferred` on one that answers.
                return end
            }
        }
        return .broken("no endpoint accepted the watch: " + failures.joined(separator: "; "))
    }

    private enum StreamOutcome {
        /// The watch never started here: try another endpoint.
        case notCreated(String)
        case ended(WatchEnd)
    }

    /// One watch stream, checked every 100 ms for `stop`.
    private func stream(_ endpoint: String, body: [UInt8], stop: WatchStop, onCreated: (Int64) -> Void,
                        onEvents: ([EtcdEvent], Int64) -> Void) -> StreamOutcome {
        guard let exchange = HTTPExchange(post(endpoint + "/v3/watch", body: body, timeout: nil)) else {
            return .ended(.broken("cannot set up the watch (out of memory)"))
        }
        var created = false
        // A member that accepts the connection but never answers (frozen) must not hold the watch:
        // without the "created" reply within the request timeout, try the next one.
        let createDeadline = ContinuousClock.now + requestTimeout
        // What one line of the stream means; nil: go on.
        func handle(_ line: [UInt8]) -> StreamOutcome? {
            let message: EtcdWire.WatchMessage
            do {
                message = try EtcdWire.watchMessage(line)
            } catch {
                return .ended(.broken("\(error)"))
            }
            switch message {
            case .created(let revision):
                created = true
                onCreated(revision)
            case .events(let events, let revision): onEvents(events, revision)
            case .progress: break
            case .compacted(let revision): return .ended(.compacted(revision))
            case .canceled(let why): return .ended(.broken(why))
            case .failed(.unavailable(let why)): return created ? .ended(.broken(why)) : .notCreated(why)
            case .failed(.final(let error)): return .ended(.broken("\(error)"))
            }
            return nil
        }
        let end = exchange.stream(checkEvery: .milliseconds(100), check: { () -> StreamOutcome? in
            if stop.isStopped { return .ended(.stopped) }
            if !created, ContinuousClock.now > createDeadline {
                return .notCreated("no reply to the watch within \(requestTimeout)")
            }
            return nil
        }, line: handle)
        switch end {
        case .stopped(let outcome): return outcome
        case .ended(let response):
            // A last line without its newline (a unary error reply).
            if !response.body.isEmpty, let outcome = handle(response.body) { return outcome }
            let why = response.failure?.message ?? "the stream ended (HTTP \(response.status ?? 0))"
            return created ? .ended(.broken(why)) : .notCreated(why)
        }
    }

    /// A POST of a JSON `body` to one endpoint, with this client's TLS files and connect timeout, never
    /// through a proxy. `timeout` nil: none (a stream).
    private func post(_ url: String, body: [UInt8], timeout: Duration?) -> HTTPRequest {
        HTTPRequest(
            url: url, method: "POST", headers: ["Content-Type: application/json"], body: body, timeout: timeout,
            connectTimeout: requestTimeout, tls: HTTPTLS(caFile: tls?.caFile, certFile: tls?.certFile, keyFile: tls?.keyFile),
            bypassProxy: true)
    }
}
