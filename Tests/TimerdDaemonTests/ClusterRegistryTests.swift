import Synchronization
import Testing
import TimerdConfig
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
        await registry.applyClusterView(role: .member, members: [ClusterMember(name: "n1")], claims: [try JobName("once"): added + .seconds(60), try JobName("all"): added + .seconds(60)], reason: "test")
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

    func members(_ names: String...) -> [ClusterMember] { names.map { ClusterMember(name: $0) } }

    /// A job name that `Placement` gives to `member` among `members` (and to `then` among `after`, if given).
    func name(ownedBy member: String, among members: [ClusterMember], then: String? = nil, after: [ClusterMember] = [], prefix: String = "j") -> String {
        for index in 0... {
            let name = "\(prefix)\(index)"
            guard Placement.owner(of: name, runOn: [], configJob: false, among: members) == member else { continue }
            if let then, Placement.owner(of: name, runOn: [], configJob: false, among: after) != then { continue }
            return name
        }
        fatalError()
    }

    @Test func eachNodeRunsItsShareAndOnlyTheJobsWhoseOwnerChangedMove() async throws {
        let gate = FakeGate()
        await registry.setCluster(gate)
        let three = members("n1", "n2", "n3")
        await registry.applyClusterView(role: .member, members: three, claims: [:], reason: "test")
        let added = clock.wallNow
        for index in 0..<30 {
            await registry.applySharedJob(try JobName("s\(index)"), record([("every", "1h"), ("command", "x")], addedAt: added), revision: Int64(index + 1))
        }
        func here() async -> Set<String> {
            Set(await registry.list().filter { $0.node == "n1" }.map(\.name))
        }
        let mine = await here()
        let expected = Set((0..<30).map { "s\($0)" }.filter { Placement.owner(of: $0, runOn: [], configJob: false, among: three) == "n1" })
        #expect(mine == expected && !mine.isEmpty && mine.count < 30)
        // Every node names the same owner; show says which.
        for index in 0..<30 {
            let info = try await registry.show(JobName("s\(index)"))
            #expect(info.node == Placement.owner(of: "s\(index)", runOn: [], configJob: false, among: three) && info.state == .scheduled)
        }
        #expect(await registry.placement().owned.values.reduce(0, +) == 30)
        // n2 leaves: n1 keeps its jobs and takes some of n2's; n3's stay on n3.
        let two = members("n1", "n3")
        await registry.applyClusterView(role: .member, members: two, claims: [:], reason: "n2 left")
        let after = await here()
        #expect(mine.isSubset(of: after))
        for job in after.subtracting(mine) { #expect(Placement.owner(of: job, runOn: [], configJob: false, among: three) == "n2") }
        #expect(logged("this node (n1) runs \(after.count) of the 30 shared jobs: took over \(after.count - mine.count), gave up 0 (n2 left)"))
        // Cut off from etcd: it runs none, and they wait, saying why.
        await registry.applyClusterView(role: .unavailable, members: two, claims: [:], reason: "its lease may have expired")
        #expect(await here().isEmpty)
        let waiting = try await registry.show(JobName("s0"))
        #expect(waiting.state == .waiting && waiting.waiting_reason == "etcd is unavailable to this node" && waiting.node == nil)
    }

    @Test func aJobNoLiveMemberMayRunWaitsAndSaysWhy() async throws {
        await registry.setCluster(FakeGate())
        let tagged = [ClusterMember(name: "n1", tags: ["ssd"]), ClusterMember(name: "n2", tags: ["ssd", "eu"])]
        await registry.applyClusterView(role: .member, members: tagged, claims: [:], reason: "test")
        await registry.applySharedJob(try JobName("eu"), record([("every", "1h"), ("run_on", "ssd,eu"), ("command", "x")]), revision: 1)
        await registry.applySharedJob(try JobName("gpu"), record([("every", "1h"), ("run_on", "gpu"), ("command", "x")]), revision: 2)
        let eu = try await registry.show(JobName("eu"))
        #expect(eu.node == "n2" && eu.state == .scheduled && eu.run_on == ["ssd", "eu"])
        let gpu = try await registry.show(JobName("gpu"))
        #expect(gpu.state == .waiting && gpu.node == nil)
        #expect(gpu.waiting_reason == "no live member has every tag of run_on=gpu (members: n1 [ssd], n2 [ssd, eu])")
        #expect(logged("; waiting: no live member has every tag of run_on=gpu") && logged("; runs on node n2"))
        let metrics = await registry.metricsText()
        #expect(metrics.contains("timerd_cluster_waiting_jobs{node=\"n1\"} 1\n") && metrics.contains("timerd_cluster_owned_jobs{node=\"n1\"} 0\n"))
        // A member with the tag joins: it runs there.
        await registry.applyClusterView(role: .member, members: tagged + [ClusterMember(name: "n3", tags: ["gpu"])], claims: [:], reason: "n3 joined")
        #expect(try await registry.show(JobName("gpu")).node == "n3")
        // A config job (cluster = yes) only runs on members that declare it.
        _ = try await registry.applyConfig([ConfiguredJob(spec: spec("report", ["every": "1h", "command": "x", "cluster": "yes"]), file: "/c", line: 1)], maxRunning: 4)
        let report = try await registry.show(JobName("report"))
        #expect(report.state == .waiting && report.waiting_reason == "no live member declares this config job (cluster = yes)")
    }

    @Test func aFollowerRunsWhereItIsPlacedWhenItsUpstreamEndsOnAnotherNode() async throws {
        let gate = FakeGate()
        await registry.setCluster(gate)
        let two = members("n1", "n2")
        await registry.applyClusterView(role: .member, members: two, claims: [:], reason: "test")
        let up = name(ownedBy: "n2", among: two, prefix: "up")
        let down = name(ownedBy: "n1", among: two, prefix: "down")
        let added = WallTime(seconds: 1_800_000_000)
        clock.setWall(added)
        await registry.applySharedJob(try JobName(up), record([("every", "10s"), ("command", "x")], addedAt: added), revision: 1)
        await registry.applySharedJob(try JobName(down), record([("after", up), ("command", "y")], addedAt: added), revision: 2)
        // n2 reports a run of up that will be tried again: nothing follows yet.
        let ended = added + .seconds(11)
        var report = SharedRunRecord(node: "n2", run: 1, scheduled_at: (added + .seconds(10)).nanosecondsSinceEpoch,
                                     started_at: (added + .seconds(10)).nanosecondsSinceEpoch, ended_at: ended.nanosecondsSinceEpoch,
                                     result: "failed", exit_code: 1, http_status: nil, lateness_ms: 1, output: "", final: false)
        await registry.noteRemoteRun(try JobName(up), report)
        await settle(registry)
        #expect(gate.claimCount == 0)
        // Its last attempt succeeded: n1 claims down under the instant up ended, and runs it.
        report.run = 2
        report.result = "ok"
        report.exit_code = 0
        report.final = true
        await registry.noteRemoteRun(try JobName(up), report)
        await settle(registry)
        await settle(registry)
        let claims = gate.claims.withLock { $0 }
        #expect(claims.count == 1 && claims.first?.job == down && claims.first?.triggered == true && claims.first?.at == ended, "\(claims)")
        try #require(launcher.count == 1)
        #expect(launcher.request(0).job == down && launcher.request(0).environment["TIMERD_TRIGGERED_BY"] == up)
        #expect(launcher.request(0).environment["TIMERD_SCHEDULED_AT"] == RFC3339.format(ended))
    }
}
