import Dispatch
import TimerdCluster
import TimerdConfig
import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem

/// This node's session with etcd in cluster mode (`docs/cluster.md`).
///
/// - A lease of `lease_ttl`, renewed every third of it, holds `members/NODE` (who is alive) and, on the
///   leader, `leader`. A node that cannot renew stops leading once its lease may have expired (it checks
///   its own deadline; it does not wait for etcd to tell it).
/// - Leadership: the first node to create `leader` (a transaction that requires it to be absent) leads.
///   When the key goes (the leader's lease expired or was revoked), every node's watch sees it and each
///   tries again at once.
/// - Claims: the leader runs a fire only after a transaction that requires `leader` to be still the one it
///   created and `claims/JOB` to be as it last saw it, and writes the fire's instant there. A node that lost
///   its leadership (paused, partitioned) cannot win a claim, so no fire runs twice. Fires by an upstream's
///   run (`after=`) are claimed the same way in `triggers/JOB`, so that `claims/JOB` stays the last instant
///   of the job's own schedule, which a new leader goes on from.
/// - The shared jobs (`jobs/NAME`), the mode and finished runs reach every node through one watch of the
///   whole prefix.
///
/// Blocking etcd calls happen on this class's own queues (session, claims, writes) and its watch queue,
/// never on the registry's.
final class ClusterNode: ClusterGate, @unchecked Sendable {
    let node: String
    let settings: ClusterSettings
    let log: Logger
    private let client: EtcdClient
    private let registry: Registry
    private let clock: any Clock
    private let ttlSeconds: Int64

    private let sessionQueue = DispatchQueue(label: "timerd.cluster.session")
    private let claimQueue = DispatchQueue(label: "timerd.cluster.claims")
    private let writeQueue = DispatchQueue(label: "timerd.cluster.writes")
    private let watchQueue = DispatchQueue(label: "timerd.cluster.watch")
    private let deadlineQueue = DispatchQueue(label: "timerd.cluster.deadline")
    private let sessionTimer: any DispatchSourceTimer
    private let deadlineTimer: any DispatchSourceTimer

    private struct State {
        var role = ClusterRole.connecting
        var lease: Int64 = 0
        /// When the lease may have expired (its last renewal's send time + TTL).
        var leaseDeadline = MonoInstant.zero
        /// The create revision of `leader` while this node holds it (0: it does not).
        var leaderRevision: Int64 = 0
        var leader: String?
        var problem: String?
        /// The revision the watch continues from.
        var watchRevision: Int64 = 0
        var synced = false
        var watching = false
        var watchStop: WatchStop?
        /// The leader's view of each claim key (`claims/JOB`, `triggers/JOB`): its mod revision and
        /// instant (ns).
        var claimRevisions: [String: Int64] = [:]
        var lastClaimed: [String: Int64] = [:]
        var stopped = false
        /// `members/NODE` as written at each renewal (the watch must see it: `checkWatch`), and the
        /// revision of the last write.
        var memberRecord: [UInt8] = []
        var heartbeat: Int64 = 0
    }
    private let state = Locked(State())

    private var leaderKey: String { settings.prefix + "leader" }
    private var modeKey: String { settings.prefix + "mode" }
    private var memberKey: String { settings.prefix + "members/" + node }
    private func jobKey(_ name: String) -> String { settings.prefix + "jobs/" + name }
    private func claimKey(_ name: String) -> String { settings.prefix + "claims/" + name }
    private func triggerKey(_ name: String) -> String { settings.prefix + "triggers/" + name }
    private func runKey(_ name: String) -> String { settings.prefix + "runs/" + name }

    init(settings: ClusterSettings, node: String, registry: Registry, log: Logger) throws(EtcdError) {
        self.settings = settings
        self.node = node
        self.registry = registry
        clock = registry.clock
        self.log = log
        ttlSeconds = Int64(settings.leaseTTL.nanoseconds / 1_000_000_000)
        let tls = settings.caFile == nil && settings.certFile == nil && settings.keyFile == nil
            ? nil : EtcdTLS(caFile: settings.caFile, certFile: settings.certFile, keyFile: settings.keyFile)
        // A request must fail well within a renewal period, so a dead endpoint costs one renewal at most.
        let timeout = min(Duration.seconds(1), settings.leaseTTL / 4)
        client = try EtcdClient(endpoints: settings.endpoints, tls: tls, requestTimeout: timeout)
        sessionTimer = DispatchSource.makeTimerSource(queue: sessionQueue)
        deadlineTimer = DispatchSource.makeTimerSource(queue: deadlineQueue)
    }

    /// Connects (and keeps reconnecting) in the background; returns at once.
    func start() {
        log.notice("cluster: node \(node), etcd \(settings.endpoints.joined(separator: ",")), prefix \(settings.prefix), lease_ttl \(DurationText.format(settings.leaseTTL))")
        let period = Int(settings.leaseTTL.nanoseconds / 3)
        sessionTimer.schedule(deadline: .now(), repeating: .nanoseconds(period), leeway: .milliseconds(10))
        sessionTimer.setEventHandler { [unowned self] in self.sessionTick() }
        sessionTimer.activate()
        deadlineTimer.schedule(deadline: .distantFuture)
        deadlineTimer.setEventHandler { [unowned self] in self.deadlinePassed() }
        deadlineTimer.activate()
    }

    /// Leaves the cluster: stops renewing and revokes the lease, so another node leads at once instead
    /// of after `lease_ttl`. Blocks for at most a request timeout or so.
    func stop() {
        let lease = state.withLock { state -> Int64 in
            state.stopped = true
            state.watchStop?.stop()
            return state.lease
        }
        sessionQueue.sync {
            sessionTimer.cancel()
            deadlineTimer.cancel()
            guard lease != 0 else { return }
            stepDown(.unavailable, reason: "timerd is stopping")
            do {
                try client.revoke(lease)
                log.info("cluster: lease revoked; another node can lead now")
            } catch {
                log.warning("cluster: could not revoke the lease (\(error)); another node leads after lease_ttl")
            }
        }
    }

    // MARK: - Session (on sessionQueue)

    private func sessionTick() {
        guard !state.withLock({ $0.stopped }) else { return }
        let lease = state.withLock { $0.lease }
        let sent = clock.monotonicNow
        if lease == 0 {
            do {
                let granted = try client.grantLease(ttl: ttlSeconds)
                let record = MemberRecord(since: clock.wallNow.nanosecondsSinceEpoch, pid: Int(CurrentProcess.id), version: ControlHandler.version)
                let bytes = Array(Payload.encode(record).utf8)
                let revision = try client.put(memberKey, bytes, lease: granted.id)
                state.withLock {
                    $0.lease = granted.id
                    $0.leaseDeadline = sent + .seconds(granted.ttl)
                    $0.memberRecord = bytes
                    $0.heartbeat = revision
                }
                if !state.withLock({ $0.synced }) { try resync() }
                connected("lease \(Self.hex(granted.id)), ttl \(granted.ttl)s")
            } catch {
                unreachable(error)
                return
            }
        } else {
            do {
                let ttl = try client.keepAlive(lease)
                state.withLock { $0.leaseDeadline = sent + .seconds(max(0, ttl)) }
                if !state.withLock({ $0.synced }) { try resync() }
                connected("lease \(Self.hex(lease)) renewed")
                checkWatch(lease: lease)
            } catch .leaseNotFound {
                log.warning("cluster: lease \(Self.hex(lease)) expired (this node did not renew it in time, or etcd lost it); joining again")
                stepDown(.follower, reason: "its lease expired")
                state.withLock { $0.lease = 0 }
                return sessionTick()
            } catch {
                unreachable(error)
                return
            }
        }
        armDeadline()
        if state.withLock({ $0.role != .leader }) { campaign() }
    }

    /// Whether the watch still delivers: it must have seen the previous renewal's write of this node's
    /// own `members/NODE` by now. A watch on a member that froze (SIGSTOP, a stuck VM) stays open but
    /// silent, and this node would miss every change: it is started again, through the member that
    /// answers requests now. Then writes `members/NODE` again for the next check.
    private func checkWatch(lease: Int64) {
        let (stalled, previous, record) = state.withLock { state in
            (state.watching && state.heartbeat != 0 && state.watchRevision <= state.heartbeat, state.heartbeat, state.memberRecord)
        }
        if stalled {
            log.warning("cluster: the etcd watch has not delivered this node's own write at revision \(previous) for a renewal period; watching again")
            state.withLock { $0.watchStop?.stop() }
        }
        if let revision = try? client.put(memberKey, record, lease: lease) {
            state.withLock { $0.heartbeat = revision }
        }
    }

    /// etcd answered: leave `connecting`/`unavailable` if the node was there.
    private func connected(_ detail: String) {
        let (previous, problem) = state.withLock { state -> (ClusterRole, String?) in
            let previous = state.role
            let problem = state.problem
            state.problem = nil
            if state.role == .connecting || state.role == .unavailable { state.role = .follower }
            return (previous, problem)
        }
        if previous == .connecting || previous == .unavailable {
            log.notice("cluster: connected to etcd (\(detail))" + (problem.map { "; it was unavailable: \($0)" } ?? ""))
            transition { state in
                guard state.role == .follower else { return nil }
                let leader = state.leader
                return { $0.notLeading(role: .follower, leader: leader, reason: "reconnected") }
            }
        } else {
            log.debug("cluster: \(detail)")
        }
    }

    /// etcd did not answer (or has no quorum). A follower says so at once; a leader keeps its role until
    /// its lease may have expired (`deadlinePassed`), and its claims fail meanwhile anyway.
    private func unreachable(_ error: EtcdError) {
        let message = Self.describe(error)
        var previous = ClusterRole.connecting
        var hadProblem = false
        transition { state in
            previous = state.role
            hadProblem = state.problem != nil
            state.problem = message
            guard state.role != .leader, state.role != .unavailable else { return nil }
            state.role = .unavailable
            return { $0.notLeading(role: .unavailable, leader: nil, reason: "etcd is unavailable") }
        }
        if !hadProblem || previous == .connecting {
            log.error("cluster: etcd is unavailable: \(message); shared jobs cannot be changed, and start on no node that cannot reach etcd")
        }
    }

    /// Changes the state and, in the same step, queues what the registry must hear of it: the registry
    /// then hears of every change in the order they happened, whichever of this node's queues made them.
    private func transition(_ change: (inout State) -> (@Sendable (isolated Registry) -> Void)?) {
        state.withLock { state in
            if let update = change(&state) { registry.enqueue(update) }
        }
    }

    private func armDeadline() {
        let deadline = state.withLock { $0.leaseDeadline }
        deadlineTimer.schedule(deadline: DispatchTime(uptimeNanoseconds: deadline.nanosecondsSinceBoot), repeating: .never, leeway: .milliseconds(5))
    }

    /// On deadlineQueue: the lease may have expired without this node hearing so (no renewal got through).
    private func deadlinePassed() {
        let expired = state.withLock { state -> Bool in
            guard state.lease != 0, clock.monotonicNow >= state.leaseDeadline else { return false }
            return true
        }
        guard expired else { return }
        log.warning("cluster: no lease renewal got through for lease_ttl; this node stops leading")
        stepDown(.unavailable, reason: "its lease may have expired")
    }

    /// Tries to become the leader (on sessionQueue).
    private func campaign() {
        let lease = state.withLock { $0.lease }
        guard lease != 0 else { return }
        do {
            let result = try client.txn(
                compare: [.createRevision(leaderKey, equals: 0)],
                success: [.put(leaderKey, value: Array(node.utf8), lease: lease)],
                failure: [.get(leaderKey)])
            if result.succeeded {
                try lead(revision: result.revision)
            } else if let current = result.ranges.first?.first {
                if current.lease == lease {
                    try lead(revision: current.createRevision)  // an earlier attempt of ours won
                } else {
                    noteLeader(current.valueString)
                }
            }
        } catch {
            log.debug("cluster: campaign failed: \(error)")
        }
    }

    /// This node created `leader` at `revision`: read the claims and take the shared jobs over.
    private func lead(revision: Int64) throws(EtcdError) {
        var claims: [String: WallTime] = [:]
        var revisions: [String: Int64] = [:]
        var last: [String: Int64] = [:]
        for folder in ["claims/", "triggers/"] {
            let base = settings.prefix + folder
            for kv in try client.get(base, prefix: true).0 {
                revisions[kv.key] = kv.modRevision
                guard let record = try? Payload.decode(ClaimRecord.self, from: kv.valueString) else { continue }
                last[kv.key] = record.at
                // Where each job's own schedule goes on from.
                if folder == "claims/" { claims[String(kv.key.dropFirst(base.count))] = WallTime(nanosecondsSinceEpoch: record.at) }
            }
        }
        let claimed = claims
        transition { state in
            state.leaderRevision = revision
            state.role = .leader
            state.leader = node
            state.claimRevisions = revisions
            state.lastClaimed = last
            return { $0.becomeLeader(claims: claimed) }
        }
        log.notice("cluster: this node leads (leader key at revision \(revision)); \(claims.count.counted("job")) \(claims.count == 1 ? "has" : "have") claimed fires")
    }

    private func stepDown(_ role: ClusterRole, reason: String) {
        transition { state in
            let wasLeader = state.role == .leader
            state.role = role
            state.leaderRevision = 0
            if wasLeader { state.leader = nil }
            guard wasLeader || role == .unavailable else { return nil }
            let leader = state.leader
            return { $0.notLeading(role: role, leader: leader, reason: reason) }
        }
    }

    private func noteLeader(_ leader: String?) {
        var changed = false
        transition { state in
            guard state.leader != leader else { return nil }
            state.leader = leader
            changed = true
            return { $0.setLeader(leader) }
        }
        if changed, let leader { log.info("cluster: node \(leader) leads") }
    }

    // MARK: - The shared state (initial read and watch)

    /// Reads everything under the prefix and hands the shared jobs and mode to the registry; the watch
    /// continues from there.
    private func resync() throws(EtcdError) {
        let (kvs, revision) = try client.get(settings.prefix, prefix: true)
        var records: [(name: JobName, record: SharedJobRecord, revision: Int64)] = []
        var mode: String?
        var leader: String?
        for kv in kvs {
            switch parse(kv.key) {
            case .job(let name):
                if let record = try? Payload.decode(SharedJobRecord.self, from: kv.valueString) {
                    records.append((name, record, kv.modRevision))
                } else {
                    log.error("cluster: \(kv.key) does not hold a job record; ignored")
                }
            case .mode: mode = kv.valueString
            case .leader: leader = kv.valueString
            default: break
            }
        }
        state.withLock {
            $0.watchRevision = revision + 1
            $0.synced = true
        }
        log.info("cluster: \(records.count.counted("shared job")) in etcd at revision \(revision)")
        let (jobs, clusterMode) = (records, mode)
        registry.enqueue { $0.syncSharedJobs(jobs, mode: clusterMode) }
        noteLeader(leader)
        startWatching()
    }

    private func startWatching() {
        let start = state.withLock { state -> Bool in
            guard !state.watching, !state.stopped else { return false }
            state.watching = true
            return true
        }
        guard start else { return }
        watchQueue.async { [self] in watchLoop() }
    }

    /// On watchQueue, for the daemon's life: one watch of the prefix, restarted where it broke off.
    private func watchLoop() {
        while true {
            let stop = WatchStop()
            let from = state.withLock { state -> Int64? in
                guard !state.stopped else { return nil }
                state.watchStop = stop
                return state.watchRevision
            }
            guard let from else { return }
            let end = client.watch(settings.prefix, prefix: true, from: from, stop: stop, onCreated: { _ in }) { [self] events, revision in
                handle(events)
                state.withLock { $0.watchRevision = max($0.watchRevision, revision + 1) }
            }
            switch end {
            case .stopped:
                // Stopped by `checkWatch` (start again) or by `stop` (the daemon is stopping).
                if state.withLock({ $0.stopped }) { return }
            case .broken(let why):
                log.debug("cluster: watch broke off (\(why)); watching again from revision \(from)")
                // A pause between attempts, so a dead etcd is not hammered (this thread only waits here).
                _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(200))
            case .compacted(let revision):
                log.warning("cluster: etcd compacted the history past revision \(from) (now \(revision)); reading everything again")
                state.withLock {
                    $0.synced = false
                    $0.watching = false
                }
                sessionQueue.async { [self] in try? resync() }
                return
            }
        }
    }

    private enum Key {
        case job(JobName), claim(String), run(JobName), member(String), leader, mode, other
    }

    private func parse(_ key: String) -> Key {
        guard key.hasPrefix(settings.prefix) else { return .other }
        let rest = String(key.dropFirst(settings.prefix.count))
        if rest == "leader" { return .leader }
        if rest == "mode" { return .mode }
        for (folder, make) in [("jobs/", { (name: String) -> Key in (try? JobName(name)).map(Key.job) ?? .other }),
                               ("runs/", { (name: String) -> Key in (try? JobName(name)).map(Key.run) ?? .other }),
                               ("claims/", { Key.claim($0) }), ("members/", { Key.member($0) })]
            where rest.hasPrefix(folder) {
            return make(String(rest.dropFirst(folder.count)))
        }
        return .other
    }

    private func handle(_ events: [EtcdEvent]) {
        for event in events {
            let kv = event.kv
            switch (parse(kv.key), event.kind) {
            case (.job(let name), .put):
                guard let record = try? Payload.decode(SharedJobRecord.self, from: kv.valueString) else {
                    log.error("cluster: \(kv.key) does not hold a job record; ignored")
                    continue
                }
                let revision = kv.modRevision
                registry.enqueue { $0.applySharedJob(name, record, revision: revision) }
            case (.job(let name), .delete):
                let revision = kv.modRevision
                registry.enqueue { $0.removeSharedJobs([name], revision: revision) }
            case (.mode, .put):
                let mode = kv.valueString
                registry.enqueue { $0.applyClusterMode(mode) }
            case (.run(let name), .put):
                if let record = try? Payload.decode(SharedRunRecord.self, from: kv.valueString) {
                    registry.enqueue { $0.noteRemoteRun(name, record) }
                }
            case (.leader, .put):
                let mine = state.withLock { $0.leaderRevision != 0 && $0.leaderRevision == kv.createRevision }
                if !mine {
                    if state.withLock({ $0.role == .leader }) { stepDown(.follower, reason: "node \(kv.valueString) holds the leader key") }
                    noteLeader(kv.valueString)
                }
            case (.leader, .delete):
                let wasMine = state.withLock { $0.leaderRevision != 0 }
                if wasMine { stepDown(.follower, reason: "the leader key was deleted (lease expired or revoked)") }
                noteLeader(nil)
                // Every node tries at once; the first transaction wins.
                sessionQueue.async { [self] in if state.withLock({ $0.role != .leader && !$0.stopped }) { campaign() } }
            default:
                break
            }
        }
    }

    // MARK: - Claims (ClusterGate)

    func claim(_ job: JobName, at instant: WallTime, triggered: Bool, done: @escaping @Sendable (ClaimOutcome) -> Void) {
        let key = triggered ? triggerKey(job.rawValue) : claimKey(job.rawValue)
        claimQueue.async { [self] in done(decideClaim(key, at: instant.nanosecondsSinceEpoch)) }
    }

    /// Claims the fire at `at` (ns) under `key` (`claims/JOB` or `triggers/JOB`).
    private func decideClaim(_ key: String, at: Int64) -> ClaimOutcome {
        // Only what the claim needs (a copy of the whole state would copy its dictionaries on the next write).
        let snapshot = state.withLock { (role: $0.role, leaderRevision: $0.leaderRevision, leaseDeadline: $0.leaseDeadline, last: $0.lastClaimed[key]) }
        guard snapshot.role == .leader, snapshot.leaderRevision != 0 else { return .lost("this node does not lead the cluster") }
        guard clock.monotonicNow < snapshot.leaseDeadline else {
            return .lost("this node's lease may have expired (no renewal got through for lease_ttl)")
        }
        let when = RFC3339.format(WallTime(nanosecondsSinceEpoch: at))
        if let last = snapshot.last, at <= last { return .lost("its fire at \(when) was already claimed") }
        let value = Array(Payload.encode(ClaimRecord(at: at, node: node)).utf8)
        for _ in 0..<3 {
            let known = state.withLock { $0.claimRevisions[key] ?? 0 }
            let result: EtcdTxnResult
            do {
                result = try client.txn(
                    compare: [.createRevision(leaderKey, equals: snapshot.leaderRevision), .modRevision(key, equals: known)],
                    success: [.put(key, value: value)],
                    failure: [.get(leaderKey), .get(key)])
            } catch {
                return .lost("cannot claim it in etcd: \(Self.describe(error))")
            }
            if result.succeeded {
                state.withLock {
                    $0.claimRevisions[key] = result.revision
                    $0.lastClaimed[key] = at
                }
                return .won
            }
            let leader = result.ranges.first?.first
            if leader?.createRevision != snapshot.leaderRevision {
                stepDown(.follower, reason: "node \(leader?.valueString ?? "(none)") holds the leader key now")
                return .lost("this node no longer leads the cluster")
            }
            let current = result.ranges.count > 1 ? result.ranges[1].first : nil
            let record = current.flatMap { try? Payload.decode(ClaimRecord.self, from: $0.valueString) }
            state.withLock {
                $0.claimRevisions[key] = current?.modRevision ?? 0
                if let record { $0.lastClaimed[key] = max($0.lastClaimed[key] ?? record.at, record.at) }
            }
            if let record, record.at >= at { return .lost("node \(record.node) already claimed its fire at \(when)") }
        }
        return .lost("its claim kept changing in etcd")
    }

    func publishRun(_ job: JobName, _ record: SharedRunRecord) {
        let key = runKey(job.rawValue)
        let value = Array(Payload.encode(record).utf8)
        claimQueue.async { [self] in
            do throws(EtcdError) {
                _ = try client.put(key, value)
            } catch {
                log.warning(job: job.rawValue, "cluster: cannot publish run \(record.run) to the other nodes: \(Self.describe(error))")
            }
        }
    }

    // MARK: - Shared writes (from control requests)

    /// How long a shared write keeps trying while etcd is unavailable: etcd needs a second or two to
    /// elect a new leader when its leader goes, and a write then should wait, not fail.
    static let writePatience = Duration.seconds(3)

    /// Runs `body` on the write queue, again every 200 ms while etcd is unavailable, for up to
    /// `writePatience`; then etcd's unavailability becomes `cluster-unavailable`. `body` must tolerate
    /// that an earlier attempt was applied (see `createJob`).
    private func write<T: Sendable>(_ body: @escaping @Sendable (EtcdClient) throws(EtcdError) -> T) async throws(TimerdError) -> T {
        let client = self.client
        let result: Result<T, EtcdError> = await withCheckedContinuation { continuation in
            writeQueue.async {
                let deadline = ContinuousClock.now + Self.writePatience
                while true {
                    do throws(EtcdError) {
                        return continuation.resume(returning: .success(try body(client)))
                    } catch .unavailable(let why) where ContinuousClock.now < deadline {
                        _ = why
                        // This queue only makes shared writes; waiting here delays nothing else.
                        _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(200))
                    } catch {
                        return continuation.resume(returning: .failure(error))
                    }
                }
            }
        }
        switch result {
        case .success(let value): return value
        case .failure(.unavailable(let why)):
            throw TimerdError(.clusterUnavailable, "etcd is unavailable (\(why)); shared jobs cannot be changed now, nothing was changed")
        case .failure(let error):
            throw TimerdError(.internal, "etcd: \(Self.describe(error))")
        }
    }

    /// Creates a shared job; `exists` if the cluster has one of that name. Returns etcd's revision.
    func createJob(_ name: JobName, _ record: SharedJobRecord) async throws(TimerdError) -> Int64 {
        let key = jobKey(name.rawValue)
        let value = Array(Payload.encode(record).utf8)
        let stale = [claimKey(name.rawValue), triggerKey(name.rawValue), runKey(name.rawValue)].map { EtcdOperation.delete($0) }
        let result = try await write { client throws(EtcdError) in
            try client.txn(
                compare: [.createRevision(key, equals: 0)],
                success: [.put(key, value: value)] + stale,
                failure: [.get(key)])
        }
        guard result.succeeded else {
            let current = result.ranges.first?.first
            let owner = current.flatMap { try? Payload.decode(SharedJobRecord.self, from: $0.valueString) }
            // Our own record: an earlier attempt of this write was applied (its reply was lost, or the
            // member timed out after committing it) before the one that got here.
            if let current, owner == record { return current.modRevision }
            throw TimerdError(.exists, "a job named \(name) already exists in the cluster\(owner.map { " (added on node \($0.node))" } ?? ""); cancel it first or pick another name")
        }
        return result.revision
    }

    /// How many shared jobs one request may change: each is one operation of one etcd transaction, and
    /// etcd takes at most 128 (`--max-txn-ops`, default 128).
    static let maxJobsPerWrite = 128

    private static func checkWriteSize(_ count: Int) throws(TimerdError) {
        guard count > maxJobsPerWrite else { return }
        throw TimerdError(.badArgument, "the request selects \(count) shared jobs; a cluster changes at most \(maxJobsPerWrite) in one request "
                          + "(one etcd transaction, --max-txn-ops): select fewer, nothing was changed")
    }

    /// Replaces shared jobs' records, each only if it is still at the revision this node knows.
    func updateJobs(_ items: [(name: JobName, record: SharedJobRecord, revision: Int64)]) async throws(TimerdError) -> Int64 {
        try Self.checkWriteSize(items.count)
        let compare = items.map { EtcdCompare.modRevision(jobKey($0.name.rawValue), equals: $0.revision) }
        let puts = items.map { EtcdOperation.put(jobKey($0.name.rawValue), value: Array(Payload.encode($0.record).utf8)) }
        let gets = items.map { EtcdOperation.get(jobKey($0.name.rawValue)) }
        let result = try await write { client throws(EtcdError) in try client.txn(compare: compare, success: puts, failure: gets) }
        guard result.succeeded else {
            // Every record already as we would write it: an earlier attempt of this write was applied.
            let current = result.ranges.map { $0.first }
            let applied = current.count == items.count && zip(current, items).allSatisfy { kv, item in
                kv.flatMap { try? Payload.decode(SharedJobRecord.self, from: $0.valueString) } == item.record
            }
            if applied { return current.compactMap { $0?.modRevision }.max() ?? 0 }
            throw TimerdError(.busy, "\(items.map(\.name.rawValue).joined(separator: ", ")) changed on another node meanwhile; try again")
        }
        return result.revision
    }

    /// Deletes shared jobs (one transaction), then their claims and last runs. Those go afterwards, in
    /// slices, each only while none of its jobs was added again; they need not all go (a job created
    /// under the name deletes them first). etcd takes at most 128 operations in a transaction
    /// (`--max-txn-ops`), and the jobs alone may be that many.
    func deleteJobs(_ names: [JobName]) async throws(TimerdError) -> Int64 {
        try Self.checkWriteSize(names.count)
        let deletes = names.map { EtcdOperation.delete(jobKey($0.rawValue)) }
        let revision = try await write { client throws(EtcdError) in try client.txn(compare: [], success: deletes).revision }
        writeQueue.async { [self] in
            for start in stride(from: 0, to: names.count, by: 40) {
                let slice = names[start..<min(start + 40, names.count)]
                do throws(EtcdError) {
                    _ = try client.txn(compare: slice.map { .createRevision(jobKey($0.rawValue), equals: 0) },
                                       success: slice.flatMap { name in
                                           [claimKey(name.rawValue), triggerKey(name.rawValue), runKey(name.rawValue)].map { EtcdOperation.delete($0) }
                                       })
                } catch {
                    return log.warning("cluster: cannot delete the claims and last runs of cancelled jobs: \(Self.describe(error)); they go when a job of the name is added again")
                }
            }
        }
        return revision
    }

    /// Sets the cluster's mode.
    func setMode(_ mode: String) async throws(TimerdError) {
        let key = modeKey
        _ = try await write { client throws(EtcdError) in try client.put(key, Array(mode.utf8)) }
    }

    /// `CLUSTER`: the members, the leader, this node's lease, and each etcd endpoint's health.
    func info(sharedJobs: Int) async -> ClusterInfo {
        let client = self.client
        let snapshot = state.withLock { (role: $0.role, leader: $0.leader, problem: $0.problem, lease: $0.lease, leaseDeadline: $0.leaseDeadline) }
        let prefix = settings.prefix
        let (members, endpoints) = await withCheckedContinuation { (continuation: CheckedContinuation<([ClusterInfo.Member], [ClusterInfo.Endpoint]), Never>) in
            writeQueue.async {
                var members: [ClusterInfo.Member] = []
                if let (kvs, _) = try? client.get(prefix + "members/", prefix: true) {
                    for kv in kvs {
                        let record = try? Payload.decode(MemberRecord.self, from: kv.valueString)
                        members.append(ClusterInfo.Member(
                            name: String(kv.key.dropFirst((prefix + "members/").count)),
                            since: record.map { RFC3339.format(WallTime(nanosecondsSinceEpoch: $0.since)) }, pid: record?.pid))
                    }
                }
                let names = Dictionary((try? client.members())?.map { ($0.id, $0.name) } ?? [], uniquingKeysWith: { first, _ in first })
                let endpoints = client.status().map { status in
                    ClusterInfo.Endpoint(
                        url: status.endpoint, healthy: status.healthy, member: status.healthy ? names[status.memberID] : nil,
                        version: status.healthy ? status.version : nil,
                        is_leader: status.healthy && status.leaderID != 0 && status.leaderID == status.memberID,
                        error: status.error.map { $0.hasPrefix("etcd unavailable: ") ? String($0.dropFirst(18)) : $0 })
                }
                continuation.resume(returning: (members.sorted { $0.name < $1.name }, endpoints))
            }
        }
        let remaining: Double? = snapshot.lease == 0 ? nil
            : max(0, Double((snapshot.leaseDeadline - clock.monotonicNow).nanoseconds) / 1e9)
        return ClusterInfo(
            node: node, role: snapshot.role.rawValue, leader: snapshot.leader, problem: snapshot.problem,
            lease: snapshot.lease == 0 ? nil : Self.hex(snapshot.lease), lease_ttl: Int(ttlSeconds),
            lease_remaining: remaining, members: members, shared_jobs: sharedJobs, prefix: prefix, etcd: endpoints)
    }

    // MARK: - Helpers

    static func hex(_ lease: Int64) -> String { String(UInt64(bitPattern: lease), radix: 16) }

    static func describe(_ error: EtcdError) -> String {
        switch error {
        case .unavailable(let why): return why
        default: return error.description
        }
    }
}
