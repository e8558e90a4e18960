import Dispatch
import Foundation
import Testing
import TimerdCluster
import TimerdSystem

/// The etcd client against a real 3-member etcd (`EtcdCluster`), one cluster per test. Serialized: each
/// test's cluster has the machine's two cores to itself as far as this suite goes, and the timing bounds
/// (a watch sees a write, a call gives up) stay far from flaky.
@Suite(.serialized) struct EtcdClientTests {
    private static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
    private static let clock = ContinuousClock()

    private func makeCluster() throws -> (EtcdCluster, EtcdClient) {
        let cluster = try EtcdCluster()
        print("etcd: 3-member cluster healthy after \(cluster.startDuration)")
        return (cluster, try EtcdClient(endpoints: cluster.clientURLs))
    }

    @Test func keyValuesTransactionsAndMembers() throws {
        let (cluster, client) = try makeCluster()
        let first = try client.put("jobs/a", Self.bytes("1"))
        let second = try client.put("jobs/b", Self.bytes("2"))
        try client.put("jobsx", [])
        #expect(second == first + 1)
        let (kvs, revision) = try client.get("jobs/a")
        #expect(kvs == [EtcdKeyValue(key: "jobs/a", value: Self.bytes("1"), createRevision: first, modRevision: first, version: 1)])
        #expect(revision == first + 2)
        #expect(try client.get("jobs/", prefix: true).kvs.map(\.key) == ["jobs/a", "jobs/b"])
        #expect(try client.get("jobsx").kvs.map(\.value) == [[]])
        #expect(try client.get("absent").kvs.isEmpty)
        let deleted = try client.delete("jobs/", prefix: true)
        #expect(deleted.deleted == 2 && deleted.revision == revision + 1)
        #expect(try client.delete("absent").deleted == 0)
        #expect(try client.get("jobs/", prefix: true).kvs.isEmpty)
        #expect(try client.get("jobsx").kvs.count == 1)

        // Create once: the second attempt fails and reads the owner in its failure branch.
        let create = { () throws(EtcdError) -> EtcdTxnResult in
            try client.txn(compare: [.createRevision("lock", equals: 0)],
                           success: [.put("lock", value: Self.bytes("me")), .get("lock")], failure: [.get("lock")])
        }
        let created = try create()
        #expect(created.succeeded && created.ranges.map { $0.map(\.valueString) } == [["me"]])
        let again = try create()
        #expect(!again.succeeded && again.revision == created.revision)
        let lock = try #require(again.ranges.first?.first)
        #expect(lock.valueString == "me" && lock.modRevision == created.revision)
        // Compare-and-swap on the modification revision: the first wins, a stale one loses.
        let swap = { (revision: Int64, value: String) throws(EtcdError) -> EtcdTxnResult in
            try client.txn(compare: [.modRevision("lock", equals: revision)], success: [.put("lock", value: Self.bytes(value))])
        }
        #expect(try swap(lock.modRevision, "you").succeeded)
        #expect(try !swap(lock.modRevision, "them").succeeded)
        #expect(try client.txn(compare: [.value("lock", equals: Self.bytes("you")), .version("lock", equals: 2)],
                               success: [.delete("lock")]).succeeded)
        #expect(try client.get("lock").kvs.isEmpty)

        let members = try client.members()
        #expect(members.map(\.name).sorted() == ["m0", "m1", "m2"])
        #expect(Set(members.flatMap(\.clientURLs)) == Set(cluster.clientURLs))
        let status = client.status()
        #expect(status.map(\.endpoint) == cluster.clientURLs)
        #expect(status.allSatisfy { $0.healthy && $0.error == nil && $0.version == "3.4.23" })
        #expect(Set(status.map(\.leaderID)).count == 1 && status[0].leaderID != 0)
        #expect(Set(status.map(\.memberID)) == Set(members.map(\.id)))
    }

    @Test func leases() throws {
        let (cluster, client) = try makeCluster()
        defer { withExtendedLifetime(cluster) {} }
        let kept = try client.grantLease(ttl: 2)
        let expiring = try client.grantLease(ttl: 2)
        #expect(kept.ttl == 2 && kept.id != expiring.id)
        try client.put("session/kept", Self.bytes("k"), lease: kept.id)
        try client.put("session/expiring", Self.bytes("e"), lease: expiring.id)
        #expect(try client.get("session/kept").kvs.first?.lease == kept.id)
        // The lease without keepalives expires (and its key goes); the other one is kept alive meanwhile.
        let started = Self.clock.now
        var lastKeepAlive = started
        let expired = try eventually(timeout: 15, "the lease without keepalives to expire") {
            if Self.clock.now - lastKeepAlive > .milliseconds(500) {
                #expect(try client.keepAlive(kept.id) == 2)
                lastKeepAlive = Self.clock.now
            }
            return try client.get("session/expiring").kvs.isEmpty
        }
        #expect(expired)
        print("etcd: a 2 s lease expired after \(Self.clock.now - started)")
        #expect(Self.clock.now - started >= .seconds(1))
        #expect(try client.get("session/kept").kvs.count == 1)
        #expect(throws: EtcdError.leaseNotFound) { try client.keepAlive(expiring.id) }
        #expect(throws: EtcdError.leaseNotFound) { try client.put("session/late", [], lease: expiring.id) }
        #expect(throws: EtcdError.leaseNotFound) { try client.keepAlive(12345) }
        try client.revoke(kept.id)
        #expect(try client.get("session/kept").kvs.isEmpty)
        #expect(throws: EtcdError.leaseNotFound) { try client.revoke(kept.id) }
    }

    @Test func watches() throws {
        let (cluster, client) = try makeCluster()
        try client.put("other", Self.bytes("x"))

        // From now: sees puts and deletes under the prefix, nothing else, promptly.
        let watch = WatchRun(client, "w/", from: 0)
        #expect(watch.waitCreated())
        let writing = Self.clock.now
        let first = try client.put("w/1", Self.bytes("one"))
        #expect(watch.waitEvents(1, within: 1))
        print("etcd: watch saw a put \(Self.clock.now - writing) after the put began")
        try client.put("other", Self.bytes("y"))
        let second = try client.put("w/2", Self.bytes("two"))
        let removed = try client.delete("w/1").revision
        #expect(watch.waitEvents(3, within: 1))
        #expect(watch.events == [
            EtcdEvent(kind: .put, kv: EtcdKeyValue(key: "w/1", value: Self.bytes("one"), createRevision: first, modRevision: first, version: 1)),
            EtcdEvent(kind: .put, kv: EtcdKeyValue(key: "w/2", value: Self.bytes("two"), createRevision: second, modRevision: second, version: 1)),
            EtcdEvent(kind: .delete, kv: EtcdKeyValue(key: "w/1", modRevision: removed)),
        ])
        // Stopping is noticed although nothing flows.
        let stopping = Self.clock.now
        #expect(watch.stopAndWait() == .stopped)
        let stopDelay = Self.clock.now - stopping
        print("etcd: watch stopped \(stopDelay) after its stop flag")
        #expect(stopDelay < .seconds(1))

        // Resuming from a revision replays what came after it.
        let resumed = WatchRun(client, "w/", from: first + 1)
        #expect(resumed.waitEvents(2, within: 2))
        #expect(resumed.events.map(\.kv.modRevision) == [second, removed])
        #expect(resumed.stopAndWait() == .stopped)

        // From a compacted revision: says so, with the oldest revision kept.
        let compaction = cluster.post(member: 0, "/v3/kv/compaction", #"{"revision":"\#(removed)","physical":true}"#)
        #expect(compaction?.contains("200 OK") == true)
        let compacted = WatchRun(client, "w/", from: first)
        #expect(compacted.wait(within: 5) == .compacted(removed))
    }

    @Test func failover() throws {
        let (cluster, client) = try makeCluster()
        try client.put("k", Self.bytes("0"))
        // One member down (the first, which the client prefers): everything goes through the others.
        var stopping = Self.clock.now
        cluster.stop(member: 0)
        print("etcd: member 0 stopped (SIGTERM to exit) in \(Self.clock.now - stopping)")
        try client.put("k", Self.bytes("1"))
        #expect(try client.get("k").kvs.first?.valueString == "1")
        #expect(try client.txn(compare: [.value("k", equals: Self.bytes("1"))], success: [.delete("k")]).succeeded)
        let lease = try client.grantLease(ttl: 5)
        #expect(try client.keepAlive(lease.id) > 0)
        #expect(try client.members().count == 3)
        let status = client.status()
        #expect(!status[0].healthy && status[0].error != nil)
        #expect(status[1].healthy && status[2].healthy)

        // Two down: no quorum; the call gives up within a few seconds and names every endpoint.
        stopping = Self.clock.now
        cluster.stop(member: 1)
        print("etcd: member 1 stopped (SIGTERM to exit) in \(Self.clock.now - stopping)")
        let started = Self.clock.now
        do {
            try client.put("k", Self.bytes("2"))
            Issue.record("put without quorum succeeded")
        } catch {
            guard case .unavailable(let why) = error else { throw error }
            #expect(cluster.clientURLs.allSatisfy(why.contains), "\(why)")
            print("etcd: put without quorum: unavailable after \(Self.clock.now - started): \(why)")
        }
        #expect(Self.clock.now - started < .seconds(10))
        let reading = Self.clock.now
        #expect { try client.get("k") } throws: { ($0 as? EtcdError).map { if case .unavailable = $0 { true } else { false } } ?? false }
        print("etcd: linearizable get without quorum: unavailable after \(Self.clock.now - reading)")
        #expect(Self.clock.now - reading < .seconds(10))
        #expect(client.status().filter(\.healthy).isEmpty)

        // Both back: writes work again once they have elected a leader.
        let restarted = Self.clock.now
        try cluster.start(member: 0)
        try cluster.start(member: 1)
        #expect(eventually(timeout: 30, "a put to succeed after the restart") { (try? client.put("k", Self.bytes("3"))) != nil })
        print("etcd: writes work again \(Self.clock.now - restarted) after restarting two members")
        #expect(try client.get("k").kvs.first?.valueString == "3")
    }
}

/// One `EtcdClient.watch` on a thread of its own, recording what it reports.
private final class WatchRun: Sendable {
    private let stop = WatchStop()
    private let created = DispatchSemaphore(value: 0)
    private let batches = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)
    private let state = Locked<(events: [EtcdEvent], end: WatchEnd?)>(([], nil))

    init(_ client: EtcdClient, _ key: String, from revision: Int64) {
        let thread = Thread { [self] in
            let end = client.watch(key, prefix: true, from: revision, stop: stop, onCreated: { _ in self.created.signal() },
                                   onEvents: { events, _ in
                                       self.state.withLock { $0.events += events }
                                       self.batches.signal()
                                   })
            state.withLock { $0.end = end }
            ended.signal()
        }
        thread.start()
    }

    var events: [EtcdEvent] { state.withLock { $0.events } }

    func waitCreated() -> Bool { created.wait(timeout: .now() + 10) == .success }

    /// Whether at least `count` events arrived, waiting at most `seconds` in all.
    func waitEvents(_ count: Int, within seconds: Double) -> Bool {
        let deadline = DispatchTime.now() + seconds
        while events.count < count {
            guard batches.wait(timeout: deadline) == .success else { return false }
        }
        return true
    }

    /// How the watch ended, waiting at most `seconds`; nil if it is still running.
    func wait(within seconds: Double) -> WatchEnd? {
        guard ended.wait(timeout: .now() + seconds) == .success else { return nil }
        return state.withLock { $0.end }
    }

    func stopAndWait() -> WatchEnd? {
        stop.stop()
        return wait(within: 5)
    }
}
