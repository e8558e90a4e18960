import Testing
@testable import TimerdCluster

/// The JSON pieces of the etcd client, without etcd: requests as the gateway wants them and replies as
/// etcd 3.4.23 sent them (copied from real replies).
@Suite struct EtcdWireTests {
    private func json(_ request: some Encodable) -> String { String(decoding: EtcdWire.encode(request), as: UTF8.self) }
    private func reply(_ text: String) throws -> EtcdWire.Reply { try EtcdWire.object(Array(text.utf8)) }

    @Test func prefixEnd() {
        #expect(EtcdWire.prefixEnd("foo/") == Array("foo0".utf8))
        #expect(EtcdWire.prefixEnd("a") == Array("b".utf8))
        #expect(EtcdWire.prefixEnd("") == [0])
        #expect(EtcdWire.prefixEnd("ÿ") == Array("ÿ".utf8).dropLast() + [0xc0])
    }

    @Test func rangeAndPutRequests() {
        #expect(json(EtcdWire.range("foo/a", prefix: false)) == #"{"key":"Zm9vL2E="}"#)
        #expect(json(EtcdWire.range("foo/", prefix: true)) == #"{"key":"Zm9vLw==","range_end":"Zm9vMA=="}"#)
        #expect(json(EtcdWire.put("foo/a", value: Array("hello".utf8), lease: 0)) == #"{"key":"Zm9vL2E=","value":"aGVsbG8="}"#)
        #expect(json(EtcdWire.put("k", value: [], lease: 4465778806878309651))
            == #"{"key":"aw==","lease":"4465778806878309651","value":""}"#)
    }

    @Test func txnRequest() {
        let body = EtcdWire.txn(
            compare: [.createRevision("lock", equals: 0), .modRevision("lock", equals: 5), .value("lock", equals: Array("me".utf8)),
                      .version("lock", equals: 2)],
            success: [.put("lock", value: Array("me".utf8)), .get("foo/", prefix: true)],
            failure: [.delete("lock")])
        #expect(json(body) == #"{"compare":[{"create_revision":"0","key":"bG9jaw==","result":"EQUAL","target":"CREATE"},"#
            + #"{"key":"bG9jaw==","mod_revision":"5","result":"EQUAL","target":"MOD"},"#
            + #"{"key":"bG9jaw==","result":"EQUAL","target":"VALUE","value":"bWU="},"#
            + #"{"key":"bG9jaw==","result":"EQUAL","target":"VERSION","version":"2"}],"#
            + #""failure":[{"request_delete_range":{"key":"bG9jaw=="}}],"#
            + #""success":[{"request_put":{"key":"bG9jaw==","value":"bWU="}},{"request_range":{"key":"Zm9vLw==","range_end":"Zm9vMA=="}}]}"#)
    }

    @Test func watchRequest() {
        #expect(json(EtcdWire.watch("w/", prefix: true, from: 0)) == #"{"create_request":{"key":"dy8=","range_end":"dzA="}}"#)
        #expect(json(EtcdWire.watch("w", prefix: false, from: 12)) == #"{"create_request":{"key":"dw==","start_revision":"12"}}"#)
        // A range [key, end): cluster mode watches jobs/ to reports/ ("p/jobs/" to "p/reports0").
        #expect(json(EtcdWire.watch("p/jobs/", prefix: false, end: "p/reports0", from: 5))
            == #"{"create_request":{"key":"cC9qb2JzLw==","range_end":"cC9yZXBvcnRzMA==","start_revision":"5"}}"#)
    }

    @Test func rangeReply() throws {
        let text = #"{"header":{"cluster_id":"15585286973170400446","member_id":"4525095243131993593","revision":"3","raft_term":"2"},"#
            + #""kvs":[{"key":"Zm9vL2E=","create_revision":"2","mod_revision":"2","version":"1","value":"aGVsbG8="},"#
            + #"{"key":"Zm9vL2I=","create_revision":"3","mod_revision":"3","version":"1","lease":"4465778806878309656"}],"count":"2"}"#
        let object = try reply(text)
        #expect(try EtcdWire.revision(object) == 3)
        #expect(try EtcdWire.keyValues(object) == [
            EtcdKeyValue(key: "foo/a", value: Array("hello".utf8), createRevision: 2, modRevision: 2, version: 1),
            EtcdKeyValue(key: "foo/b", value: [], createRevision: 3, modRevision: 3, version: 1, lease: 4465778806878309656),
        ])
        // No match: no kvs at all.
        #expect(try EtcdWire.keyValues(reply(#"{"header":{"revision":"3"}}"#)) == [])
    }

    @Test func txnReplies() throws {
        let succeeded = try reply(#"{"header":{"revision":"5"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"5"}}},"#
            + #"{"response_range":{"header":{"revision":"5"},"kvs":[{"key":"Zm9vL2E=","create_revision":"2","mod_revision":"2","version":"1","value":"aGVsbG8="}],"count":"1"}}]}"#)
        let result = try EtcdWire.txnResult(succeeded)
        #expect(result.succeeded && result.revision == 5)
        #expect(result.ranges.map { $0.map(\.key) } == [["foo/a"]])
        // A failed compare: "succeeded" omitted; an empty range still counts as one.
        let failed = try EtcdWire.txnResult(reply(#"{"header":{"revision":"5"},"responses":[{"response_range":{"header":{"revision":"5"}}},"#
            + #"{"response_delete_range":{"header":{"revision":"5"}}}]}"#))
        #expect(!failed.succeeded && failed.ranges == [[]])
    }

    @Test func errors() throws {
        let lease = try reply(#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#)
        #expect(EtcdWire.failure(lease, status: 404) == .final(.leaseNotFound))
        let timedOut = try reply(#"{"error":"etcdserver: request timed out","message":"etcdserver: request timed out","code":14}"#)
        #expect(EtcdWire.failure(timedOut, status: 503) == .unavailable("etcdserver: request timed out"))
        let deadline = try reply(#"{"error":"context deadline exceeded","message":"context deadline exceeded","code":2}"#)
        #expect(EtcdWire.failure(deadline, status: 500) == .unavailable("context deadline exceeded"))
        let stream = try reply(#"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}}"#)
        #expect(EtcdWire.failure(stream, status: 503) == .unavailable("etcdserver: no leader"))
        let compacted = try reply(#"{"error":"etcdserver: mvcc: required revision has been compacted","message":"etcdserver: mvcc: required revision has been compacted","code":11}"#)
        #expect(EtcdWire.failure(compacted, status: 400) == .final(.server("etcdserver: mvcc: required revision has been compacted")))
        #expect(EtcdWire.failure(try reply(#"{"header":{"revision":"1"}}"#), status: 200) == nil)
        #expect(throws: EtcdError.self) { try EtcdWire.object(Array("<html>".utf8)) }
        #expect(throws: EtcdError.protocolError("not an int64: x")) { try EtcdWire.int64("x") }
    }

    /// Integers as JSON numbers are read too; a malformed field fails only the call that reads it.
    @Test func numbersAndUnreadFields() throws {
        let numbers = try reply(#"{"header":{"revision":12,"member_id":18446744073709551615},"deleted":3,"code":"x"}"#)
        #expect(try EtcdWire.revision(numbers) == 12)
        #expect(try EtcdWire.uint64(numbers.header?.member_id) == UInt64.max)
        #expect(try EtcdWire.int64(numbers.deleted) == 3)
        let odd = try reply(#"{"header":{"revision":"7"},"leader":"not-a-number"}"#)
        #expect(try EtcdWire.revision(odd) == 7)
        #expect(throws: EtcdError.protocolError("not a uint64: not-a-number")) { try EtcdWire.uint64(odd.leader) }
        #expect(throws: EtcdError.self) { try EtcdWire.object(Array("[1]".utf8)) }
    }

    @Test func watchMessages() throws {
        func message(_ text: String) throws -> EtcdWire.WatchMessage { try EtcdWire.watchMessage(Array(text.utf8)) }
        #expect(try message(#"{"result":{"header":{"revision":"9","raft_term":"2"},"created":true}}"#) == .created(revision: 9))
        let events = try message(#"{"result":{"header":{"revision":"12"},"events":[{"kv":{"key":"dy8x","create_revision":"10","mod_revision":"11","version":"2","value":"dHdv"}},"#
            + #"{"type":"DELETE","kv":{"key":"dy8x","mod_revision":"12"}}]}}"#)
        #expect(events == .events([
            EtcdEvent(kind: .put, kv: EtcdKeyValue(key: "w/1", value: Array("two".utf8), createRevision: 10, modRevision: 11, version: 2)),
            EtcdEvent(kind: .delete, kv: EtcdKeyValue(key: "w/1", modRevision: 12)),
        ], revision: 12))
        #expect(try message(#"{"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"10"}}"#) == .compacted(10))
        #expect(try message(#"{"result":{"header":{"revision":"12"}}}"#) == .progress(revision: 12))
        #expect(try message(#"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}}"#)
            == .failed(.unavailable("etcdserver: no leader")))
    }

    @Test func membersAndStatus() throws {
        let members = try EtcdWire.members(reply(#"{"header":{"raft_term":"2"},"members":[{"ID":"2689007944515133300","name":"m1","#
            + #""peerURLs":["http://127.0.0.1:23810"],"clientURLs":["http://127.0.0.1:23791"]},{"ID":"16588156963783727007","name":"m2"}]}"#))
        #expect(members == [EtcdMember(id: 2689007944515133300, name: "m1", clientURLs: ["http://127.0.0.1:23791"]),
                            EtcdMember(id: 16588156963783727007, name: "m2", clientURLs: [])])
        let healthy = try EtcdWire.status(reply(#"{"header":{"member_id":"4525095243131993593","revision":"7"},"version":"3.4.23","#
            + #""leader":"16588156963783727007","raftIndex":"24","raftTerm":"2"}"#), endpoint: "e")
        #expect(healthy == EtcdEndpointStatus(endpoint: "e", healthy: true, leaderID: 16588156963783727007, memberID: 4525095243131993593,
                                              raftTerm: 2, version: "3.4.23", error: nil))
        let alone = try EtcdWire.status(reply(#"{"header":{"member_id":"4525095243131993593"},"version":"3.4.23","raftTerm":"2","#
            + #""errors":["etcdserver: no leader"]}"#), endpoint: "e")
        #expect(!alone.healthy && alone.error == "etcdserver: no leader" && alone.leaderID == 0)
    }
}
