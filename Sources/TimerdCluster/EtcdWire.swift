import Foundation

/// etcd's v3 JSON gateway (grpc-gateway), as etcd 3.4.23 speaks it: what the client sends and how it reads
/// the replies. Verified against a real 3-member etcd 3.4.23 on loopback with curl:
///
/// - Every call is `POST /v3/<service>/<method>` with a JSON body. Keys, values and range ends are base64
///   (standard alphabet, padded). int64/uint64 fields come back as JSON strings (`"revision":"12"`,
///   `"ID":"4465778806878309651"`); requests accept strings or numbers, so this client sends strings (lease
///   IDs exceed 2^53). Fields with their zero value are omitted: an empty value has no `"value"`, a
///   failed txn has no `"succeeded"`, a range with no match has no `"kvs"` and no `"count"`, a delete of
///   nothing no `"deleted"`, a key without lease no `"lease"`.
/// - Every successful reply carries `"header":{"cluster_id","member_id","revision","raft_term"}` (member
///   list: no revision). Range: `"kvs":[{"key","create_revision","mod_revision","version","value","lease"}]`.
///   Txn: `"responses":[{"response_put":{…}}|{"response_range":{…}}|{"response_delete_range":{…}}]` for
///   the branch that ran; compare targets and results are enum names (`"target":"CREATE"`, `"MOD"`,
///   `"VALUE"`, `"VERSION"`; `"result":"EQUAL"`).
/// - A unary error: HTTP 4xx/5xx with `{"error":"<msg>","message":"<msg>","code":<grpc code>}`; e.g.
///   lease not found: 404, code 5, "etcdserver: requested lease not found"; compacted: 400, code 11.
///   Without quorum a linearizable range fails after about 7 s with 503, code 14 "etcdserver: request
///   timed out", a put or lease grant with 500, code 2 "context deadline exceeded" (both far beyond any
///   sensible request timeout, so in practice the client's own timeout fires first). Maintenance status
///   answers at once even then, with `"errors":["etcdserver: no leader"]` and no `"leader"`.
/// - Streaming calls (`/v3/watch`, `/v3/lease/keepalive`) answer HTTP 200 with chunked transfer encoding,
///   one JSON object per line (`\n`-terminated), each `{"result":{…}}`, or on failure
///   `{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"…"}}`.
///   The stream ends when the request body ends, so a keepalive POST of one request gets one reply.
///   Keepalive of an unknown or expired lease: `{"result":{"header":…,"ID":"…"}}` with no `"TTL"` (0).
/// - Watch: the request is `{"create_request":{"key","range_end","start_revision"}}`; the first line is
///   `{"result":{"header":{…,"revision":"N"},"created":true}}`, then one line per batch of events:
///   `"events":[{"kv":{…}}, {"type":"DELETE","kv":{"key","mod_revision"}}]` — a PUT event has no
///   `"type"` (PUT is the enum's zero). A start revision at or below the compaction: after `created`, a
///   line `{"result":{"header":{…},"canceled":true,"compact_revision":"10"}}`.
/// - `GET /health`: `{"health":"true"}` (200) or `{"health":"false"}` (503, e.g. without quorum).
enum EtcdWire {
    // MARK: Requests

    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }
    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// The range end that makes `key` a prefix: the key with its last byte below 0xff incremented and
    /// what follows dropped; `\0` (every key from `key` on) when there is no such byte.
    static func prefixEnd(_ key: String) -> [UInt8] {
        var bytes = Array(key.utf8)
        while let last = bytes.last {
            if last < 0xff {
                bytes[bytes.count - 1] = last + 1
                return bytes
            }
            bytes.removeLast()
        }
        return [0]
    }

    /// `key`, and `range_end` when `prefix`.
    static func range(_ key: String, prefix: Bool) -> [String: Any] {
        var request: [String: Any] = ["key": base64(key)]
        if prefix { request["range_end"] = base64(prefixEnd(key)) }
        return request
    }

    static func put(_ key: String, value: [UInt8], lease: Int64) -> [String: Any] {
        var request: [String: Any] = ["key": base64(key), "value": base64(value)]
        if lease != 0 { request["lease"] = String(lease) }
        return request
    }

    static func compare(_ compare: EtcdCompare) -> [String: Any] {
        switch compare {
        case .value(let key, let value):
            ["key": base64(key), "target": "VALUE", "result": "EQUAL", "value": base64(value)]
        case .modRevision(let key, let revision):
            ["key": base64(key), "target": "MOD", "result": "EQUAL", "mod_revision": String(revision)]
        case .createRevision(let key, let revision):
            ["key": base64(key), "target": "CREATE", "result": "EQUAL", "create_revision": String(revision)]
        case .version(let key, let version):
            ["key": base64(key), "target": "VERSION", "result": "EQUAL", "version": String(version)]
        }
    }

    static func operation(_ operation: EtcdOperation) -> [String: Any] {
        switch operation {
        case .put(let key, let value, let lease): ["request_put": put(key, value: value, lease: lease)]
        case .delete(let key, let prefix): ["request_delete_range": range(key, prefix: prefix)]
        case .get(let key, let prefix): ["request_range": range(key, prefix: prefix)]
        }
    }

    static func txn(compare: [EtcdCompare], success: [EtcdOperation], failure: [EtcdOperation]) -> [String: Any] {
        ["compare": compare.map(Self.compare), "success": success.map(operation), "failure": failure.map(operation)]
    }

    static func watch(_ key: String, prefix: Bool, from revision: Int64) -> [String: Any] {
        var request = range(key, prefix: prefix)
        if revision > 0 { request["start_revision"] = String(revision) }
        return ["create_request": request]
    }

    /// The body: compact JSON, keys sorted.
    static func encode(_ object: [String: Any]) -> [UInt8] {
        // Only strings, booleans, arrays and dictionaries of them: cannot fail.
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Array(data)
    }

    // MARK: Replies

    static func object(_ bytes: some Collection<UInt8>) throws(EtcdError) -> [String: Any] {
        guard let value = try? JSONSerialization.jsonObject(with: Data(bytes)), let object = value as? [String: Any] else {
            throw .protocolError("not a JSON object: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        }
        return object
    }

    /// An int64 field: a JSON string (what etcd sends) or number; 0 when absent (omitted zero).
    static func int64(_ value: Any?) throws(EtcdError) -> Int64 { try integer(value, "an int64") }

    /// A uint64 field (member IDs), like `int64`.
    static func uint64(_ value: Any?) throws(EtcdError) -> UInt64 { try integer(value, "a uint64") }

    private static func integer<T: FixedWidthInteger>(_ value: Any?, _ name: String) throws(EtcdError) -> T {
        let text: String
        switch value {
        case nil: return 0
        case let string as String: text = string
        case let number as NSNumber: text = number.stringValue
        case let other?: text = "\(other)"
        }
        guard let number = T(text) else { throw .protocolError("not \(name): \(text)") }
        return number
    }

    static func bytes(_ value: Any?) throws(EtcdError) -> [UInt8] {
        guard let value else { return [] }
        guard let text = value as? String, let data = Data(base64Encoded: text) else {
            throw .protocolError("not base64: \(value)")
        }
        return Array(data)
    }

    static func revision(_ reply: [String: Any]) throws(EtcdError) -> Int64 {
        try int64((reply["header"] as? [String: Any])?["revision"])
    }

    static func keyValue(_ value: Any) throws(EtcdError) -> EtcdKeyValue {
        guard let kv = value as? [String: Any] else { throw .protocolError("not a key-value: \(value)") }
        return EtcdKeyValue(
            key: String(decoding: try bytes(kv["key"]), as: UTF8.self), value: try bytes(kv["value"]),
            createRevision: try int64(kv["create_revision"]), modRevision: try int64(kv["mod_revision"]),
            version: try int64(kv["version"]), lease: try int64(kv["lease"]))
    }

    static func keyValues(_ reply: [String: Any]) throws(EtcdError) -> [EtcdKeyValue] {
        guard let kvs = reply["kvs"] else { return [] }
        guard let list = kvs as? [Any] else { throw .protocolError("kvs is not a list") }
        var result: [EtcdKeyValue] = []
        for kv in list { result.append(try keyValue(kv)) }
        return result
    }

    /// A txn reply: `succeeded` (absent: false), and the ranges of the branch that ran.
    static func txnResult(_ reply: [String: Any]) throws(EtcdError) -> EtcdTxnResult {
        var ranges: [[EtcdKeyValue]] = []
        for response in reply["responses"] as? [Any] ?? [] {
            if let range = (response as? [String: Any])?["response_range"] as? [String: Any] {
                ranges.append(try keyValues(range))
            }
        }
        return EtcdTxnResult(succeeded: reply["succeeded"] as? Bool ?? false, revision: try revision(reply), ranges: ranges)
    }

    static func event(_ value: Any) throws(EtcdError) -> EtcdEvent {
        guard let event = value as? [String: Any], let kv = event["kv"] else { throw .protocolError("not an event: \(value)") }
        let kind: EtcdEvent.Kind
        switch event["type"] as? String {
        case nil, "PUT": kind = .put
        case "DELETE": kind = .delete
        case let other: throw .protocolError("unknown event type \(other!)")
        }
        return EtcdEvent(kind: kind, kv: try keyValue(kv))
    }

    static func members(_ reply: [String: Any]) throws(EtcdError) -> [EtcdMember] {
        var result: [EtcdMember] = []
        for value in reply["members"] as? [Any] ?? [] {
            guard let member = value as? [String: Any] else { throw .protocolError("not a member: \(value)") }
            result.append(EtcdMember(
                id: try uint64(member["ID"]), name: member["name"] as? String ?? "",
                clientURLs: member["clientURLs"] as? [String] ?? []))
        }
        return result
    }

    static func status(_ reply: [String: Any], endpoint: String) throws(EtcdError) -> EtcdEndpointStatus {
        let header = reply["header"] as? [String: Any] ?? [:]
        let errors = reply["errors"] as? [String] ?? []
        let leader = try uint64(reply["leader"])
        let error = errors.isEmpty ? (leader == 0 ? "no leader" : nil) : errors.joined(separator: "; ")
        return EtcdEndpointStatus(
            endpoint: endpoint, healthy: error == nil, leaderID: leader, memberID: try uint64(header["member_id"]),
            raftTerm: try uint64(reply["raftTerm"]), version: reply["version"] as? String ?? "", error: error)
    }

    // MARK: Errors

    /// What an error reply means for the caller.
    enum Failure: Equatable {
        /// Try another endpoint: this one cannot serve now (no leader, no quorum, overloaded, ...).
        case unavailable(String)
        /// The answer: retrying elsewhere would give the same.
        case final(EtcdError)
    }

    /// The error in a reply with HTTP status `status`, nil when it is a success. Both shapes: unary
    /// `{"error":"msg","message":"msg","code":N}` and streaming `{"error":{"grpc_code":N,"message":"msg",…}}`.
    static func failure(_ reply: [String: Any], status: Int) -> Failure? {
        let message: String
        let code: Int
        switch reply["error"] {
        case nil:
            guard status >= 400 else { return nil }
            return status >= 500 ? .unavailable("HTTP \(status)") : .final(.server("HTTP \(status)"))
        case let text as String:
            message = reply["message"] as? String ?? text
            code = (reply["code"] as? NSNumber)?.intValue ?? 0
        case let details as [String: Any]:
            message = details["message"] as? String ?? "\(details)"
            code = (details["grpc_code"] as? NSNumber)?.intValue ?? 0
        case let other?:
            message = "\(other)"
            code = 0
        }
        return failure(code: code, message: message)
    }

    /// gRPC codes: 4 DEADLINE_EXCEEDED, 5 NOT_FOUND, 8 RESOURCE_EXHAUSTED, 14 UNAVAILABLE.
    static func failure(code: Int, message: String) -> Failure {
        if message.contains("lease not found") { return .final(.leaseNotFound) }
        let availability = ["no leader", "request timed out", "leader changed", "context deadline exceeded",
                            "not capable", "too many requests", "stopped", "timed out"]
        if code == 4 || code == 14 || code == 8 || availability.contains(where: message.contains) {
            return .unavailable(message)
        }
        return .final(.server(message))
    }

    // MARK: Watch stream

    enum WatchMessage: Equatable {
        case created(revision: Int64)
        case events([EtcdEvent], revision: Int64)
        /// Progress notification (no events).
        case progress(revision: Int64)
        case compacted(Int64)
        case canceled(String)
        case failed(Failure)
    }

    static func watchMessage(_ line: some Collection<UInt8>) throws(EtcdError) -> WatchMessage {
        let message = try object(line)
        if let failure = failure(message, status: 200) { return .failed(failure) }
        guard let result = message["result"] as? [String: Any] else { throw .protocolError("watch message without result") }
        let revision = try revision(result)
        if result["canceled"] as? Bool == true {
            let compacted = try int64(result["compact_revision"])
            if compacted > 0 { return .compacted(compacted) }
            return .canceled(result["cancel_reason"] as? String ?? "canceled by the server")
        }
        if result["created"] as? Bool == true { return .created(revision: revision) }
        guard let list = result["events"] as? [Any] else { return .progress(revision: revision) }
        var events: [EtcdEvent] = []
        for event in list { events.append(try Self.event(event)) }
        return .events(events, revision: revision)
    }
}
