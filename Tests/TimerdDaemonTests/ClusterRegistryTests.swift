import Synchronization
import Testing
import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem
@testable import TimerdDaemon

/// A cluster gate whose claims the test decides: it records each claim and answers with `decide`.
final class FakeGate: ClusterGate {
    let node = "n1"
    let claims = Mutex<[(job: String, at: WallTime, triggered: Bool)]>([])
    let published = Mutex<[SharedRunRecord]>([])
    let decide: @Sendable (String, WallTime) -> ClaimOutcome

    init(decide: @escaping @Sendable (String, WallTime) -> ClaimOutcome = { _, _ in .won }) { self.decide = decide }

    func claim(_ job: JobName, at instant: WallTime, triggered: Bool, done: @escaping @Sendable (ClaimOutcome) -> Void) {
        claims.withLock { $0.append((job.rawValue, instant, triggered)) }
        done(decide(job.rawValue, instant))
    }

    func publishRun(_ job: JobName, _ record: SharedRunRecord) { published.withLock { $0.append(record) } }

    let declared = Mutex<[String]>([])
    func declare(configJobs: [String]) { declared.withLock { $0 = configJobs } }

    var claimCount: Int { claims.withLock { $0.count } }
}

/// The registry's side of cluster mode (Registry+Cluster.swift), without etcd.
@Suite struct ClusterRegistryTests {
    let launcher = FakeLauncher()
    let sink = MemoryLogSink()
    let clock = testClock()
    let registry: Registry

    init() {
        registry = Registry(launcher: launcher, log: Logger(sink: sink, minimum: .debug), maxRunning: 4, baseEnvironment: [], clock: clock)
    }

    func logged(_ text: String) -> Bool { sink.all.contains { $0.contains(text) } }

    func record(_ options: [(String, String)], paused: Bool = false, addedAt: WallTime? = nil) -> SharedJobRecord {
        SharedJobRecord(options: options.map { [$0.0, $0.1] }, paused: paused, added_at: (addedAt ?? clock.wallNow).nanosecondsSinceEpoch,
                        owner_uid: 0, node: "n2")
    }

    @Test func runtimeJobsAreSharedConfigJobsOnlyWithClusterYesOwnedJobsNever() async throws {
        #expect(await !registry.sharesJob(try spec("a", ["every": "1s", "command": "x"]), origin: .runtime), "no cluster")
        #expect(await !registry.metricsText().contains("timerd_cluster"))
        await registry.setCluster(FakeGate())
        #expect(await registry.sharesJob(try spec("a", ["every": "1s", "command": "x"]), origin: .runtime))
        #expect(await !registry.sharesJob(try spec("a", ["every": "1s", "command": "x", "cluster": "no"]), origin: .runtime))
        #expect(await !registry.sharesJob(try spec("a", ["every": "1s", "command": "x"]), origin: .config(file: "f", line: 1)))
        #expect(await registry.sharesJob(try spec("a", ["every": "1s", "command": "x", "cluster": "yes"]), origin: .config(file: "f", line: 1)))
        #expect(await !registry.sharesJob(try spec("a", ["every": "1s", "command": "x", "owner": "pid:42"]), origin: .runtime))
        // A job that follows another is shared, with or without a schedule of its own.
        #expect(await registry.sharesJob(try spec("a", ["after": "b", "command": "x"]), origin: .runtime))
        #expect(await registry.sharesJob(try spec("a", ["after": "b", "every": "1h", "command": "x"]), origin: .runtime))
    }

    @Test func aNodeKeepsOtherMembersJobsUnarmedAndRunsNothingOfThem() async throws {
        let gate = FakeGate()
        await registry.setCluster(gate)
        await registry.applyClusterView(role: .member, members: [ClusterMember(name: "n2")], claims: [:], reason: "test")
        await registry.applySharedJob(try JobName("s"), record([("every", "1s"), ("command", "x")]), revision: 5)
        let info = try await registry.show(JobName("s"))
        #expect(info.cluster && info.node == "n2" && info.state == .scheduled && info.next_fire != nil)
        // A fire reaching a follower (a timer that was armed when it led) is not claimed or run.
        await registry.fireScheduled(try JobName("s"), clock: clock)
        #expect(gate.claimCount == 0 && launcher.count == 0)
        #expect(await registry.statusLine().hasPrefix("cluster: 1 member, runs 0 of 1 shared job; 1 job"))
        // Its next fire, as shown here, follows the schedule though nothing fires here: the first grid time
        // after now (added 95 s ago, every 10s: added+100, unless this test is starved for seconds).
        let added = clock.wallNow + .seconds(-95)
        await registry.applySharedJob(try JobName("old"), record([("every", "10s"), ("command", "x")], addedAt: added), revision: 6)
        let before = clock.wallNow
        let next = try RFC3339.parse(try #require(try await registry.show(JobName("old")).next_fire))
        let offGrid = (next - added).nanoseconds % 10_000_000_000  // RFC 3339 keeps microseconds
        #expect((offGrid < 1_000 || offGrid > 10_000_000_000 - 1_000) && next > before && next <= clock.wallNow + .seconds(10), "\(next)")
    }

    @Test func theOwnerRunsAFireOnlyAfterWinningItsClaimWithTheClaimedInstant() async throws {
        let gate = FakeGate { job, _ in job == "won" ? .won : .lost("node n3 already claimed it") }
        await registry.setCluster(gate)
        await registry.applyClusterView(role: .member, members: [ClusterMember(name: "n1")], claims: [:], reason: "test")
        let added = WallTime(seconds: 1_800_000_000)
        clock.setWall(added)
        for name in ["won", "lost"] {
            await registry.applySharedJob(try JobName(name), record([("every", "10s"), ("command", "x")], addedAt: added), revision: 1)
        }
        // Handled 3 ms after the grid time (anchor = added + 10s): claimed under the grid time itself.
        let grid = added + .seconds(30)
        clock.advance(by: (grid - added) + .milliseconds(3))
        for name in ["won", "lost"] {
            let job = try #require(await registry.engine.job(JobName(name)))
            await registry.deliver(.deadlineReached(job.spec.name, jobID: job.id))
        }
        await settle(registry)
        #expect(gate.claims.withLock { $0.map(\.at) } == [grid, grid])
        #expect(launcher.count == 1)
        #expect(launcher.request(0).job == "won")
        #expect(launcher.request(0).environment["TIMERD_SCHEDULED_AT"] == RFC3339.format(grid))
        #expect(launcher.request(0).environment["TIMERD_NODE"] == "n1")
        #expect(logged("not run here: node n3 already claimed it"))
        // Its finished run is published for the other nodes.
        launcher.finish(0)
        await settle(registry)
        #expect(gate.published.withLock { $0.map(\.node) } == ["n1"])
        // A manual RUN needs no claim.
        #expect(try await registry.runNow(JobName("lost")) == "started")
        #expect(gate.claimCount == 2)
    }

    @Test func aSharedJobThatFollowsOneRunsOnItsOwnerOnceItsClaimIsWon() async throws {
        let gate = FakeGate()
        await registry.setCluster(gate)
        await registry.applyClusterView(role: .member, members: [ClusterMember(name: "n1")], claims: [:], reason: "test")
        let added = WallTime(seconds: 1_800_000_000)
        clock.setWall(added)
        await registry.applySharedJob(try JobName("up"), record([("every", "10s"), ("command", "x")], addedAt: added), revision: 1)
        await registry.applySharedJob(try JobName("down"), record([("after", "up"), ("command", "y")], addedAt: added), revision: 2)
        await registry.applySharedJob(try JobName("both"), record([("after", "up"), ("every", "1h"), ("command", "z")], addedAt: added), revision: 3)
        clock.advance(by: .seconds(10))
        let up = try #require(await registry.engine.job(JobName("up")))
        await registry.deliver(.deadlineReached(up.spec.name, jobID: up.id))
        await settle(registry)
        #expect(launcher.count == 1)
        clock.advance(by: .seconds(2))
        launcher.finish(0, at: clock.wallNow)
        await settle(registry)  // the run's end, which asks for the followers' claims
        await settle(registry)  // the claims' answers
        // Claimed apart from their schedules, under the instant the upstream's run ended (not a grid time of
        // both's own schedule), then run with what triggered them.
        let claims = gate.claims.withLock { $0 }
        #expect(claims.map(\.job) == ["up", "both", "down"] || claims.map(\.job) == ["up", "down", "both"], "\(claims)")
        #expect(claims.map(\.triggered) == [false, true, true])
        #expect(claims.dropFirst().allSatisfy { $0.at == added + .seconds(12) }, "\(claims)")
        try #require(launcher.count == 3, "\(sink.all.suffix(8))")
        for index in 1...2 {
            #expect(["down", "both"].contains(launcher.request(index).job))
            #expect(launcher.request(index).environment["TIMERD_TRIGGERED_BY"] == "up")
            #expect(launcher.request(index).environment["TIMERD_TRIGGER_RUN"] == "1")
        }
        // both's own schedule goes on, claimed as its schedule's: at its grid time.
        launcher.finish(1)
        launcher.finish(2)
        await settle(registry)
        clock.advance(by: .seconds(3600 - 12))
        let both = try #require(await registry.engine.job(JobName("both")))
        await registry.deliver(.deadlineReached(both.spec.name, jobID: both.id))
        await settle(registry)  // the fire, which asks for its claim
        await settle(registry)  // the claim's answer
        let last = try #require(gate.claims.withLock { $0.last })
        #expect(last.job == "both" && !last.triggered && last.at == added + .seconds(3600))
        try #require(launcher.count == 4)
        #expect(launcher.request(3).environment["TIMERD_TRIGGERED_BY"] == nil)
    }

    @Test func leavingTheClusterDisarmsAndDropsPendingFires() async throws {
        await registry.setCluster(FakeGate())
        await registry.applyClusterView(role: .member, members: [ClusterMember(name: "n1")], claims: [:], reason: "test")
        await registry.applySharedJob(try JobName("s"), record([("every", "1h"), ("command", "x")]), revision: 1)
        #expect(await registry.statusLine().hasPrefix("cluster: 1 member, runs 1 of 1 shared job; 1 job"))
        let metrics = await registry.metricsText()
        for line in ["timerd_cluster_owned_jobs{node=\"n1\"} 1\n", "timerd_cluster_etcd_available{node=\"n1\"} 1\n", "timerd_cluster_shared_jobs{node=\"n1\"} 1\n",
                     "timerd_cluster_members{node=\"n1\"} 1\n", "timerd_cluster_waiting_jobs{node=\"n1\"} 0\n"] {
            #expect(metrics.contains(line), "\(line)")
        }
        await registry.applyClusterView(role: .unavailable, members: [ClusterMember(name: "n1")], claims: [:], reason: "its lease may have expired")
        #expect(logged("starts no shared job until it is back in the cluster (its lease may have expired)"))
        #expect(await registry.statusLine().hasPrefix("cluster: etcd unavailable, shared jobs stopped; "))
        let after = await registry.metricsText()
        #expect(after.contains("timerd_cluster_owned_jobs{node=\"n1\"} 0\n") && after.contains("timerd_cluster_etcd_available{node=\"n1\"} 0\n"))
        #expect(try await registry.show(JobName("s")).node == nil)
    }

    @Test func takingOverAppliesTheMisfirePolicyFromTheLastClaim() async throws {
        let gate = FakeGate()
        await registry.setCluster(gate)
        await registry.applyClusterView(role: .member, members: [ClusterMember(name: "n2")], claims: [:], reason: "test")
        // Added 105 s ago, every 10s: grid at added+10, +20, … The previous owner claimed up to added+60,
        // so 70, 80, 90 and 100 were missed (more if this test is starved for seconds: the assertions
        // allow for that, they do not depend on the timing).
        let added = clock.wallNow + .seconds(-105)
        await registry.applySharedJob(try JobName("once"), record([("every", "10s"), ("command", "x"), ("misfire", "once")], addedAt: added), revision: 1)
        await registry.applySharedJob(try JobName("all"), record([("every", "10s"), ("command", "x"), ("misfire", "all")], addedAt: added), revision: 1)
        #expect(launcher.count == 0)
        let before = clock.wallNow
        await registry.applyClusterView(role: .member, members: [ClusterMember(name: "n1")], claims: ["once": added + .seconds(60), "all": added + .seconds(60)], reason: "test")
        await settle(registry)
        let after = clock.wallNow
        let claimed = gate.claims.withLock { $0 }
        // once: one catch-up, for the latest instant missed at takeover (added+100 unless starved).
        let once = claimed.filter { $0.job == "once" }.map(\.at)
        let first = try #require(once.first)
        #expect((first - added).nanoseconds % 10_000_000_000 == 0, "on the grid")
        #expect(first >= added + .seconds(100) && first <= after && first > before + .seconds(-10), "\(first) vs \(before)…\(after)")
        // all: the oldest missed first (the rest after each run ends).
        #expect(claimed.filter { $0.job == "all" }.map(\.at).first == added + .seconds(70))
        #expect(logged("fires while no node of the cluster ran it") && logged("misfire=once: running 1 now"))
    }

    @Test func watchEventsPauseResumeReplaceAndCancelButNeverGoBackInRevision() async throws {
        await registry.setCluster(FakeGate())
        await registry.applyClusterView(role: .member, members: [ClusterMember(name: "n2")], claims: [:], reason: "test")
        let name = try JobName("w")
        let added = clock.wallNow
        await registry.applySharedJob(name, record([("every", "1m"), ("command", "x")], addedAt: added), revision: 10)
        await registry.applySharedJob(name, record([("every", "1m"), ("command", "x")], paused: true, addedAt: added), revision: 11)
        #expect(try await registry.show(name).state == .paused)
        // An older event (revision 9) changes nothing.
        await registry.applySharedJob(name, record([("every", "1m"), ("command", "x")], addedAt: added), revision: 9)
        #expect(try await registry.show(name).state == .paused)
        await registry.applySharedJob(name, record([("every", "1m"), ("command", "x")], addedAt: added), revision: 12)
        #expect(try await registry.show(name).state == .scheduled)
        await registry.applySharedJob(name, record([("every", "2m"), ("command", "x")], addedAt: added), revision: 13)
        #expect(try await registry.show(name).schedule == "every 2m")
        await registry.removeSharedJobs([name], revision: 12)
        #expect(try await registry.show(name).name == "w")
        await registry.removeSharedJobs([name], revision: 14)
        await #expect(throws: TimerdError(.noSuchJob, "")) { try await registry.show(name) }
        // A full read drops shared jobs etcd no longer has, and keeps this node's own.
        try await registry.add(spec("local", ["every": "1h", "command": "x", "cluster": "no"]), origin: .runtime)
        await registry.applySharedJob(try JobName("gone"), record([("every", "1m"), ("command", "x")]), revision: 20)
        await registry.syncSharedJobs([], mode: "maintenance")
        #expect(await registry.list().map(\.name) == ["local"])
        #expect(await registry.modeInfo().mode == "maintenance")
    }

    @Test func clusterJobsResumeOnlyOnTheirSchedule() async throws {
        await registry.setCluster(FakeGate())
        await registry.applySharedJob(try JobName("r"), record([("every", "1m"), ("command", "x")], paused: true), revision: 1)
        await #expect(throws: TimerdError(.badArgument, "")) { try await registry.resume([JobName("r")], mode: .now) }
        try await registry.resume([JobName("r")], mode: .onSchedule)
    }
}
