import TimerdCore
import TimerdProtocol
import TimerdSystem

extension Registry {
    // MARK: - Owners

    /// Binds an `owner=` job to its owner: a pidfd watch for `pid:N`, the adding connection for
    /// `connection`. Throws `bad-argument` when the owner does not exist or cannot apply.
    func bindOwner(_ job: inout Job, connection: Int?) throws(TimerdError) {
        guard let owner = job.spec.owner else { return }
        guard job.origin == .runtime else {
            throw TimerdError(.badArgument, "owner applies only to jobs added over the control socket", key: "owner")
        }
        switch owner {
        case .connection:
            guard let connection else {
                throw TimerdError(.badArgument, "owner=connection needs a control connection", key: "owner")
            }
            job.ownerConnection = connection
            // Nothing after bindOwner in `add` can fail, so the index names only added jobs; connectionClosed
            // still checks each job's owner before cancelling it.
            jobsOwnedByConnection[connection, default: []].insert(job.spec.name)
        case .process(let pid):
            // The pidfd pins this very process: if it exits, the watch fires even when its PID is reused.
            let pidfd: FileDescriptor
            do {
                pidfd = try ProcessControl.openPidfd(pid)
            } catch {
                throw TimerdError(.badArgument, "owner: no process \(pid) (\(error))", key: "owner")
            }
            let name = job.spec.name
            let jobID = job.id
            do {
                job.ownerWatch = try IOWatcher.shared.watch(pidfd, for: .readable, on: queue) { [unowned self] _ in
                    self.assumeIsolated { $0.ownerExited(name, jobID: jobID, pid: pid) }
                }
            } catch {
                try? pidfd.close()
                throw TimerdError(.internal, "cannot watch process \(pid): \(error)")
            }
        }
    }

    /// Stops watching a removed job's owner.
    func releaseOwner(_ job: inout Job) {
        guard let watch = job.ownerWatch else { return }
        IOWatcher.shared.cancel(watch)
        try? watch.fd.close()
        job.ownerWatch = nil
    }

    private func ownerExited(_ name: JobName, jobID: UInt64, pid: Int32) {
        guard let job = jobs[name], job.id == jobID else { return }
        remove(name, reason: "cancelled: its owner process \(pid) exited")
    }

    /// A control connection closed: cancel the jobs it owned (`owner=connection`).
    func connectionClosed(_ connection: Int) {
        removeWatcher(connection)
        let owned = jobsOwnedByConnection.removeValue(forKey: connection) ?? []
        for name in owned.sorted() where jobs[name]?.ownerConnection == connection {
            remove(name, reason: "cancelled: the control connection that added it (owner=connection) closed")
        }
    }

    // MARK: - Tags

    /// Jobs carrying `tag`, sorted by name.
    func names(withTag tag: String) -> [JobName] {
        jobs.compactMap { $0.value.spec.tags.contains(tag) ? $0.key : nil }.sorted()
    }

    /// The jobs with `tag` that `client` may change: all of them for root, the client's own otherwise (a
    /// user's `CANCEL tag=T` never touches another user's jobs).
    func names(withTag tag: String, changeableBy client: Client) -> [JobName] {
        jobs.compactMap { $0.value.spec.tags.contains(tag) && maySeeDetails($0.value, client) ? $0.key : nil }.sorted()
    }

    /// Whether a control connection owns `owner=connection` jobs (such a connection is never idle-closed).
    func ownsJobs(connection: Int) -> Bool {
        !(jobsOwnedByConnection[connection]?.isEmpty ?? true)
    }

    // MARK: - Modes

    /// Holds a scheduled fire while the daemon is in a mode the job does not run in. A job holds at most
    /// one fire (a repeating job fires once when its mode returns, not a burst); later ones are skipped.
    func hold(_ name: JobName, _ pending: PendingFire) -> String {
        guard var job = jobs[name] else { return "skipped" }
        guard job.heldFire == nil else {
            noteSkip(name, count: 1, reason: "held: the daemon is in mode \(currentMode) and one fire is already held")
            return "skipped"
        }
        job.heldFire = pending
        job.heldSince = SystemClock.wallNow()
        job.acceptedFires += 1
        jobs[name] = job
        log.info(job: name.rawValue, "fire held: the daemon is in mode \(currentMode); the job runs in \(job.spec.modes.joined(separator: ","))")
        return "held"
    }

    /// Switches the daemon's mode and starts the held fires of jobs that run in the new one.
    func switchMode(to mode: String) -> ModeInfo {
        let previous = currentMode
        currentMode = mode
        var released: [String] = []
        if previous != mode {
            log.notice("mode is now \(mode) (was \(previous))")
            for name in jobs.keys.sorted() {
                guard var job = jobs[name], let held = job.heldFire, Mode.includes(job.spec.modes, mode) else { continue }
                job.heldFire = nil
                job.heldSince = nil
                job.acceptedFires -= 1  // `fire` counts it again, now that it is really handled
                jobs[name] = job
                released.append(name.rawValue)
                log.info(job: name.rawValue, "held fire released (mode \(mode))")
                // Through `fire`, so the overlap policy and the run cap apply as to any fire.
                fire(name, scheduledMono: held.scheduledMono, kind: held.kind)
                noteIfIdleAndFinished(name)
            }
            noteStatusChange()
        }
        return ModeInfo(mode: mode, previous: previous, held: heldFires(), released: released)
    }

    func modeInfo() -> ModeInfo {
        ModeInfo(mode: currentMode, held: heldFires())
    }

    private func heldFires() -> [ModeInfo.Held] {
        jobs.keys.sorted().compactMap { name in
            jobs[name]!.heldSince.map { ModeInfo.Held(name: name.rawValue, since: RFC3339.format($0)) }
        }
    }
}
