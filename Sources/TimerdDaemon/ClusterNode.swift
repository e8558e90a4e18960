import Dispatch
import TimerdCluster
import TimerdConfig
import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem

/// This node's session with etcd in cluster mode (`docs/cluster.md`).
///
/// - A lease of `lease_ttl`, renewed every third of it, holds `members/NODE` (who is alive, with the
///   node's tags and the shared config jobs it declares). A node that cannot renew leaves the cluster
///   once its lease may have expired (it checks its own deadline; it does not wait for etcd to tell it).
/// - Every node watches the members, and the engine places each shared job on one of them (`Placement`:
///   rendezvous hashing over the members that may run it). When a member joins or leaves, every node
///   sees the same change and only the jobs whose owner changed move.
/// - Claims: the owner runs a fire only after a transaction that requires its own `members/NODE` to be
///   the one it created under its live lease and `claims/JOB` to be as it last saw it, and writes the
///   fire's instant there; an instant at or before the one in `claims/JOB` is never claimed again, so a
///   stale owner (paused, partitioned, or not yet told of a change) cannot run a fire twice. Claims of
///   different jobs due together go in one transaction. Fires by an upstream's run (`after=`) are claimed
///   the same way in `triggers/JOB`, so that `claims/JOB` stays the last instant of the job's own
///   schedule, which a new owner goes on from.
/// - Finished runs of shared jobs go to the other nodes in batches, one `reports/NODE` write each.
/// - The shared jobs (`jobs/NAME`), the members, the mode and the run reports reach every node through
///   one watch of the keys from `jobs/` to `reports/` (not the claims: only a job's owner needs them, and
///   a node taking jobs over reads them then).
///
/// Blocking etcd calls happen on this class's own queues (session, claims, runs, writes) and its watch
/// queue, never on the registry's.
final class ClusterNode: ClusterGate, @unchecked Sendable {
    let node: String
    let settings: ClusterSettings
    let log: Logger
    private let client: EtcdClient
    private let registry: Registry
    private let clock: any Clock
    private let ttlSeconds: Int64

    private let sessionQueue = DispatchQueue(label: "timerd.cluster.session")
    /// Fires waiting for their claim, and finished runs waiting to be published: each a batch at a time,
    /// what arrived meanwhile in the next (set once, at the end of `init`).
    private var claims: Batches<PendingClaim>!
    private var reports: Batches<PendingRun>!
    private let writeQueue = DispatchQueue(label: "timerd.cluster.writes")
    private let watchQueue = DispatchQueue(label: "timerd.cluster.watch")
    private let deadlineQueue = DispatchQueue(label: "timerd.cluster.deadline")
    private let sessionTimer: any DispatchSourceTimer
    private let deadlineTimer: any DispatchSourceTimer

    /// A fire waiting for its claim.
    private struct PendingClaim: Sendable {
        var key: String
        var at: Int64
        var done: @Sendable (ClaimOutcome) -> Void
    }

    /// A finished run waiting to be published.
    private struct PendingRun: Sendable {
        var record: SharedRunRecord
        var job: JobName
    }

    private struct State {
        var role = ClusterRole.connecting
        var lease: Int64 = 0
        /// When the lease may have expired (its last renewal's send time + TTL).
        var leaseDeadline = MonoInstant.zero
        /// The create revision of `members/NODE` under the current lease (0: not a member now). Claims
        /// require it unchanged: the key goes with the lease.
        var memberRevision: Int64 = 0
        var problem: String?
        /// The revision the watch continues from.
        var watchRevision: Int64 = 0
        var synced = false
        var watching = false
        var watchStop: WatchStop?
        /// Each claim key's (`claims/JOB`, `triggers/JOB`) mod revision and instant (ns), as this node
        /// last read or claimed it.
        var claimRevisions: [String: Int64] = [:]
        var lastClaimed: [String: Int64] = [:]
        var stopped = false
        /// `members/NODE` as written at each renewal (the watch must see it: `checkWatch`), and the
        /// revision of the last write.
        var memberRecord: [UInt8] = []
        var heartbeat: Int64 = 0
        /// The live members as etcd has them (`members/`), by name.
        var members: [String: MemberRecord] = [:]
        /// The shared config jobs this node declares (in its `members/NODE`).
        var configJobs: [String] = []
        /// Claim transactions made, fires claimed (won or lost), the transactions' last round trips (ms).
        var claimTransactions = 0
        var claimFires = 0
        var claimRoundTrips: [Double] = []
    }
    private let state = Locked(State())

    private var modeKey: String { settings.prefix + "mode" }
    private var memberKey: String { settings.prefix + "members/" + node }
    private func jobKey(_ name: String) -> String { settings.prefix + "jobs/" + name }
    private func claimKey(_ name: String) -> String { settings.prefix + "claims/" + name }
    private func triggerKey(_ name: String) -> String { settings.prefix + "triggers/" + name }
    private var reportKey: String { settings.prefix + "reports/" + node }

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
        claims = Batches(label: "timerd.cluster.claims", split: Self.claimBatch) { [unowned self] batch in
            for (claim, outcome) in decideClaims(batch) { claim.done(outcome) }
        }
        reports = Batches(label: "timerd.cluster.runs", split: Self.reportBatch) { [unowned self] batch in publish(batch) }
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

    /// Leaves the cluster: stops renewing and revokes the lease, so the other members take this node's
    /// jobs over at once instead of after `lease_ttl`. Blocks for at most a request timeout or so.
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
            leave(.unavailable, reason: "timerd is stopping")
            do {
                try client.revoke(lease)
                log.info("cluster: lease revoked; the other members take this node's jobs over now")
            } catch {
                log.warning("cluster: could not revoke the lease (\(error)); the other members take this node's jobs over after lease_ttl")
            }
        }
    }

    /// The shared config jobs (`cluster = yes`) this node's config declares: written to `members/NODE`
    /// (now, if the node is in the cluster), since only members that declare a config job may run it.
    func declare(configJobs: [String]) {
        let changed = state.withLock { state -> Bool in
            guard state.configJobs != configJobs else { return false }
            state.configJobs = configJobs
            return true
        }
        guard changed else { return }
        sessionQueue.async { [self] in
            let lease = state.withLock { $0.lease }
            guard lease != 0 else { return }
            let bytes = memberRecord()
            if let revision = try? client.put(memberKey, bytes, lease: lease) {
                state.withLock {
                    $0.memberRecord = bytes
                    $0.heartbeat = revision
                }
            }
        }
    }

    private func memberRecord() -> [UInt8] {
        let jobs = state.withLock { $0.configJobs }
        let record = MemberRecord(since: clock.wallNow.nanosecondsSinceEpoch, pid: Int(CurrentProcess.id), version: ControlHandler.version,
                                  tags: settings.tags, config_jobs: jobs)
        return Array(Payload.encode(record).utf8)
    }

    // MARK: - Session (on sessionQueue)

    private func sessionTick() {
        guard !state.withLock({ $0.stopped }) else { return }
        let lease = state.withLock { $0.lease }
        let sent = clock.monotonicNow
        if lease == 0 {
            do {
                let granted = try client.grantLease(ttl: ttlSeconds)
                let bytes = memberRecord()
                let revision = try client.put(memberKey, bytes, lease: granted.id)
                // The key is new with the lease (the old lease's went with it); read its create revision.
                let created = try client.get(memberKey).kvs.first?.createRevision ?? revision
                state.withLock {
                    $0.lease = granted.id
                    $0.leaseDeadline = sent + .seconds(granted.ttl)
                    $0.memberRevision = created
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
                leave(.connecting, reason: "its lease expired")
                state.withLock {
                    $0.lease = 0
                    $0.memberRevision = 0
                }
                return sessionTick()
            } catch {
                unreachable(error)
                return
            }
        }
        armDeadline()
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

    /// etcd answered and this node holds a lease: it is a member (again) if it was not.
    private func connected(_ detail: String) {
        if state.withLock({ $0.role != .member }) { refreshClaims() }
        var previous = ClusterRole.connecting
        var problem: String?
        transition { state in
            previous = state.role
            problem = state.problem
            state.problem = nil
            guard state.role != .member, state.memberRevision != 0 else { return nil }
            state.role = .member
            return view(state, reason: "this node joined the cluster")
        }
        if previous != .member {
            log.notice("cluster: connected to etcd (\(detail))" + (problem.map { "; it was unavailable: \($0)" } ?? ""))
        } else {
            log.debug("cluster: \(detail)")
        }
    }

    /// etcd did not answer (or has no quorum). A node that is not a member says so at once; a member keeps
    /// its jobs until its lease may have expired (`deadlinePassed`): the other members cannot take them
    /// before, and its claims fail meanwhile if etcd is really gone.
    private func unreachable(_ error: EtcdError) {
        let message = Self.describe(error)
        var previous = ClusterRole.connecting
        var hadProblem = false
        transition { state in
            previous = state.role
            hadProblem = state.problem != nil
            state.problem = message
            guard state.role == .connecting else { return nil }
            state.role = .unavailable
            return view(state, reason: "etcd is unavailable")
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

    /// Reads every claim (`claims/`, `triggers/`) before this node takes jobs over: where their schedules
    /// go on from, and what its claims compare against. If etcd does not answer, what this node knows
    /// serves: its claims still fail for any instant already claimed.
    private func refreshClaims() {
        var read: [(key: String, revision: Int64, at: Int64?)] = []
        for folder in ["claims/", "triggers/"] {
            guard let (kvs, _) = try? client.get(settings.prefix + folder, prefix: true) else { continue }
            for kv in kvs { read.append((kv.key, kv.modRevision, try? Payload.decode(ClaimRecord.self, from: kv.valueString).at)) }
        }
        state.withLock { state in
            for item in read {
                state.claimRevisions[item.key] = max(state.claimRevisions[item.key] ?? 0, item.revision)
                if let at = item.at { state.lastClaimed[item.key] = max(state.lastClaimed[item.key] ?? at, at) }
            }
        }
    }

    /// The registry's update for the cluster as `state` has it: this node's role, the live members, and
    /// the last instant claimed for each job's schedule.
    private func view(_ state: State, reason: String) -> @Sendable (isolated Registry) -> Void {
        let role = state.role
        let members = state.members.map { name, record in
            ClusterMember(name: name, tags: record.tags, configJobs: Set(record.config_jobs))
        }.sorted { $0.name < $1.name }
        let base = settings.prefix + "claims/"
        var claims: [JobName: WallTime] = [:]
        for (key, at) in state.lastClaimed where key.hasPrefix(base) {
            if let name = try? JobName(String(key.dropFirst(base.count))) { claims[name] = WallTime(nanosecondsSinceEpoch: at) }
        }
        let claimed = claims
        return { $0.applyClusterView(role: role, members: members, claims: claimed, reason: reason) }
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
        log.warning("cluster: no lease renewal got through for lease_ttl; this node runs no shared job until it is back")
        leave(.unavailable, reason: "its lease may have expired")
    }

    /// This node is not a member any more (its lease is gone or may be): it runs no shared job.
    private func leave(_ role: ClusterRole, reason: String) {
        transition { state in
            let wasMember = state.role == .member
            state.role = role
            guard wasMember || role == .unavailable else { return nil }
            return view(state, reason: reason)
        }
    }

    // MARK: - The shared state (initial read and watch)

    /// Reads everything under the prefix and hands the shared jobs, the members and the mode to the
    /// registry; the watch continues from there.
    private func resync() throws(EtcdError) {
        let (kvs, revision) = try client.get(settings.prefix, prefix: true)
        var records: [(name: JobName, record: SharedJobRecord, revision: Int64)] = []
        var mode: String?
        var members: [String: MemberRecord] = [:]
        var claimRevisions: [String: Int64] = [:]
        var lastClaimed: [String: Int64] = [:]
        for kv in kvs {
            switch parse(kv.key) {
            case .job(let name):
                if let record = try? Payload.decode(SharedJobRecord.self, from: kv.valueString) {
                    records.append((name, record, kv.modRevision))
                } else {
                    log.error("cluster: \(kv.key) does not hold a job record; ignored")
                }
            case .mode: mode = kv.valueString
            case .member(let name):
                if let record = try? Payload.decode(MemberRecord.self, from: kv.valueString) { members[name] = record }
            case .claim:
                claimRevisions[kv.key] = kv.modRevision
                if let record = try? Payload.decode(ClaimRecord.self, from: kv.valueString) { lastClaimed[kv.key] = record.at }
            default: break
            }
        }
        log.info("cluster: \(records.count.counted("shared job")) and \(members.count.counted("live member")) in etcd at revision \(revision)")
        let (jobs, clusterMode) = (records, mode)
        transition { state in
            state.watchRevision = revision + 1
            state.synced = true
            state.members = members
            state.claimRevisions = claimRevisions
            state.lastClaimed = lastClaimed
            registry.enqueue { $0.syncSharedJobs(jobs, mode: clusterMode) }
            return view(state, reason: "read the cluster from etcd")
        }
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
            // jobs/, members/, mode, reports/ (sorted between them); not claims/, triggers/.
            let end = client.watch(settings.prefix + "jobs/", prefix: false, end: settings.prefix + "reports0", from: from, stop: stop,
                                   onCreated: { _ in }) { [self] events, revision in
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
        case job(JobName), claim, report(String), member(String), mode, other
    }

    private func parse(_ key: String) -> Key {
        guard key.hasPrefix(settings.prefix) else { return .other }
        let rest = key.utf8.dropFirst(settings.prefix.utf8.count)
        func after(_ folder: String) -> String? {
            rest.starts(with: folder.utf8) ? String(Substring(rest.dropFirst(folder.utf8.count))) : nil
        }
        if let name = after("claims/") ?? after("triggers/") { return name.isEmpty ? .other : .claim }
        if let name = after("reports/") { return .report(name) }
        if let name = after("jobs/") { return (try? JobName(name)).map(Key.job) ?? .other }
        if let name = after("members/") { return .member(name) }
        if String(Substring(rest)) == "mode" { return .mode }
        return .other
    }

    private func handle(_ events: [EtcdEvent]) {
        var membersChanged = false
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
            case (.report(let from), .put):
                guard from != node, let batch = try? Payload.decode(RunReports.self, from: kv.valueString) else { continue }
                let runs = batch.runs.compactMap { record in (try? JobName(record.job ?? "")).map { ($0, record) } }
                registry.enqueue { registry in for (name, record) in runs { registry.noteRemoteRun(name, record) } }
            case (.member(let name), .put):
                // Renewals rewrite the record with the same content: only a new member or new tags or
                // config jobs change the placement.
                guard let record = try? Payload.decode(MemberRecord.self, from: kv.valueString) else { continue }
                let changed = state.withLock { state -> Bool in
                    let old = state.members[name]
                    state.members[name] = record
                    return old == nil || old!.tags != record.tags || old!.config_jobs != record.config_jobs
                }
                if changed {
                    membersChanged = true
                    log.info("cluster: member \(name) joined or changed" + (record.tags.isEmpty ? "" : " (tags \(record.tags.joined(separator: ", ")))"))
                }
            case (.member(let name), .delete):
                if state.withLock({ $0.members.removeValue(forKey: name) }) != nil {
                    membersChanged = true
                    log.info("cluster: member \(name) left (its lease expired or was revoked)")
                }
            default:
                break
            }
        }
        if membersChanged {
            refreshClaims()
            transition { view($0, reason: "the members changed") }
        }
    }

    // MARK: - Claims (ClusterGate)

    /// The most claims in one transaction: each is a compare and a put, with this node's member key's
    /// compare besides, and etcd takes at most 128 operations per branch (`--max-txn-ops`).
    static let maxClaimsPerTransaction = 127

    /// Claims the fire at `instant`. Claims that arrive while a transaction is out go together in the
    /// next: no waiting when fires are few, one round trip for many when they are many.
    func claim(_ job: JobName, at instant: WallTime, triggered: Bool, done: @escaping @Sendable (ClaimOutcome) -> Void) {
        let key = triggered ? triggerKey(job.rawValue) : claimKey(job.rawValue)
        claims.add(PendingClaim(key: key, at: instant.nanosecondsSinceEpoch, done: done))
    }

    /// The next claims to make together: distinct keys (etcd refuses two puts of one key in a
    /// transaction; a second fire of a job waits for the next batch), at most `maxClaimsPerTransaction`.
    private static func claimBatch(_ waiting: [PendingClaim]) -> (batch: [PendingClaim], rest: [PendingClaim]) {
        var keys = Set<String>()
        var batch: [PendingClaim] = []
        var rest: [PendingClaim] = []
        for claim in waiting {
            if batch.count < maxClaimsPerTransaction, keys.insert(claim.key).inserted { batch.append(claim) } else { rest.append(claim) }
        }
        return (batch, rest)
    }

    /// Claims each fire under its key (`claims/JOB` or `triggers/JOB`), in one transaction while none of
    /// them changed meanwhile; a fire already claimed (by this node or another) is lost, the others are
    /// tried again.
    private func decideClaims(_ batch: [PendingClaim]) -> [(PendingClaim, ClaimOutcome)] {
        state.withLock { $0.claimFires += batch.count }
        let snapshot = state.withLock { (role: $0.role, member: $0.memberRevision, leaseDeadline: $0.leaseDeadline) }
        guard snapshot.role == .member, snapshot.member != 0 else {
            return batch.map { ($0, .lost("this node is not a live member of the cluster")) }
        }
        guard clock.monotonicNow < snapshot.leaseDeadline else {
            return batch.map { ($0, .lost("this node's lease may have expired (no renewal got through for lease_ttl)")) }
        }
        var decided: [(PendingClaim, ClaimOutcome)] = []
        func lost(_ claim: PendingClaim, by node: String?) {
            let when = RFC3339.format(WallTime(nanosecondsSinceEpoch: claim.at))
            decided.append((claim, .lost(node.map { "node \($0) already claimed its fire at \(when)" } ?? "its fire at \(when) was already claimed")))
        }
        var open: [PendingClaim] = []
        let last = state.withLock { state in batch.map { state.lastClaimed[$0.key] } }
        for (claim, last) in zip(batch, last) {
            if let last, claim.at <= last { lost(claim, by: nil) } else { open.append(claim) }
        }
        for _ in 0..<3 where !open.isEmpty {
            let known = state.withLock { state in open.map { state.claimRevisions[$0.key] ?? 0 } }
            let values = open.map { Array(Payload.encode(ClaimRecord(at: $0.at, node: node)).utf8) }
            let started = clock.monotonicNow
            let result: EtcdTxnResult
            do {
                result = try client.txn(
                    compare: [.createRevision(memberKey, equals: snapshot.member)] + zip(open, known).map { .modRevision($0.key, equals: $1) },
                    success: zip(open, values).map { .put($0.key, value: $1) },
                    failure: [.get(memberKey)] + open.map { .get($0.key) })
            } catch {
                let reason = "cannot claim it in etcd: \(Self.describe(error))"
                return decided + open.map { ($0, .lost(reason)) }
            }
            let milliseconds = Double((clock.monotonicNow - started).nanoseconds) / 1_000_000
            state.withLock { state in
                state.claimTransactions += 1
                if state.claimRoundTrips.count >= 1_024 { state.claimRoundTrips.removeFirst(state.claimRoundTrips.count - 1_023) }
                state.claimRoundTrips.append(milliseconds)
            }
            if result.succeeded {
                state.withLock { state in
                    for claim in open {
                        state.claimRevisions[claim.key] = max(state.claimRevisions[claim.key] ?? 0, result.revision)
                        state.lastClaimed[claim.key] = max(state.lastClaimed[claim.key] ?? claim.at, claim.at)
                    }
                }
                return decided + open.map { ($0, .won) }
            }
            guard result.ranges.first?.first?.createRevision == snapshot.member else {
                leave(.unavailable, reason: "its member key is gone (its lease expired)")
                return decided + open.map { ($0, .lost("this node is no longer a live member of the cluster")) }
            }
            var still: [PendingClaim] = []
            for (index, claim) in open.enumerated() {
                let current = result.ranges.count > index + 1 ? result.ranges[index + 1].first : nil
                let record = current.flatMap { try? Payload.decode(ClaimRecord.self, from: $0.valueString) }
                state.withLock { state in
                    state.claimRevisions[claim.key] = current?.modRevision ?? 0
                    if let record { state.lastClaimed[claim.key] = max(state.lastClaimed[claim.key] ?? record.at, record.at) }
                }
                if let record, record.at >= claim.at { lost(claim, by: record.node) } else { still.append(claim) }
            }
            open = still
        }
        return decided + open.map { ($0, .lost("its claim kept changing in etcd")) }
    }

    /// The claims this node made, for `CLUSTER` (nil before the first).
    func claimStats() -> ClusterInfo.ClaimStats? {
        let (transactions, fires, samples) = state.withLock { ($0.claimTransactions, $0.claimFires, $0.claimRoundTrips) }
        guard transactions > 0 else { return nil }
        let sorted = samples.sorted()
        func rank(_ p: Double) -> Double { sorted[max(0, min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1))] }
        return ClusterInfo.ClaimStats(transactions: transactions, fires: fires, p50_ms: rank(0.5), p99_ms: rank(0.99))
    }

    /// The most a report batch carries: etcd takes requests up to 1.5 MiB (`--max-request-bytes`), and a
    /// run's output tail is up to 4 KiB.
    static let maxReportBytes = 512 * 1_024

    /// Tells the other nodes of a finished run: runs finishing together go in one write of
    /// `reports/NODE`, which every node's watch delivers (under the lease: it goes with the node).
    func publishRun(_ job: JobName, _ record: SharedRunRecord) {
        var record = record
        record.job = job.rawValue
        reports.add(PendingRun(record: record, job: job))
    }

    /// The next runs to report together: the oldest, up to `maxReportBytes` (at least one).
    private static func reportBatch(_ waiting: [PendingRun]) -> (batch: [PendingRun], rest: [PendingRun]) {
        var bytes = 0
        var count = 0
        for run in waiting {
            bytes += run.record.output.utf8.count + 256
            if count > 0, bytes > maxReportBytes { break }
            count += 1
        }
        return (Array(waiting.prefix(count)), Array(waiting.dropFirst(count)))
    }

    private func publish(_ batch: [PendingRun]) {
        let lease = state.withLock { $0.lease }
        let value = Array(Payload.encode(RunReports(runs: batch.map(\.record))).utf8)
        do throws(EtcdError) {
            _ = try client.put(reportKey, value, lease: lease)
        } catch {
            log.warning("cluster: cannot tell the other nodes of \(batch.count.counted("finished run")) "
                        + "(\(Set(batch.map(\.job.rawValue)).sorted().prefix(5).joined(separator: ", "))…): \(Self.describe(error))")
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
        let stale = [claimKey(name.rawValue), triggerKey(name.rawValue)].map { EtcdOperation.delete($0) }
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

    /// Deletes shared jobs (one transaction), then their claims. Those go afterwards, in
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
                                           [claimKey(name.rawValue), triggerKey(name.rawValue)].map { EtcdOperation.delete($0) }
                                       })
                } catch {
                    return log.warning("cluster: cannot delete the claims of cancelled jobs: \(Self.describe(error)); they go when a job of the name is added again")
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

    /// `CLUSTER`: the live members with their tags and how many shared jobs each runs (`owned`, as this
    /// node places them), this node's lease and claims, and each etcd endpoint's health.
    func info(sharedJobs: Int, owned: [String: Int], waiting: Int) async -> ClusterInfo {
        let client = self.client
        let snapshot = state.withLock { (role: $0.role, problem: $0.problem, lease: $0.lease, leaseDeadline: $0.leaseDeadline, members: $0.members) }
        let endpoints = await withCheckedContinuation { (continuation: CheckedContinuation<[ClusterInfo.Endpoint], Never>) in
            writeQueue.async {
                let names = Dictionary((try? client.members())?.map { ($0.id, $0.name) } ?? [], uniquingKeysWith: { first, _ in first })
                continuation.resume(returning: client.status().map { status in
                    ClusterInfo.Endpoint(
                        url: status.endpoint, healthy: status.healthy, member: status.healthy ? names[status.memberID] : nil,
                        version: status.healthy ? status.version : nil,
                        is_leader: status.healthy && status.leaderID != 0 && status.leaderID == status.memberID,
                        error: status.error.map { $0.hasPrefix("etcd unavailable: ") ? String($0.dropFirst(18)) : $0 })
                })
            }
        }
        let members = snapshot.members.map { name, record in
            ClusterInfo.Member(name: name, since: RFC3339.format(WallTime(nanosecondsSinceEpoch: record.since)), pid: record.pid,
                               tags: record.tags, jobs: owned[name] ?? 0)
        }.sorted { $0.name < $1.name }
        let remaining: Double? = snapshot.lease == 0 ? nil
            : max(0, Double((snapshot.leaseDeadline - clock.monotonicNow).nanoseconds) / 1e9)
        return ClusterInfo(
            node: node, role: snapshot.role.rawValue, tags: settings.tags, problem: snapshot.problem,
            lease: snapshot.lease == 0 ? nil : Self.hex(snapshot.lease), lease_ttl: Int(ttlSeconds),
            lease_remaining: remaining, members: members, shared_jobs: sharedJobs, waiting_jobs: waiting, claims: claimStats(),
            prefix: settings.prefix, etcd: endpoints)
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
