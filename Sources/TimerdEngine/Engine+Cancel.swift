import TimerdCore

/// `CANCEL` of more than `cancelSlice` jobs (a tag on 100,000 of them): one request, all or nothing, in
/// steps short enough for the fires of other jobs to go on in between. It is checked a slice per input,
/// each answered `Answer.partlyApplied(change)`, the caller giving `Input.continueChange(change)` for the
/// next; after the last, one record of its durable jobs' names is written ahead (`Persist.cancelJobs`).
/// Once that is durable (`Input.changeSaved`) its jobs are gone for every request (their ids are in
/// `cancelsApplying`: none fires, is listed or counted), so the caller may answer then
/// (`isApplyingCancel`); they leave the table a slice per input, each slice's rows deleted behind it
/// (`Persist.cancelledGone`), the answer `.done` coming with the last. Any refusal while checking refuses
/// the whole cancel, nothing changed; so does a write that fails.
extension Engine {
    /// Jobs a cancel checks per input: a slice takes well under a millisecond.
    package static let cancelSlice = 500
    /// Jobs a cancel on disk removes per input (each goes with its timer entry and its `cancelled` event:
    /// 500 took 2 to 8 ms at a load of 5 on 2 cores).
    package static let cancelRemoveSlice = 100

    /// How many of cancel `change`'s jobs, in the order it named them, have left the table; nil once
    /// all have (or when it is not taking effect).
    package func cancelRemovedCount(_ change: UInt64) -> Int? { cancelsApplying[change]?.handled }

    /// Whether `job`'s `CANCEL` is on disk and taking effect: the job is gone but for its slice's turn.
    package func isCancelPending(_ job: EngineJob) -> Bool {
        !cancelsApplying.isEmpty && cancelsApplying.values.contains { $0.ids.contains(job.id) }
    }

    /// Whether cancel `change` is on disk (or needed no write) and its jobs are leaving the table: they
    /// are gone for every request already (`isCancelPending`), so it may be answered.
    package func isApplyingCancel(_ change: UInt64) -> Bool { cancelsApplying[change] != nil }

    /// Jobs of cancels taking effect (`isCancelPending`) still in the table.
    package var cancelPendingCount: Int { cancelPendingByOwner.values.reduce(0, +) }

    /// The jobs in the table but those of cancels taking effect: the jobs there are for every request.
    package var liveJobs: some Sequence<EngineJob> {
        let pending = !cancelsApplying.isEmpty
        return jobs.values.lazy.filter { !pending || !isCancelPending($0) }
    }

    mutating func startCancel(_ names: [JobName], by requester: Requester) -> Result<Answer, TimerdError>? {
        let number = nextChangeNumber
        nextChangeNumber += 1
        // Room for every id at once: a set growing as it goes rehashed tens of thousands in one step.
        cancelsChecking[number] = CancelCheck(names: names, requester: requester, ids: Set(minimumCapacity: names.count))
        return continueCancel(number)
    }

    /// The next slice of cancel `number`: checked (and, after the last, written ahead) or removed.
    mutating func continueCancel(_ number: UInt64) -> Result<Answer, TimerdError>? {
        if cancelsChecking[number] != nil { return checkCancelSlice(number) }
        return removeCancelSlice(number)
    }

    private mutating func checkCancelSlice(_ number: UInt64) -> Result<Answer, TimerdError>? {
        guard var check = cancelsChecking.removeValue(forKey: number) else { return .success(.done) }
        let checked = check.slices.count * Self.cancelSlice
        let slice = check.names[checked..<min(checked + Self.cancelSlice, check.names.count)]
        let jobs: [EngineJob]
        do { jobs = try checkCancel(slice, by: check.requester) } catch { return .failure(error) }
        for job in jobs {
            check.ids.insert(job.id)
            check.byOwner[job.ownerUID, default: 0] += 1
            if isSavedByRequests(job) { check.saved.append(job.name) } else { check.unsaved.insert(job.id) }
        }
        check.slices.append(jobs)
        guard checked + jobs.count == check.names.count else {
            cancelsChecking[number] = check
            return .success(.partlyApplied(number))
        }
        guard !check.saved.isEmpty else { return applyCancel(check, change: number) }
        // One record for all its jobs (their names): what must be durable before the answer is small,
        // and their rows are deleted behind it (`cancelledGone`).
        let records = [Persist.cancelJobs(number, check.saved)]
        check.saved = []
        cancelsSaving[number] = check
        awaitingSave[number] = PlannedChange(kind: .cancel([]), records: records)
        out.append(.writeAhead(change: number, records: records))
        return nil
    }

    /// The cancel is durable: from now on its jobs are as good as gone.
    mutating func applyCancel(_ check: CancelCheck, change number: UInt64) -> Result<Answer, TimerdError>? {
        let written = check.unsaved.count < check.ids.count
        cancelsApplying[number] = CancelInProgress(
            rest: check.slices.reversed(), ids: check.ids, unsaved: check.unsaved, savedHandled: written ? 0 : nil)
        cancelPendingByOwner.merge(check.byOwner, uniquingKeysWith: +)
        // Its first slice leaves with the next input, not this one: the answer goes out at once, and the
        // step that lets go of the check (its names) is not a removal step too (1.1-1.9 ms together).
        return .success(.partlyApplied(number))
    }

    private mutating func removeCancelSlice(_ number: UInt64) -> Result<Answer, TimerdError> {
        guard var progress = cancelsApplying.removeValue(forKey: number) else { return .success(.done) }
        var slice = progress.rest.popLast() ?? []
        if slice.count > Self.cancelRemoveSlice {
            progress.rest.append(Array(slice[Self.cancelRemoveSlice...]))
            slice.removeSubrange(Self.cancelRemoveSlice...)
        }
        progress.handled += slice.count
        // Their deletions are as good as on disk (the cancel's record, written ahead): their rows go with
        // one record for the slice, not a `deleteJob` each.
        let saved = progress.unsaved.isEmpty ? slice[...] : slice.filter { !progress.unsaved.contains($0.id) }[...]
        savedAhead = saved.map { Persist.deleteJob($0.name) }[...]
        defer { savedAhead = [] }
        var deleted: [JobName] = []
        // A job removed meanwhile (its owner went) is not removed again.
        for job in slice where jobs[job.name] === job && remove(job.name, reason: "cancelled", logged: false, stopRuns: true) {
            progress.removed.append(job.name)
            notePendingGone(job)
            if !progress.unsaved.contains(job.id) { deleted.append(job.name) }
        }
        if let done = progress.savedHandled.map({ $0 + saved.count }) {
            progress.savedHandled = done
            out.append(.persist(.cancelledGone(number, deleted, done: done, finished: progress.rest.isEmpty)))
        }
        guard progress.rest.isEmpty else {
            cancelsApplying[number] = progress
            return .success(.partlyApplied(number))
        }
        if !progress.removed.isEmpty { log(.info, Self.cancelledSummary(progress.removed)) }
        return .success(.done)
    }

    /// A job of a cancel taking effect left the table (its slice's turn, or removed otherwise meanwhile).
    mutating func notePendingGone(_ job: EngineJob) {
        let left = cancelPendingByOwner[job.ownerUID, default: 1] - 1
        cancelPendingByOwner[job.ownerUID] = left > 0 ? left : nil
    }
}
