/// Background changes held while writes fail, in the order they were made, to be written first by the
/// next transaction that commits.
///
/// An outage of hours must not grow it without bound, so a change that a newer one makes pointless is
/// dropped when the newer one comes (the file ends up the same as if both were written, in order):
/// - `putJob` rewrites every column of its row: older held `putJob`, `setPaused` and `recordFire` of
///   that job go;
/// - `setPaused`, `recordFire` and `recordConfigJobFire` replace the older held one of that name (a
///   `recordFire` without a scheduled time takes the older one's: it would have kept it);
/// - `deleteJob` removes the job's row, runs and due fires: every older held change of those goes;
/// - `markCancelled` and `deleteCancelled` (a `CANCEL` of many jobs and its deletions) are held as
///   they come, never dropped;
/// - `recordRun` beyond the `keep` newest held runs of its job would be pruned by the newer ones, and a
///   `recordDueFire` `keep` or more below the newest one's number likewise, or with its number (rewritten).
///
/// Beyond `limit` held changes, the oldest history changes (`recordRun`, `recordDueFire`) are given up
/// and counted as lost; job state is never given up, so the limit can be passed by job state alone.
struct Backlog {
    let limit: Int
    /// The held changes in order; nil where one was dropped.
    private var slots: [StoreChange?] = []
    private(set) var count = 0
    /// Where the held job-state change of each kind and name is.
    private var state: [StateKey: Int] = [:]
    /// Each job's held runs, oldest first.
    private var runs: [String: [Int]] = [:]
    /// Each job's held due fires by number.
    private var fires: [String: [UInt64: Int]] = [:]
    /// The held history changes, oldest first, for the limit (some may have been dropped since).
    private var history: [Int] = []
    private var historyStart = 0

    private struct StateKey: Hashable {
        enum Kind { case put, paused, fire, delete, configFire }
        var kind: Kind
        var name: String

        /// The key of a change held one per name; nil for history.
        init?(_ change: StoreChange) {
            switch change {
            case .putJob(let job): (kind, name) = (.put, job.name)
            case .setPaused(let job, _): (kind, name) = (.paused, job)
            case .recordFire(let job, _, _): (kind, name) = (.fire, job)
            case .deleteJob(let job): (kind, name) = (.delete, job)
            case .recordConfigJobFire(let job, _): (kind, name) = (.configFire, job)
            case .recordRun, .recordDueFire, .markCancelled, .deleteCancelled: return nil
            }
        }

        init(_ kind: Kind, _ name: String) { (self.kind, self.name) = (kind, name) }
    }

    init(limit: Int) {
        precondition(limit > 0, "the backlog's limit must be positive")
        self.limit = limit
    }

    var isEmpty: Bool { count == 0 }

    /// Holds `changes` after the ones held; returns how many history changes were given up for the limit.
    mutating func append(contentsOf changes: some Sequence<StoreChange>) -> Int {
        var lost = 0
        for change in changes { lost += append(change) }
        return lost
    }

    /// Holds `change` after the ones held; returns how many history changes were given up for the limit.
    mutating func append(_ change: StoreChange) -> Int {
        var change = change
        switch change {
        case .putJob(let job):
            for kind in [StateKey.Kind.put, .paused, .fire] { drop(StateKey(kind, job.name)) }
        case .setPaused, .recordConfigJobFire:
            drop(StateKey(change)!)
        case .recordFire(let name, let runs, let lastScheduled):
            if let older = state[StateKey(.fire, name)], case .recordFire(_, _, let olderScheduled)? = slots[older] {
                change = .recordFire(name, runs: runs, lastScheduled: lastScheduled ?? olderScheduled)
                remove(older)
            }
        case .deleteJob(let name):
            for kind in [StateKey.Kind.put, .paused, .fire, .delete] { drop(StateKey(kind, name)) }
            for slot in runs[name] ?? [] { remove(slot) }
            for slot in fires[name]?.values.map({ $0 }) ?? [] { remove(slot) }
        case .recordRun, .recordDueFire, .markCancelled, .deleteCancelled:
            break
        }
        let slot = slots.count
        slots.append(change)
        count += 1
        switch change {
        case .recordRun(let run, let keep):
            runs[run.job, default: []].append(slot)
            history.append(slot)
            // This one stays whatever `keep` is: writing it prunes the stored runs too.
            while let held = runs[run.job], held.count > max(keep, 1) { remove(held[0]) }
        case .recordDueFire(let fire, let keep):
            if let older = fires[fire.job]?[fire.sequence] { remove(older) }
            fires[fire.job, default: [:]][fire.sequence] = slot
            history.append(slot)
            let oldest = Int64(fire.sequence) - Int64(max(keep, 0))
            let pruned = fires[fire.job]!.filter { $0.key != fire.sequence && Int64($0.key) <= oldest }
            for older in pruned.values { remove(older) }
        case .markCancelled, .deleteCancelled:
            // Held as they are, never given up: a cancel's progress, written in order with the rest.
            break
        default:
            state[StateKey(change)!] = slot
        }
        var lost = 0
        while count > limit, let oldest = oldestHistory() {
            remove(oldest)
            lost += 1
        }
        // Dropped changes leave holes; past half the slots, start again with the held ones (in order).
        if slots.count > 1024 && slots.count > 2 * count {
            let held = removeAll()
            let again = append(contentsOf: held)
            assert(again == 0, "the held changes fit the limit they were held under")
        }
        return lost
    }

    /// The held changes in order, leaving the backlog empty.
    mutating func removeAll() -> [StoreChange] {
        let held = slots.compactMap { $0 }
        self = Backlog(limit: limit)
        return held
    }

    private mutating func oldestHistory() -> Int? {
        while historyStart < history.count {
            let slot = history[historyStart]
            historyStart += 1
            if slots[slot] != nil { return slot }
        }
        return nil
    }

    private mutating func drop(_ key: StateKey) {
        if let slot = state[key] { remove(slot) }
    }

    private mutating func remove(_ slot: Int) {
        guard let change = slots[slot] else { return }
        slots[slot] = nil
        count -= 1
        switch change {
        case .recordRun(let run, _):
            runs[run.job]?.removeAll { $0 == slot }
            if runs[run.job]?.isEmpty == true { runs[run.job] = nil }
        case .recordDueFire(let fire, _):
            fires[fire.job]?[fire.sequence] = nil
            if fires[fire.job]?.isEmpty == true { fires[fire.job] = nil }
        default:
            let key = StateKey(change)!
            if state[key] == slot { state[key] = nil }
        }
    }
}
