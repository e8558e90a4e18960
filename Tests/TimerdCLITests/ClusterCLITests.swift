import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol

/// A `CLUSTER` reply as timerd sends it: node b of two members, one waiting job, one etcd endpoint down.
private let clusterPayload = Payload.encode(ClusterInfo(
    node: "b", role: "member", tags: ["ssd"], problem: nil, lease: "694d7f3e2c1a0b09", lease_ttl: 10,
    lease_remaining: 8.24,
    members: [.init(name: "a", since: "2026-11-30T01:00:00Z", pid: 812, tags: [], jobs: 101),
              .init(name: "b", since: nil, pid: nil, tags: ["ssd"], jobs: 1)],
    shared_jobs: 103, waiting_jobs: 1, claims: .init(transactions: 412, fires: 1520, p50_ms: 2.14, p99_ms: 6.31), prefix: "/timerd/",
    etcd: [
        .init(url: "http://127.0.0.1:2379", healthy: true, member: "etcd-1", version: "3.4.23", is_leader: true, error: nil),
        .init(url: "http://127.0.0.1:2479", healthy: false, member: nil, version: nil, is_leader: false, error: "connection refused"),
    ]))

@Suite("timerctl cluster")
struct ClusterCLITests {
    @Test func clusterSendsTheVerbAlone() throws {
        #expect(try request(["cluster"]).encode() == "CLUSTER")
        #expect(CLIVerb.cluster.wireVerb == .cluster)
        #expect(throws: (any Error).self) { try CommandParser.parse(["cluster", "extra"]) }
    }

    @Test func textBlock() {
        let result = runCLI(["cluster"], reply: .success(.ok(clusterPayload)))
        #expect(result.status == 0)
        #expect(result.stdout == """
            node:     b (member)
            tags:     ssd
            lease:    694d7f3e2c1a0b09, ttl 10s, 8.2s left
            members:  a  pid 812  runs 101 jobs
                      b           runs 1 job     tags ssd
            jobs:     103 shared, under /timerd/; 1 waiting: no node runs it now (show says why)
            claims:   1520 fires in 412 transactions, round trip p50 2.1 ms, p99 6.3 ms
            etcd:     http://127.0.0.1:2379  healthy  etcd-1, raft leader, 3.4.23
                      http://127.0.0.1:2479  unavailable: connection refused

            """)
    }

    @Test func unavailableSaysSoWithTheProblem() {
        var info = try! Payload.decode(ClusterInfo.self, from: clusterPayload)
        info.role = "unavailable"
        info.problem = "http://127.0.0.1:2379: timed out"
        info.tags = []
        info.lease_remaining = 0
        #expect(ClusterText.block(info).contains("\nlease:    694d7f3e2c1a0b09, ttl 10s, not renewed in time (expired?)\n"))
        info.lease = nil
        info.lease_remaining = nil
        let text = ClusterText.block(info)
        #expect(text.hasPrefix("node:     b (etcd unavailable)\nproblem:  http://127.0.0.1:2379: timed out\nlease:    none (ttl 10s)\n"))
    }

    @Test func jsonIsThePayloadAsSent() {
        #expect(runCLI(["cluster", "--json"], reply: .success(.ok(clusterPayload))).stdout == clusterPayload + "\n")
    }

    @Test func notInClusterModeIsAnErrorExit() {
        let result = runCLI(["cluster"], reply: .success(.err(code: "bad-argument", message: "timerd is not in cluster mode")))
        #expect(result.status == 1)
        #expect(result.stderr == "timerctl: timerd is not in cluster mode (bad-argument)\n")
    }
}
