import Dispatch
import TimerdCore
import TimerdEngine
import TimerdHost
import TimerdProtocol
import TimerdStore
import TimerdSystem

/// What the registry needs from the cluster session (`ClusterNode`; a fake in unit tests).
protocol ClusterGate: AnyObject, Sendable {
    /// This node's name.
    var node: String { get }
    /// Tries to win the fire of `job` scheduled at `instant` in etcd (a fire by its upstream's run if
    /// `triggered`, claimed apart from its schedule's); `done` is called once, on any queue.
    func claim(_ job: JobName, at instant: WallTime, triggered: Bool, done: @escaping @Sendable (ClaimOutcome) -> Void)
    /// Tells the other nodes about a finished run of a shared job (for their history and `show`).
    func publishRun(_ job: JobName, _ record: SharedRunRecord)
    /// The shared config jobs (`cluster = yes`) this node's config declares (only members that declare
    /// one may run it).
    func declare(configJobs: [String])
}

enum ClaimOutcome: Sendable, Equatable {
    case won
    case lost(String)
}

/// Cluster mode (`docs/cluster.md`): shared jobs live in etcd and each runs on one live member, its owner,
/// each scheduled fire after the owner won it with an etcd transaction. The `ClusterNode` keeps the session
/// with etcd and calls in here; everything it reports becomes an engine input (role and members, claims,
/// the shared job set, other nodes' runs), and the engine's `claim` and `publishRun` effects go back to it.
extension Registry {
    func setCluster(_ gate: any ClusterGate) {
        cluster = gate
        engine.settings.clusterNode = gate.node
    }

    var clusterRole: ClusterRole { engine.clusterRole }

    /// Whether a job with `spec` from `origin` is shared: in cluster mode, jobs added at run time are
    /// unless `cluster=no`; config jobs only with `cluster=yes`; jobs bound to an owner never.
    func sharesJob(_ spec: JobSpec, origin: JobOrigin) -> Bool { engine.sharesJob(spec, origin: origin) }

    /// The node that runs `job`: this one for its own jobs, its owner for shared ones (nil while no live
    /// member can take it); nil on a single host.
    func runningNode(_ job: EngineJob, in engine: borrowing Engine) -> String? {
        guard let cluster else { return nil }
        return job.shared ? engine.owner(of: job) : cluster.node
    }

    /// Publishes a finished run of a shared job for the other nodes' history.
    func publishRun(_ record: FinishedRun, final: Bool) {
        guard let cluster else { return }
        let outcome = record.outcome
        let output = outcome.output.utf8.count <= SharedRunRecord.maxOutput
            ? outcome.output : String(decoding: outcome.output.utf8.suffix(SharedRunRecord.maxOutput), as: UTF8.self)
        cluster.publishRun(record.job, SharedRunRecord(
            node: cluster.node, run: record.run, scheduled_at: record.scheduledAt?.nanosecondsSinceEpoch,
            started_at: record.startedAt.nanosecondsSinceEpoch, ended_at: outcome.finishedWall.nanosecondsSinceEpoch,
            result: outcome.result.rawValue, exit_code: outcome.exitCode, http_status: outcome.httpStatus,
            lateness_ms: record.lateness.map { Double($0.nanoseconds) / 1_000_000 }, output: output, final: final))
    }

    /// A run of a shared job that another node finished: into this node's history and `show`.
    func noteRemoteRun(_ name: JobName, _ record: SharedRunRecord) {
        let started = WallTime(nanosecondsSinceEpoch: record.started_at)
        let ended = WallTime(nanosecondsSinceEpoch: record.ended_at)
        let run = FinishedRun(
            job: name, run: record.run, scheduledAt: record.scheduled_at.map { WallTime(nanosecondsSinceEpoch: $0) },
            startedAt: started, lateness: record.lateness_ms.map { .nanoseconds(Int64($0 * 1_000_000)) },
            outcome: RunOutcome(
                result: RunOutcome.Result(rawValue: record.result) ?? .failed, exitCode: record.exit_code, httpStatus: record.http_status,
                reason: record.result, output: record.output, finishedWall: ended, duration: max(.zero, ended - started)),
            node: record.node)
        if let job = engine.job(name), job.shared, record.node != cluster?.node {
            outputs.hold(record.output, of: name, jobID: job.id, limit: access.settings.maxOutputMemory, log: log)
        }
        deliver(.remoteRun(run, final: record.final ?? true))
    }

    // MARK: - Members

    /// This node's role or the live members changed: shared jobs move to their owners, each going on from
    /// the last instant claimed in etcd (`claims`, by job name).
    func applyClusterView(role: ClusterRole, members: [ClusterMember], claims: [JobName: WallTime], reason: String) {
        deliver(.clusterView(ClusterView(role: role, members: members, claims: claims, reason: reason)))
        noteStatusChange()
    }

    /// How many shared jobs each live member runs, and how many scheduled ones no member can take (the
    /// jobs `show` says are waiting), as this node sees it.
    func placement() -> (owned: [String: Int], waiting: Int) {
        var owned: [String: Int] = [:]
        var waiting = 0
        for job in engine.liveJobs where job.shared {
            if let owner = engine.owner(of: job) {
                owned[owner, default: 0] += 1
            } else if job.state == .scheduled {
                waiting += 1
            }
        }
        return (owned, waiting)
    }

    /// The shared config jobs (`cluster = yes`) this node declares: only members that declare one may run it.
    func sharedConfigJobs() -> [String] {
        engine.liveJobs.filter { $0.shared && $0.origin != .runtime }.map(\.name.rawValue).sorted()
    }

    // MARK: - The shared job set (from etcd)

    /// A shared job from its etcd record, or nil (logged) when this node cannot use it.
    private func sharedJob(_ name: JobName, _ record: SharedJobRecord, revision: Int64) -> SharedJob? {
        let options = record.options.compactMap { $0.count == 2 ? KeyValue($0[0], $0[1]) : nil }
        do {
            let spec = try JobSpec(name: name, options: options)
            return SharedJob(
                spec: spec, civil: try HostConfig.civilSchedule(for: spec), ownerUID: record.owner_uid,
                addedAt: WallTime(nanosecondsSinceEpoch: record.added_at), paused: record.paused, revision: revision, node: record.node)
        } catch {
            log.error(job: name.rawValue, "cluster job not usable here: \(error.message)")
            return nil
        }
    }

    /// Builds or updates a shared job from its etcd record (a watch event or the initial read). Records
    /// older than the one the job was built from are ignored.
    func applySharedJob(_ name: JobName, _ record: SharedJobRecord, revision: Int64) {
        guard let shared = sharedJob(name, record, revision: revision) else { return }
        deliver(.sharedJob(shared))
    }

    /// Shared jobs were cancelled (their etcd keys deleted) at `revision`: by a watch event, or by this
    /// node's own `CANCEL` (unless its watch got there first).
    func removeSharedJobs(_ names: [JobName], revision: Int64) {
        deliver(.sharedJobsRemoved(names, revision: revision))
    }

    /// The whole shared job set as etcd has it (at connect, and after a watch had to start over): jobs
    /// etcd no longer has are removed.
    func syncSharedJobs(_ records: [(name: JobName, record: SharedJobRecord, revision: Int64)], mode: String?) {
        deliver(.sharedJobsSynced(records.compactMap { sharedJob($0.name, $0.record, revision: $0.revision) }))
        if let mode { applyClusterMode(mode) }
    }

    /// Records the revision of a change this node made itself, so its own watch event is not applied twice.
    func noteSharedRevision(_ names: [JobName], revision: Int64) {
        deliver(.sharedRevision(names, revision: revision))
    }

    /// The cluster's mode changed (`MODE NAME` on some node).
    func applyClusterMode(_ mode: String) {
        guard mode != engine.currentMode, (try? Mode.validName(mode, key: "mode", what: "mode")) != nil else { return }
        _ = switchMode(to: mode)
    }

    // MARK: - For shared writes

    /// The shared runtime jobs among `names` (the ones whose change goes through etcd).
    func sharedNames(_ names: [JobName]) -> [JobName] {
        names.filter { engine.job($0)?.shared == true && engine.job($0)?.origin == .runtime }
    }

    /// The shared jobs among `names` whose `paused` would change, with what etcd should hold for each
    /// (for `PAUSE`/`RESUME`; resuming a job that runs writes nothing).
    func sharedRecords(_ names: [JobName], paused: Bool) -> [(name: JobName, record: SharedJobRecord, revision: Int64)] {
        guard let cluster else { return [] }
        return sharedNames(names).compactMap { name in
            let job = engine.job(name)!
            if (job.state == .paused) == paused || job.state == .finished { return nil }
            return (name, SharedJobRecord(
                options: job.spec.options.map { [$0.key, $0.value] }, paused: paused,
                added_at: job.addedWall.nanosecondsSinceEpoch, owner_uid: job.ownerUID, node: cluster.node), job.sharedRevision)
        }
    }

    /// Shared jobs this node knows of.
    func sharedJobCount() -> Int { engine.liveJobs.reduce(0) { $0 + ($1.shared ? 1 : 0) } }
}
