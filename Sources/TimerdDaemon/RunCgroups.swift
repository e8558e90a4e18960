import Dispatch
import TimerdCore
import TimerdSystem

/// A run's cgroup, `runs/JOB@N`: made for one of the job's runs and kept, empty, for its next ones while
/// they come within `RunCgroups.linger` of each other. Runs of a job at once each have one (N = 1, 2, …).
/// What a run used is the difference of the cgroup's cumulative counters over the run.
struct RunCgroup: Sendable {
    let job: String
    let slot: Int
    /// Its files opened from `runs/`, kept open by `RunCgroups` (a lookup of one name instead of the
    /// whole path's).
    let directory: CgroupDirectory
    /// The limits written when it was made (`ResourceSettings.cgroupFiles`, `file=value`).
    let limits: [String]
    /// Its counters when the current run began.
    var before = RunCgroupCounters()
    /// With the memory controller, where cgroups are reused: `memory.peak` open for the current run, reset
    /// when it began (a peak read through this descriptor is the run's own; Linux 6.12).
    var peak: FileDescriptor?
    /// When it was last left empty (`DispatchTime`'s uptime nanoseconds).
    var idleSince: UInt64 = 0
}

/// A run's cgroup's cumulative counters: CPU time (`cpu.stat`), bytes read and written (`io.stat`, with
/// the io controller) and the OOM killer's kills (`memory.events`, read for runs with a memory limit).
struct RunCgroupCounters: Sendable, Equatable {
    /// Nil when `cpu.stat` could not be read.
    var cpu: Duration? = .zero
    /// Nil without the io controller, or when `io.stat` could not be read.
    var ioRead: Int64? = 0
    var ioWritten: Int64? = 0
    var oomKills = 0
}

/// The runs' cgroups and the watch over them, for `CommandRun`s (on the runs' queue).
///
/// Making and removing a cgroup for every run put the loop's thread behind the cgroup file system's locks
/// (the `runs/` directory's, and `cgroup_mutex`, which clone3 into a cgroup takes too) at every run: at
/// 1,000 runs a second, tens of ms of stalls (docs/performance.md, "Runs in cgroups"). So a job's cgroup
/// is kept for its next run: an ended run whose cgroup is empty leaves it idle, the job's next run takes
/// it, and idle cgroups unused for `linger` are removed. Where runs have the memory controller and Linux
/// cannot reset a cgroup's `memory.peak` for one reader (before 6.12), a run's peak would include its
/// predecessors', so there each run still gets a new cgroup, removed after it.
final class RunCgroups: Sendable {
    let tree: RunCgroupTree
    let events: CgroupEvents
    /// Whether an ended run's empty cgroup is kept for its job's next run (`RunCgroupTree.reusable`).
    let reuses: Bool
    /// How long an idle cgroup is kept for its job's next run: removed by the sweep after `linger` to
    /// `linger` + 10% unused.
    let linger: Duration
    private var lingerNanoseconds: UInt64 {
        UInt64(linger.components.seconds) * 1_000_000_000 + UInt64(linger.components.attoseconds / 1_000_000_000)
    }
    /// The runs' queue, where `events`' handlers run.
    private let queue: DispatchQueue
    /// Where cgroups are removed, together every 20–30 ms: an `rmdir` of a cgroup (its teardown in the
    /// kernel) took some 40 µs, on the thread that starts the next runs, and waking a thread for each cost
    /// about as much again (docs/performance.md, "Runs in cgroups (round 15)"). Its thread starts with the
    /// first removal.
    private let remover = BackgroundThread(clearance: nil)
    /// `runs/`, open for the daemon's life: the runs' cgroups are made, opened, read and removed from it.
    /// (Not each of them kept open: every descriptor timerd holds is copied into each child at its clone
    /// and closed again at its `execve`, work that a thousand idle cgroups' descriptors would add to each
    /// command's start; docs/performance.md, "Runs in cgroups (round 16)".)
    private let runsDirectory: FileDescriptor?
    private let state = Locked(State())

    private struct State {
        /// Each job's cgroups: the idle ones, and the slots of every one that exists (idle, in use, or
        /// waiting for its removal), so a new one never takes a name still in use.
        var jobs: [String: Job] = [:]
        /// Cgroups waiting for the next removal.
        var pending: [RunCgroup] = []
        /// When the sweep of idle cgroups is due (nil: none is scheduled).
        var sweepAt: UInt64?
    }

    /// A job's cgroups.
    struct Job {
        var idle: [RunCgroup] = []
        /// The slots of every one that exists: idle, in use, or waiting for its removal.
        var slots: Set<Int> = []

        /// For a run with `limits`: the idle cgroup it takes, or (nil) the slot of the one to make; and
        /// the idle ones made with other limits (the job was replaced), of no more use.
        mutating func claim(limits: [String]) -> (found: RunCgroup?, slot: Int, stale: [RunCgroup]) {
            let stale = idle.filter { $0.limits != limits }
            idle.removeAll { $0.limits != limits }
            if let found = idle.popLast() { return (found, found.slot, stale) }
            var slot = 1
            while slots.contains(slot) { slot += 1 }
            slots.insert(slot)
            return (nil, slot, stale)
        }
    }

    init(tree: RunCgroupTree, events: CgroupEvents, queue: DispatchQueue, linger: Duration = .seconds(30)) {
        self.tree = tree
        self.events = events
        self.queue = queue
        self.reuses = tree.reusable
        self.linger = linger
        runsDirectory = try? tree.runs.open()
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A cgroup for a run of `job` with `limits`: the job's idle one with these limits, else a new one,
    /// `runs/JOB@N` with the lowest N free, with its limits written before anything runs in it. Call on the
    /// runs' queue. Returns it and its directory open for the spawn (the caller closes it).
    func take(job: String, limits: [(file: String, value: String)]) throws(Failure) -> (RunCgroup, FileDescriptor) {
        let wanted = limits.map { "\($0.file)=\($0.value)" }
        let (found, slot, stale) = state.withLock { $0.jobs[job, default: Job()].claim(limits: wanted) }
        for cgroup in stale { remove(cgroup) }
        if var cgroup = found {
            do {
                try resetPeak(&cgroup)
                return (cgroup, try cgroup.directory.open())
            } catch {
                release(cgroup)
                if let failure = error as? Failure { throw failure }
                throw Failure(description: "cannot open the run's cgroup \(cgroup.directory): \(error)")
            }
        }
        let name = "\(job)@\(slot)"
        let directory = runsDirectory.map { tree.runs.child(name, opened: $0) } ?? tree.runs.child(name)
        var made = false
        var handle: FileDescriptor?
        do {
            do {
                try directory.create()
            } catch {
                // One of that name left by an earlier timerd: empty by now (its start swept `runs/`).
                guard error == .fileExists else { throw error }
                try? directory.remove()
                try directory.create()
            }
            made = true
            for (file, value) in limits {
                do { try directory.write(file, value) } catch {
                    throw Failure(description: "cannot set \(file) of the run's cgroup \(directory) to \(value): \(error)")
                }
            }
            let opened = try directory.open()
            handle = opened
            var cgroup = RunCgroup(job: job, slot: slot, directory: directory, limits: wanted)
            try resetPeak(&cgroup)
            return (cgroup, opened)
        } catch {
            try? handle?.close()
            if made { try? directory.remove() }
            free(job: job, slot: slot)
            if let failure = error as? Failure { throw failure }
            throw Failure(description: "cannot make the run's cgroup \(directory): \(error)")
        }
    }

    /// Where cgroups are reused and runs have the memory controller: `memory.peak` opened for the run and
    /// reset, so what it reads at the end is the run's own peak.
    private func resetPeak(_ cgroup: inout RunCgroup) throws(Failure) {
        guard reuses, tree.controllers.contains("memory") else { return }
        do {
            cgroup.peak = try cgroup.directory.openResetPeak()
        } catch {
            throw Failure(description: "cannot reset memory.peak of the run's cgroup \(cgroup.directory): \(error)")
        }
    }

    /// The run in `cgroup` has ended, and nothing is left in it: idle for the job's next run, with
    /// `counters` as they stand now (else, where cgroups are not reused, removed). Call on the runs' queue.
    func keep(_ cgroup: RunCgroup, counters: RunCgroupCounters) {
        guard reuses else { return remove(cgroup) }
        var idle = cgroup
        if let peak = idle.peak { try? peak.close() }
        idle.peak = nil
        idle.before = counters
        idle.idleSince = DispatchTime.now().uptimeNanoseconds
        let deadline = idle.idleSince + lingerNanoseconds
        let schedule = state.withLock { state -> Bool in
            state.jobs[idle.job, default: Job()].idle.append(idle)
            guard state.sweepAt == nil else { return false }
            state.sweepAt = deadline
            return true
        }
        if schedule { scheduleSweep(at: deadline) }
    }

    /// The run in `cgroup` has ended, and something may be left in it (`kill_mode = process`, a run that
    /// could not be watched): removed once it is empty. Call on the runs' queue.
    func release(_ cgroup: RunCgroup) {
        if let peak = cgroup.peak { try? peak.close() }
        var released = cgroup
        released.peak = nil
        remove(released)
    }

    /// Removes `cgroup` within some 30 ms, off the runs' queue, if it is empty then; else once it is,
    /// watched from the runs' queue. Its slot is free once it is gone.
    private func remove(_ cgroup: RunCgroup) {
        let first = state.withLock { state in
            state.pending.append(cgroup)
            return state.pending.count == 1
        }
        guard first else { return }
        // With the loop's next wake for anything else, if one comes within the leeway.
        IOWatcher.shared.after(.now() + .milliseconds(20), leeway: .milliseconds(10), on: queue) { [self] in
            let batch = state.withLock { state in
                defer { state.pending = [] }
                return state.pending
            }
            remover.async { [self] in
                var busy: [RunCgroup] = []
                for cgroup in batch {
                    if Self.removed(cgroup.directory) {
                        free(job: cgroup.job, slot: cgroup.slot)
                    } else {
                        busy.append(cgroup)
                    }
                }
                guard !busy.isEmpty else { return }
                queue.async { [busy] in for cgroup in busy { self.removeOnceEmpty(cgroup) } }
            }
        }
    }

    /// On the runs' queue: removes `cgroup` now if it is empty, else once the watch says it is.
    private func removeOnceEmpty(_ cgroup: RunCgroup) {
        let directory = cgroup.directory
        if Self.removed(directory) { return free(job: cgroup.job, slot: cgroup.slot) }
        let watch = Locked<Int32?>(nil)
        let removeIfEmpty: @Sendable () -> Void = { [self] in
            guard (try? directory.isPopulated()) == false, Self.removed(directory), let wd = watch.withLock({ $0 }) else { return }
            events.forget(wd)
            free(job: cgroup.job, slot: cgroup.slot)
        }
        // Unwatchable: left to the next start's sweep (its slot stays taken).
        guard let wd = try? events.watch(directory, handler: removeIfEmpty) else { return }
        watch.withLock { $0 = wd }
        removeIfEmpty()  // it may have emptied before the watch was set
    }

    /// Whether `directory` is gone: removed now, or not there.
    private static func removed(_ directory: CgroupDirectory) -> Bool {
        do {
            try directory.remove()
            return true
        } catch {
            return error == .noSuchFileOrDirectory
        }
    }

    private func free(job: String, slot: Int) {
        state.withLock { state in
            guard var entry = state.jobs[job] else { return }
            entry.slots.remove(slot)
            state.jobs[job] = entry.slots.isEmpty ? nil : entry
        }
    }

    private func scheduleSweep(at deadline: UInt64) {
        let leeway = linger / 10
        IOWatcher.shared.after(DispatchTime(uptimeNanoseconds: deadline), leeway: leeway, on: queue) { [self] in
            sweep()
        }
    }

    /// On the runs' queue: removes the cgroups idle for `linger` or longer, and schedules the next sweep
    /// for when the oldest of those left will have been.
    private func sweep() {
        let now = DispatchTime.now().uptimeNanoseconds
        let span = lingerNanoseconds
        let (expired, next) = state.withLock { state -> ([RunCgroup], UInt64?) in
            var expired: [RunCgroup] = []
            var oldest: UInt64?
            for (job, var entry) in state.jobs where !entry.idle.isEmpty {
                let count = entry.idle.count
                for cgroup in entry.idle where cgroup.idleSince + span <= now { expired.append(cgroup) }
                entry.idle.removeAll { $0.idleSince + span <= now }
                if entry.idle.count != count { state.jobs[job] = entry }
                if let first = entry.idle.map(\.idleSince).min() { oldest = min(oldest ?? first, first) }
            }
            state.sweepAt = oldest.map { $0 + span }
            return (expired, state.sweepAt)
        }
        for cgroup in expired { remove(cgroup) }
        if let next { scheduleSweep(at: next) }
    }

    /// The job's idle cgroups and the slots of all it has, for tests.
    func cgroups(of job: String) -> (idle: [Int], slots: Set<Int>) {
        state.withLock { state in
            let entry = state.jobs[job]
            return (entry?.idle.map(\.slot) ?? [], entry?.slots ?? [])
        }
    }
}
