import Synchronization
import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdStore
import TimerdSystem

/// Turns one request line into one reply: parses it, decodes it into a `ControlCommand` (which checks the
/// words each verb takes), and carries the command out with the registry.
///
/// Bad input of any kind becomes an `ERR` reply; nothing here can stop the daemon or a connection.
struct ControlHandler: Sendable {
    let registry: Registry
    /// The access settings in force (allow-lists; the registry and connections enforce the limits).
    let access: AccessControl
    /// How users and groups are looked up (the system's account database; a fixed table in tests).
    let accounts: any AccountDirectory
    /// Requests answered so far (for `STATS`).
    let requests = RequestCounter()
    /// Re-reads the config files and applies them (owned by the daemon, which knows the paths).
    let reload: @Sendable () async throws(TimerdError) -> ReloadSummary
    /// Cluster mode: the etcd session shared jobs are written through (`docs/cluster.md`).
    var cluster: ClusterNode? = nil

    static let version = "0.1.0"
    static let protocolVersion = 1

    /// Handles one line from control connection `connection` (the owner of `owner=connection` jobs).
    func handle(_ framed: FramedLine, connection: Int, client: Client = .daemon) async -> Reply {
        await handleWatching(Self.parse(framed), connection: connection, client: client).reply
    }

    /// A request line parsed, or why it is not a request (too long, bad words).
    static func parse(_ framed: FramedLine) -> Result<Request, TimerdError> {
        switch framed {
        case .tooLong:
            .failure(TimerdError(.lineTooLong, "request line longer than \(Limits.maxLineBytes) bytes; it was discarded"))
        case .line(let bytes):
            Result { () throws(TimerdError) in try Request.parse(line: bytes) }
        }
    }

    /// Like `handle` (for a line already parsed), and also says when the request was an accepted
    /// `WATCH`: the connection then turns into a stream of events matching the filter.
    func handleWatching(_ parsed: Result<Request, TimerdError>, connection: Int, client: Client = .daemon) async -> (reply: Reply, watch: WatchFilter?) {
        requests.increment()
        do {
            let request = try parsed.get()
            guard request.verb == .watch else { return (try await handle(request, connection: connection, client: client), nil) }
            let filter = try await watchFilter(request, client: client)
            return (.ok(Payload.encode(["watching": filter.label])), filter)
        } catch {
            return (Reply(error), nil)
        }
    }

    /// Handles a well-formed `LIST` whose reply line goes to `sink` as it is written (a connection's
    /// socket): `OK [...]` and its newline, a slice of jobs at a time.
    func streamList(tag: String?, client: Client, to sink: @escaping @Sendable ([UInt8]) async -> Bool) async {
        requests.increment()
        await JobList.stream(registry, tag: tag, viewer: client, to: sink)
    }

    /// A job's finished runs from the state store, newest first (read off the registry's queue).
    private func history(_ name: JobName, limit: Int, withOutput: Bool) throws(TimerdError) -> [RunRecord] {
        guard let store = registry.store else { return [] }
        do {
            return try store.history(job: name.rawValue, limit: limit).map { run in
                RunRecord(
                    run: run.run, scheduled_at: run.scheduledAt.map(RFC3339.format), started_at: RFC3339.format(run.startedAt),
                    ended_at: RFC3339.format(run.endedAt), result: run.result, exit_code: run.exitCode,
                    http_status: run.httpStatus, lateness_ms: run.latenessMs, output: withOutput ? run.output : nil,
                    node: run.node ?? cluster?.node, cpu_usage_ms: run.cpuUsageMs, memory_peak_bytes: run.memoryPeakBytes.map(Int64.init),
                    io_read_bytes: run.ioReadBytes.map(Int64.init), io_write_bytes: run.ioWriteBytes.map(Int64.init),
                    attempt: run.attempt,
                    parameters: run.parameters.flatMap { try? Payload.decode(RunParameters.self, from: $0) })
            }
        } catch {
            throw TimerdError(.internal, "cannot read the history: \(error.message)")
        }
    }

    /// A job's newest due fires from the state store, newest first (read off the registry's queue).
    private func dueFires(_ name: JobName, limit: Int, withReasons: Bool) throws(TimerdError) -> [DueFire] {
        guard let store = registry.store else { return [] }
        do {
            return try store.dueFires(job: name.rawValue, limit: limit).map { fire in
                DueFire(
                    scheduled: RFC3339.format(fire.scheduled), outcome: fire.outcome, run: fire.run, lateness_ms: fire.latenessMs,
                    result: fire.result, reason: withReasons ? fire.reason : nil)
            }
        } catch {
            throw TimerdError(.internal, "cannot read the fire records: \(error.message)")
        }
    }

    private func watchFilter(_ request: Request, client: Client) async throws(TimerdError) -> WatchFilter {
        guard case .watch(let target) = try ControlCommand(request) else {
            throw TimerdError(.internal, "a WATCH request decoded to another command")
        }
        switch target {
        case .all: return .all
        case .tag(let tag):
            // As for an unknown name: a watch of nothing would wait forever.
            guard await registry.hasJobs(withTag: tag) else { throw TimerdError(.noSuchJob, "no jobs with tag \(tag)") }
            return .tag(tag)
        case .job(let name):
            _ = try await registry.show(name, viewer: client)  // no-such-job for an unknown name
            return .job(name)
        }
    }

    func handle(_ request: Request, connection: Int, client: Client = .daemon) async throws(TimerdError) -> Reply {
        try await handle(ControlCommand(request), connection: connection, client: client)
    }

    func handle(_ command: ControlCommand, connection: Int, client: Client = .daemon) async throws(TimerdError) -> Reply {
        switch command {
        case .ping:
            return .ok(nil)
        case .version:
            return .ok(Payload.encode(VersionInfo(version: Self.version, protocol: Self.protocolVersion)))
        case .help:
            return .ok(Payload.encode(ControlCommand.usage.map { $0.1 }))
        case .add(let name, let options, let argv):
            let spec = try addSpec(name, options, argv, client: client)
            if try await addShared(spec, client: client) { return .ok(nil) }
            try await registry.add(spec, origin: .runtime, connection: connection, owner: client)
            return .ok(nil)
        case .exec(let options, let argv):
            // Validate first, so a rejected EXEC does not use up a generated name.
            var spec = try execSpec(options, argv, client: client)
            spec.name = await registry.generateName()
            if cluster != nil, await registry.sharesJob(spec, origin: .runtime) {
                // Another node may have handed out the same generated name: take the next one.
                for attempt in 1... {
                    do {
                        _ = try await addShared(spec, client: client)
                        return .ok(Payload.encode(["name": spec.name.rawValue]))
                    } catch where error.code == .exists && attempt < 20 {
                        spec.name = await registry.generateName()
                    }
                }
            }
            try await registry.add(spec, origin: .runtime, connection: connection, owner: client)
            return .ok(Payload.encode(["name": spec.name.rawValue]))
        case .cancel(let selection):
            let names = await jobs(selection, client)
            var local = names
            if let cluster {
                try await registry.cancel(names, by: client, checkOnly: true)
                let shared = await registry.sharedNames(names)
                if !shared.isEmpty {
                    // Removed here now, unless this node's own watch already did.
                    await registry.removeSharedJobs(shared, revision: try await cluster.deleteJobs(shared))
                }
                local = names.filter { !shared.contains($0) }
            }
            // Checked whole and written in one transaction; many jobs then take effect in slices.
            if !local.isEmpty { try await registry.cancel(local, by: client) }
            return Self.reply(selection, names)
        case .pause(let selection):
            let names = await jobs(selection, client)
            try await registry.pause(names, by: client, checkOnly: true)
            let revision = try await writeShared(names, paused: true)
            try await registry.pause(names, by: client)
            if let revision { await registry.noteSharedRevision(names, revision: revision) }
            return Self.reply(selection, names)
        case .resume(let selection, let when):
            let mode = ResumeMode(when)
            let names = await jobs(selection, client)
            try await registry.resume(names, mode: mode, by: client, checkOnly: true)
            let revision = try await writeShared(names, paused: false)
            try await registry.resume(names, mode: mode, by: client)
            if let revision { await registry.noteSharedRevision(names, revision: revision) }
            return Self.reply(selection, names)
        case .run(let name, let parameters, let force):
            let status = try await registry.runNow(name, by: client, parameters: parameters, force: force)
            return .ok(Payload.encode(["status": status]))
        case .list(let tag):
            return .ok(await JobList.json(registry, tag: tag, viewer: client))
        case .watch:
            // Handled by `handleWatching` (it changes the connection); reaching here is a bug.
            throw TimerdError(.internal, "WATCH must go through handleWatching")
        case .history(let name, let limit):
            let info = try await registry.show(name, viewer: client)  // no-such-job for an unknown name
            let runs = try history(name, limit: limit ?? ControlCommand.defaultHistoryLimit, withOutput: !info.redacted)
            return .ok(Payload.encode(runs))
        case .why(let name, let limit):
            let info = try await registry.show(name, viewer: client)  // no-such-job for an unknown name
            // The records the registry holds (it writes them every 100 ms) are written first, so WHY
            // right after a fire or a PAUSE shows them.
            await registry.flushFireRecords()
            registry.store?.flush()
            var fires = try dueFires(name, limit: limit ?? ControlCommand.defaultWhyLimit, withReasons: !info.redacted)
            // A shared job no node runs now: its next fire waits, and why comes first.
            if info.state == .waiting, let next = info.next_fire {
                fires.insert(DueFire(scheduled: next, outcome: "waiting", reason: info.redacted ? nil : info.waiting_reason.map { "no node runs it: " + $0 }), at: 0)
            }
            return .ok(Payload.encode(fires))
        case .next(let options):
            let query = try NextFireQuery(options: options.map { KeyValue($0.key, $0.value) })
            let zone = try query.timezone.map { name throws(TimerdError) in try SystemTimeZones.zone(named: name) }
                ?? SystemTimeZones.systemZone()
            let times = try query.times(now: registry.clock.wallNow, zone: zone)
            return .ok(Payload.encode(NextTimes(timezone: zone.name, times: times.map { RFC3339.format($0, in: zone) })))
        case .stats:
            return .ok(Payload.encode(await registry.stats(requests: requests.value, version: Self.version)))
        case .mode(let name):
            guard let name else { return .ok(Payload.encode(await registry.modeInfo())) }
            try adminOnly(client, "switch the daemon's mode (MODE NAME)")
            try await cluster?.setMode(name)
            return .ok(Payload.encode(await registry.switchMode(to: name)))
        case .show(let name):
            var info = try await registry.show(name, viewer: client)
            info.recent_runs = try history(name, limit: 3, withOutput: !info.redacted)
            return .ok(Payload.encode(info))
        case .cluster:
            guard let cluster else {
                throw TimerdError(.badArgument, "timerd is not in cluster mode: its config has no [cluster] section (docs/cluster.md)")
            }
            let placement = await registry.placement()
            return .ok(Payload.encode(await cluster.info(sharedJobs: await registry.sharedJobCount(), owned: placement.owned, waiting: placement.waiting)))
        case .reload:
            try adminOnly(client, "reload the config (RELOAD)")
            return .ok(Payload.encode(try await reload()))
        }
    }

    /// The reply to CANCEL, PAUSE or RESUME: `OK`, or with a tag the jobs it acted on.
    private static func reply(_ selection: ControlCommand.Selection, _ names: [JobName]) -> Reply {
        guard case .tag = selection else { return .ok(nil) }
        return .ok(TagResult(jobs: names.map(\.rawValue)).json)
    }

    /// The jobs a selection names, or those with its tag that `client` may change (sorted off the
    /// registry's queue).
    private func jobs(_ selection: ControlCommand.Selection, _ client: Client) async -> [JobName] {
        switch selection {
        case .names(let names): names
        case .tag(let tag): await JobList.sorted(await registry.jobNames(withTag: tag, changeableBy: client))
        }
    }

    /// Cluster mode: writes a shared job to etcd, then builds it here as every node does from etcd's
    /// record. False (nothing done) when the job is not shared.
    private func addShared(_ spec: JobSpec, client: Client) async throws(TimerdError) -> Bool {
        guard let cluster, await registry.sharesJob(spec, origin: .runtime) else { return false }
        try await registry.checkAdd(spec, origin: .runtime, owner: client)
        let record = SharedJobRecord(
            options: spec.options.map { [$0.key, $0.value] }, paused: false,
            added_at: registry.clock.wallNow.nanosecondsSinceEpoch, owner_uid: client.uid, node: cluster.node)
        let revision = try await cluster.createJob(spec.name, record)
        await registry.applySharedJob(spec.name, record, revision: revision)
        return true
    }

    /// Cluster mode: sets `paused` in etcd for the shared jobs among `names` (one transaction); returns
    /// etcd's revision, or nil when none is shared.
    private func writeShared(_ names: [JobName], paused: Bool) async throws(TimerdError) -> Int64? {
        guard let cluster else { return nil }
        let records = await registry.sharedRecords(names, paused: paused)
        guard !records.isEmpty else { return nil }
        return try await cluster.updateJobs(records)
    }

    /// Throws `permission-denied` unless `client` is root or timerd's own user. `what`: what only root
    /// may do, as a verb phrase ("reload the config (RELOAD)").
    private func adminOnly(_ client: Client, _ what: String) throws(TimerdError) {
        guard !client.isAdmin else { return }
        let message = "only root may \(what)"
        log(client, "refused: \(message)")
        throw TimerdError(.permissionDenied, message)
    }

    /// The job an `ADD` describes, checked, and allowed for `client`.
    func addSpec(_ name: JobName, _ options: [Option], _ argv: [String]?, client: Client) throws(TimerdError) -> JobSpec {
        let spec = try JobSpec(name: name, options: options.map { KeyValue($0.key, $0.value) }, argv: argv)
        try mayAdd(spec, client: client)
        return spec
    }

    /// The job an `EXEC` describes (named `exec` until it is given its name), checked and allowed for
    /// `client` first, so a rejected `EXEC` does not use up a generated name.
    func execSpec(_ options: [Option], _ argv: [String]?, client: Client) throws(TimerdError) -> JobSpec {
        let spec = try ExecRequest.spec(name: try JobName("exec"), options: options.map { KeyValue($0.key, $0.value) }, argv: argv)
        try mayAdd(spec, client: client)
        return spec
    }

    /// Whether `client` may add `spec` (`docs/security.md`): root may add anything; other users must be
    /// allowed by `allow_users`/`allow_groups` when either is set, and their jobs run as themselves.
    private func mayAdd(_ spec: JobSpec, client: Client) throws(TimerdError) {
        let denied = { (message: String) -> TimerdError in
            self.log(client, "refused to add \(spec.name): \(message)")
            return TimerdError(.permissionDenied, message)
        }
        let daemonIsRoot = Client.daemonUID == 0
        if let problem = registry.resourceSupport.problem(spec.resources) { throw problem }
        if let user = spec.user, try accounts.user(named: user) == nil {
            throw TimerdError(.badArgument, "user: no such user \"\(user)\"", key: "user")
        }
        if let group = spec.group, try accounts.group(named: group) == nil {
            throw TimerdError(.badArgument, "group: no such group \"\(group)\"", key: "group")
        }
        if client.isAdmin {
            if !daemonIsRoot, let key = spec.user != nil ? "user" : spec.group != nil ? "group" : nil {
                throw denied("\(key)= needs timerd to run as root (it runs as uid \(Client.daemonUID))")
            }
            return
        }
        guard daemonIsRoot else {
            throw denied("timerd runs as uid \(Client.daemonUID), not root, so it cannot run jobs as uid \(client.uid)")
        }
        let account = try accounts.user(uid: client.uid)
        guard let account else {
            throw denied("uid \(client.uid) has no user account (passwd entry); timerd runs jobs only for known users")
        }
        let settings = access.settings
        if settings.allowUsers != nil || settings.allowGroups != nil {
            let listed = settings.allowUsers?.contains(account.name) == true
            var member = false
            if let names = settings.allowGroups {
                let groups = try accounts.groups(of: account)
                for name in names where try accounts.group(named: name).map({ groups.contains($0.gid) }) == true {
                    member = true
                }
            }
            guard listed || member else {
                throw denied("user \(account.name) may not add jobs: not in allow_users or allow_groups (ask the administrator)")
            }
        }
        if let user = spec.user, user != account.name {
            throw denied("user=\(user): only root may run jobs as another user; yours run as \(account.name)")
        }
        if let group = spec.group {
            guard let entry = try accounts.group(named: group), try accounts.groups(of: account).contains(entry.gid) else {
                throw denied("group=\(group): \(account.name) is not a member of it")
            }
        }
        if case .webhook(let hook) = spec.action, hook.caFile != nil {
            throw denied("ca_file= is for root only: timerd would read the file with its own rights")
        }
        if spec.logFile != nil {
            throw denied("log_file= is for root only: timerd would write the file with its own rights")
        }
        if let loosened = Self.loosened(spec.resources) { throw denied(loosened) }
        if let above = spec.resources.aboveCeiling(settings.userCeiling) {
            throw denied("\(above), the most a job of a user other than root may have")
        }
    }

    /// What in `resources` would give a run more than it gets by default, which only root may do
    /// (`docs/security.md`): a nice level below 0, real-time I/O, an OOM score adjustment below timerd's own,
    /// a CPU or I/O weight above the default 100, a resource limit above timerd's own hard limit (which
    /// the run inherits, and could not raise itself). Nil when there is none.
    static func loosened(_ resources: ResourceSettings) -> String? {
        if let nice = resources.nice, nice < 0 { return "nice=\(nice): only root may raise a run's priority (below 0)" }
        if resources.ionice?.ioClass == .realtime { return "ionice=\(resources.ionice!): only root may give a run real-time I/O" }
        if let adjustment = resources.oomScoreAdj, let own = CurrentProcess.oomScoreAdjustment(), adjustment < own {
            return "oom_score_adj=\(adjustment): only root may make a run less likely to be killed than timerd (\(own))"
        }
        for (key, weight) in [("cpu_weight", resources.cpuWeight), ("io_weight", resources.ioWeight)] {
            if let weight, weight > 100 { return "\(key)=\(weight): only root may give a run more than the default share (100)" }
        }
        for limit in resources.limits {
            guard let own = CurrentProcess.resourceLimits(limit.kind.resource) else { continue }
            if limit.hard.raw > own.hard || limit.soft.raw > own.hard {
                let shown = own.hard == .max ? "infinity" : String(own.hard)
                return "\(limit.kind.key)=\(limit.text): only root may raise a limit above timerd's own (hard limit \(shown))"
            }
        }
        return nil
    }

    private func log(_ client: Client, _ message: String) {
        registry.log.warning("control: \(client.label): \(message)")
    }
}

/// A counter shared by every copy of the handler.
final class RequestCounter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
