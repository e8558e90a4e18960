import FoundationEssentials
import TimerdProtocol

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
///
/// Requests and replies are Codable types below, encoded and decoded by `Payload` (TimerdProtocol), the
/// daemon's one JSON codec. A reply is decoded as one `Reply` whatever the call: every field optional,
/// and integers kept as their text until read (`int64`, `uint64`), so a field the caller never reads
/// cannot fail a call.
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

    /// `key`, and `range_end` when `prefix` (range, delete range).
    struct RangeRequest: Encodable, Equatable {
        var key: String
        var range_end: String?
        var start_revision: String?
    }

    struct PutRequest: Encodable, Equatable {
        var key: String
        var value: String
        var lease: String?
    }

    struct Compare: Encodable, Equatable {
        var key: String
        var target: String
        var result = "EQUAL"
        var value: String?
        var mod_revision: String?
        var create_revision: String?
        var version: String?
    }

    /// One operation of a txn branch: exactly one field set.
    struct Operation: Encodable, Equatable {
        var request_put: PutRequest?
        var request_delete_range: RangeRequest?
        var request_range: RangeRequest?
    }

    struct TxnRequest: Encodable, Equatable {
        var compare: [Compare]
        var success: [Operation]
        var failure: [Operation]
    }

    struct WatchRequest: Encodable, Equatable {
        var create_request: RangeRequest
    }

    /// Lease grant (`TTL`), keepalive and revoke (`ID`): int64s as strings.
    struct LeaseRequest: Encodable, Equatable {
        var id: String?
        var ttl: String?
        enum CodingKeys: String, CodingKey { case id = "ID", ttl = "TTL" }
    }

    /// `{}`: member list, status.
    struct EmptyRequest: Encodable, Equatable {}

    static func range(_ key: String, prefix: Bool) -> RangeRequest {
        RangeRequest(key: base64(key), range_end: prefix ? base64(prefixEnd(key)) : nil)
    }

    static func put(_ key: String, value: [UInt8], lease: Int64) -> PutRequest {
        PutRequest(key: base64(key), value: base64(value), lease: lease != 0 ? String(lease) : nil)
    }

    static func compare(_ compare: EtcdCompare) -> Compare {
        switch compare {
        case .value(let key, let value): Compare(key: base64(key), target: "VALUE", value: base64(value))
        case .modRevision(let key, let revision): Compare(key: base64(key), target: "MOD", mod_revision: String(revision))
        case .createRevision(let key, let revision): Compare(key: base64(key), target: "CREATE", create_revision: String(revision))
        case .version(let key, let version): Compare(key: base64(key), target: "VERSION", version: String(version))
        }
    }

    static func operation(_ operation: EtcdOperation) -> Operation {
        switch operation {
        case .put(let key, let value, let lease): Operation(request_put: put(key, value: value, lease: lease))
        case .delete(let key, let prefix): Operation(request_delete_range: range(key, prefix: prefix))
        case .get(let key, let prefix): Operation(request_range: range(key, prefix: prefix))
        }
    }

    static func txn(compare: [EtcdCompare], success: [EtcdOperation], failure: [EtcdOperation]) -> TxnRequest {
        TxnRequest(compare: compare.map(Self.compare), success: success.map(operation), failure: failure.map(operation))
    }

    static func watch(_ key: String, prefix: Bool, end: String? = nil, from revision: Int64) -> WatchRequest {
        var request = range(key, prefix: prefix)
        if let end { request.range_end = base64(Array(end.utf8)) }
        if revision > 0 { request.start_revision = String(revision) }
        return WatchRequest(create_request: request)
    }

    /// The body: compact JSON, keys sorted.
    static func encode(_ request: some Encodable) -> [UInt8] { Array(Payload.encode(request).utf8) }

    // MARK: Replies

    /// Any reply of the gateway, streamed lines included (their `result`): the fields of every call, each
    /// optional (etcd omits zero values). Unknown fields are ignored.
    struct Reply: Decodable, Equatable {
        var header: Header?
        // Range, txn, delete range.
        var kvs: [KeyValue]?
        var succeeded: Bool?
        var responses: [TxnResponse]?
        var deleted: Integer?
        // Lease grant, keepalive (in `result`).
        var id: Integer?
        var ttl: Integer?
        // Member list; maintenance status.
        var members: [Member]?
        var leader: Integer?
        var raftTerm: Integer?
        var version: String?
        var errors: [String]?
        // Streams: each line's `result`.
        var result: Result?
        // A unary error (`error`, `message`, `code`) or a stream's (`error` as an object).
        var error: ErrorField?
        var message: String?
        var code: Integer?

        enum CodingKeys: String, CodingKey {
            case header, kvs, succeeded, responses, deleted, id = "ID", ttl = "TTL", members, leader, raftTerm, version,
                 errors, result, error, message, code
        }
    }

    /// The `result` of a streamed line: a watch message, or a keepalive's reply.
    struct Result: Decodable, Equatable {
        var header: Header?
        var created: Bool?
        var canceled: Bool?
        var compact_revision: Integer?
        var cancel_reason: String?
        var events: [Event]?
        var id: Integer?
        var ttl: Integer?

        enum CodingKeys: String, CodingKey {
            case header, created, canceled, compact_revision, cancel_reason, events, id = "ID", ttl = "TTL"
        }
    }

    struct Header: Decodable, Equatable {
        var revision: Integer?
        var member_id: Integer?
    }

    struct KeyValue: Decodable, Equatable {
        var key: String?
        var value: String?
        var create_revision: Integer?
        var mod_revision: Integer?
        var version: Integer?
        var lease: Integer?
    }

    struct TxnResponse: Decodable, Equatable {
        var response_range: Reply?
    }

    struct Event: Decodable, Equatable {
        var type: String?
        var kv: KeyValue?
    }

    struct Member: Decodable, Equatable {
        var id: Integer?
        var name: String?
        var clientURLs: [String]?
        enum CodingKeys: String, CodingKey { case id = "ID", name, clientURLs }
    }

    /// An integer field as its text: etcd sends int64 and uint64 as JSON strings; a JSON number is taken
    /// too. Read with `int64`/`uint64`, which say when it is not one.
    struct Integer: Decodable, Equatable {
        var text: String

        init(_ text: String) { self.text = text }

        init(from decoder: any Decoder) throws {
            let value = try decoder.singleValueContainer()
            if let text = try? value.decode(String.self) {
                self.text = text
            } else if let number = try? value.decode(Int64.self) {
                text = String(number)
            } else if let number = try? value.decode(UInt64.self) {
                text = String(number)
            } else {
                text = String(try value.decode(Double.self))
            }
        }
    }

    /// `error`: a string (unary replies, with `message` and `code` beside it) or an object (streams).
    enum ErrorField: Decodable, Equatable {
        case text(String)
        case details(message: String?, code: Integer?)

        private struct Details: Decodable {
            var message: String?
            var grpc_code: Integer?
        }

        init(from decoder: any Decoder) throws {
            let value = try decoder.singleValueContainer()
            if let text = try? value.decode(String.self) {
                self = .text(text)
            } else {
                let details = try value.decode(Details.self)
                self = .details(message: details.message, code: details.grpc_code)
            }
        }
    }

    static func object(_ bytes: some Collection<UInt8>) throws(EtcdError) -> Reply {
        guard let reply = try? Payload.decode(Reply.self, from: bytes) else {
            throw .protocolError("not a JSON object: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        }
        return reply
    }

    /// An int64 field: 0 when absent (omitted zero).
    static func int64(_ value: Integer?) throws(EtcdError) -> Int64 { try integer(value?.text, "an int64") }
    static func int64(_ text: String?) throws(EtcdError) -> Int64 { try integer(text, "an int64") }

    /// A uint64 field (member IDs), like `int64`.
    static func uint64(_ value: Integer?) throws(EtcdError) -> UInt64 { try integer(value?.text, "a uint64") }

    private static func integer<T: FixedWidthInteger>(_ text: String?, _ name: String) throws(EtcdError) -> T {
        guard let text else { return 0 }
        guard let number = T(text) else { throw .protocolError("not \(name): \(text)") }
        return number
    }

    static func bytes(_ value: String?) throws(EtcdError) -> [UInt8] {
        guard let value else { return [] }
        guard let data = Data(base64Encoded: value) else { throw .protocolError("not base64: \(value)") }
        return Array(data)
    }

    static func revision(_ reply: Reply) throws(EtcdError) -> Int64 { try int64(reply.header?.revision) }

    static func keyValue(_ kv: KeyValue) throws(EtcdError) -> EtcdKeyValue {
        EtcdKeyValue(
            key: String(decoding: try bytes(kv.key), as: UTF8.self), value: try bytes(kv.value),
            createRevision: try int64(kv.create_revision), modRevision: try int64(kv.mod_revision),
            version: try int64(kv.version), lease: try int64(kv.lease))
    }

    static func keyValues(_ reply: Reply) throws(EtcdError) -> [EtcdKeyValue] {
        var result: [EtcdKeyValue] = []
        for kv in reply.kvs ?? [] { result.append(try keyValue(kv)) }
        return result
    }

    /// A txn reply: `succeeded` (absent: false), and the ranges of the branch that ran.
    static func txnResult(_ reply: Reply) throws(EtcdError) -> EtcdTxnResult {
        var ranges: [[EtcdKeyValue]] = []
        for response in reply.responses ?? [] {
            if let range = response.response_range { ranges.append(try keyValues(range)) }
        }
        return EtcdTxnResult(succeeded: reply.succeeded ?? false, revision: try revision(reply), ranges: ranges)
    }

    static func event(_ event: Event) throws(EtcdError) -> EtcdEvent {
        guard let kv = event.kv else { throw .protocolError("an event without kv") }
        let kind: EtcdEvent.Kind
        switch event.type {
        case nil, "PUT": kind = .put
        case "DELETE": kind = .delete
        case let other: throw .protocolError("unknown event type \(other!)")
        }
        return EtcdEvent(kind: kind, kv: try keyValue(kv))
    }

    static func members(_ reply: Reply) throws(EtcdError) -> [EtcdMember] {
        var result: [EtcdMember] = []
        for member in reply.members ?? [] {
            result.append(EtcdMember(id: try uint64(member.id), name: member.name ?? "", clientURLs: member.clientURLs ?? []))
        }
        return result
    }

    static func status(_ reply: Reply, endpoint: String) throws(EtcdError) -> EtcdEndpointStatus {
        let errors = reply.errors ?? []
        let leader = try uint64(reply.leader)
        let error = errors.isEmpty ? (leader == 0 ? "no leader" : nil) : errors.joined(separator: "; ")
        return EtcdEndpointStatus(
            endpoint: endpoint, healthy: error == nil, leaderID: leader, memberID: try uint64(reply.header?.member_id),
            raftTerm: try uint64(reply.raftTerm), version: reply.version ?? "", error: error)
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
    static func failure(_ reply: Reply, status: Int) -> Failure? {
        let message: String
        let code: Int
        switch reply.error {
        case nil:
            guard status >= 400 else { return nil }
            return status >= 500 ? .unavailable("HTTP \(status)") : .final(.server("HTTP \(status)"))
        case .text(let text)?:
            message = reply.message ?? text
            code = reply.code.flatMap { Int($0.text) } ?? 0
        case .details(let text, let number)?:
            message = text ?? "an error without a message"
            code = number.flatMap { Int($0.text) } ?? 0
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
        guard let result = message.result else { throw .protocolError("watch message without result") }
        let revision = try int64(result.header?.revision)
        if result.canceled == true {
            let compacted = try int64(result.compact_revision)
            if compacted > 0 { return .compacted(compacted) }
            return .canceled(result.cancel_reason ?? "canceled by the server")
        }
        if result.created == true { return .created(revision: revision) }
        guard let list = result.events else { return .progress(revision: revision) }
        var events: [EtcdEvent] = []
        for event in list { events.append(try Self.event(event)) }
        return .events(events, revision: revision)
    }
}
